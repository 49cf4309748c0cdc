"""session/list's pages after the first (trio_acp.openhands.sessions.store): they follow the order the
first page's list found and check only the sessions they show, each read as it is now."""

from __future__ import annotations

import base64
import json
import shutil
import uuid
from pathlib import Path

import pytest
from test_store_list_cache import make  # one stored session, as the cache tests build it

from trio_acp.openhands.sessions import store as store_mod
from trio_acp.openhands.sessions.store import PAGE_SIZE, SessionStore


def retitle(root: Path, sid: uuid.UUID, cwd: str, title: str, updated: str) -> None:
    (root / sid.hex / "trio_acp_session.json").write_text(
        json.dumps({"cwd": cwd, "title": title, "updatedAt": updated})
    )


@pytest.fixture
def root(tmp_path):
    return tmp_path / "conversations"


@pytest.fixture
def sessions(root, tmp_path) -> list[uuid.UUID]:
    """2.5 pages of sessions in one cwd, newest first, and one session elsewhere."""
    sids = [
        make(
            root, str(tmp_path), title=f"t{i}", updated=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z"
        )
        for i in range(PAGE_SIZE * 5 // 2)
    ]
    make(root, str(tmp_path / "other"), title="elsewhere", updated="2027-01-01T00:00:00Z")
    return sids[::-1]


def walk(store: SessionStore, cwd, between=None) -> list[list[tuple[str, str | None]]]:
    pages = []
    cursor = None
    while True:
        page, cursor = store.list(cwd, cursor)
        pages.append([(s.session_id, s.title) for s in page])
        if cursor is None:
            return pages
        if between is not None:
            between(len(pages))


def test_a_walk_shows_every_session_once_in_order(root, tmp_path, sessions):
    pages = walk(SessionStore(root), str(tmp_path))
    assert [len(p) for p in pages] == [PAGE_SIZE, PAGE_SIZE, PAGE_SIZE // 2]
    assert [sid for page in pages for sid, _ in page] == [str(s) for s in sessions]
    # Without the walk (its cursor from another process, or forgotten): the same pages.
    page, cursor = SessionStore(root).list(str(tmp_path), None)
    store_mod._WALKS.clear()
    page2, cursor2 = SessionStore(root).list(str(tmp_path), cursor)
    assert [s.session_id for s in page2] == [sid for sid, _ in pages[1]]
    assert cursor2 is not None


def test_pages_after_the_first_check_only_what_they_show(root, tmp_path, sessions, monkeypatch):
    store = SessionStore(root)
    page, cursor = store.list(str(tmp_path), None)
    stamped: list[str] = []
    original = store_mod.stamp
    monkeypatch.setattr(store_mod, "stamp", lambda p: stamped.append(p) or original(p))
    page, cursor = store.list(str(tmp_path), cursor)
    assert len(page) == PAGE_SIZE
    shown = {str(root / uuid.UUID(s.session_id).hex) for s in page}
    assert {p.rsplit("/", 1)[0] for p in stamped} == shown
    assert len(stamped) == 3 * PAGE_SIZE


def test_a_session_changed_mid_walk_is_shown_as_it_is_now(root, tmp_path, sessions):
    later = sessions[PAGE_SIZE + 3]  # on the second page

    def change(after_pages: int) -> None:
        if after_pages == 1:
            retitle(root, later, str(tmp_path), "renamed", "2026-06-01T00:00:00Z")

    pages = walk(SessionStore(root), str(tmp_path), change)
    listed = [entry for page in pages for entry in page]
    assert (str(later), "renamed") in listed
    # Every session once: the renamed one did not move onto the first page it was not on,
    # pushing another onto two pages.
    assert sorted(sid for sid, _ in listed) == sorted(str(s) for s in sessions)
    # The next list (a new walk) puts it first.
    assert SessionStore(root).list(str(tmp_path), None)[0][0].title == "renamed"


def test_a_session_deleted_or_moved_mid_walk_is_left_out(root, tmp_path, sessions):
    gone, moved = sessions[PAGE_SIZE + 1], sessions[2 * PAGE_SIZE + 1]

    def change(after_pages: int) -> None:
        if after_pages == 1:
            shutil.rmtree(root / gone.hex)
            retitle(root, moved, str(tmp_path / "other"), "moved", "2026-01-01T00:00:00Z")

    pages = walk(SessionStore(root), str(tmp_path), change)
    listed = [sid for page in pages for sid, _ in page]
    assert str(gone) not in listed and str(moved) not in listed
    assert len(listed) == len(sessions) - 2
    assert len(pages[1]) == PAGE_SIZE - 1  # a page can be short


def test_a_session_created_mid_walk_does_not_repeat_another(root, tmp_path, sessions):
    def change(after_pages: int) -> None:
        make(root, str(tmp_path), title="new", updated=f"2026-12-0{after_pages}T00:00:00Z")

    pages = walk(SessionStore(root), str(tmp_path), change)
    listed = [sid for page in pages for sid, _ in page]
    assert listed == [str(s) for s in sessions]
    assert [s.title for s in SessionStore(root).list(str(tmp_path), None)[0][:2]] == ["new", "new"]


def test_a_walk_belongs_to_its_cwd(root, tmp_path, sessions):
    page, cursor = SessionStore(root).list(str(tmp_path), None)
    # The cursor with another cwd (here: any): the second page of that cwd's list, the
    # session elsewhere (the newest) first in it, not the walk's.
    page, cursor = SessionStore(root).list(None, cursor)
    assert cursor is not None
    assert [s.session_id for s in page] == [
        str(s) for s in sessions[PAGE_SIZE - 1 : 2 * PAGE_SIZE - 1]
    ]


def test_a_forgotten_walk_and_invalid_cursors(root, tmp_path, sessions, monkeypatch):
    page, cursor = SessionStore(root).list(str(tmp_path), None)
    monkeypatch.setattr(store_mod, "_WALK_SECONDS", -1.0)  # every walk already expired
    page1, cursor = SessionStore(root).list(str(tmp_path), None)
    page2, _ = SessionStore(root).list(str(tmp_path), cursor)
    assert [s.session_id for s in page2] == [str(s) for s in sessions[PAGE_SIZE : 2 * PAGE_SIZE]]
    old = base64.urlsafe_b64encode(json.dumps({"o": PAGE_SIZE}).encode()).decode()
    page2, _ = SessionStore(root).list(str(tmp_path), old)  # an older version's cursor
    assert [s.session_id for s in page2] == [str(s) for s in sessions[PAGE_SIZE : 2 * PAGE_SIZE]]
    for bad in (
        "not base64!",
        base64.urlsafe_b64encode(b"[1]").decode(),
        base64.urlsafe_b64encode(json.dumps({"o": -1}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"o": 50, "w": 7}).encode()).decode(),
    ):
        with pytest.raises(ValueError):
            SessionStore(root).list(str(tmp_path), bad)


def test_walks_kept_are_bounded(root, tmp_path, sessions, monkeypatch):
    monkeypatch.setattr(store_mod, "_WALKS", {})
    for _ in range(store_mod._WALKS_KEPT * 2):
        SessionStore(root).list(str(tmp_path), None)
    assert len(store_mod._WALKS) <= store_mod._WALKS_KEPT
