"""session/list keeps parsed entries between lists (trio_acp.openhands.sessions.store): a list after
a session's files change, appear or vanish sees the change; unchanged ones are not re-read."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

from trio_acp.openhands.sessions import list_cache
from trio_acp.openhands.sessions.store import DAMAGED, SessionStore


def make(root: Path, cwd: str, *, title: str, updated: str, aged: bool = True) -> uuid.UUID:
    """One stored session; `aged`: its files dated a minute ago (a list does not keep an
    entry whose files changed within the last two seconds: store._RACY_NS)."""
    sid = uuid.uuid4()
    d = root / sid.hex
    (d / "events").mkdir(parents=True)
    (d / "base_state.json").write_text(
        json.dumps({"id": str(sid), "workspace": {"working_dir": cwd}})
    )
    (d / "trio_acp_session.json").write_text(
        json.dumps({"cwd": cwd, "title": title, "updatedAt": updated})
    )
    if aged:
        age(root, sid)
    return sid


def age(root: Path, sid: uuid.UUID, seconds: float = 60.0) -> None:
    then = time.time() - seconds
    for name in ("base_state.json", "trio_acp_session.json", "events"):
        os.utime(root / sid.hex / name, (then, then))


@pytest.fixture
def root(tmp_path):
    return tmp_path / "conversations"


def titles(store: SessionStore, cwd=None) -> dict[str, str | None]:
    page, _ = store.list(cwd, None)
    return {s.session_id: s.title for s in page}


def test_unchanged_sessions_are_not_read_again(root, tmp_path, monkeypatch):
    for i in range(3):
        make(root, str(tmp_path), title=f"t{i}", updated=f"2026-01-0{i + 1}T00:00:00Z")
    first = titles(SessionStore(root))
    reads = []
    original = SessionStore._read
    monkeypatch.setattr(
        SessionStore, "_read", lambda self, d, sid: reads.append(d) or original(self, d, sid)
    )
    # A new store of the same directory (the agent makes one per request) shares the cache.
    assert titles(SessionStore(root)) == first
    assert reads == []


def test_a_list_after_a_session_changes_sees_the_change(root, tmp_path):
    sid = make(root, str(tmp_path), title="before", updated="2026-01-01T00:00:00Z")
    other = make(root, str(tmp_path), title="other", updated="2026-01-02T00:00:00Z")
    store = SessionStore(root)
    assert titles(store)[str(sid)] == "before"
    index = root / sid.hex / "trio_acp_session.json"
    index.write_text(
        json.dumps({"cwd": str(tmp_path), "title": "after", "updatedAt": "2026-01-03T00:00:00Z"})
    )
    page, _ = SessionStore(root).list(None, None)
    assert [(s.session_id, s.title) for s in page] == [(str(sid), "after"), (str(other), "other")]


def test_write_index_is_seen_by_the_next_list(root, tmp_path):
    sid = make(root, str(tmp_path), title="t", updated="2026-01-01T00:00:00Z")
    store = SessionStore(root)
    before = store.list(None, None)[0][0].updated_at
    store.write_index(sid, cwd=str(tmp_path / "elsewhere"))
    page, _ = SessionStore(root).list(None, None)
    assert page[0].cwd == str(tmp_path / "elsewhere") and page[0].updated_at != before


def test_new_deleted_and_damaged_sessions_are_seen(root, tmp_path):
    a = make(root, str(tmp_path), title="a", updated="2026-01-01T00:00:00Z")
    b = make(root, str(tmp_path), title="b", updated="2026-01-02T00:00:00Z")
    store = SessionStore(root)
    assert set(titles(store)) == {str(a), str(b)}
    c = make(root, str(tmp_path), title="c", updated="2026-01-03T00:00:00Z")
    shutil.rmtree(root / b.hex)
    (root / a.hex / "base_state.json").write_text("{ truncated")
    listed = titles(SessionStore(root))
    assert set(listed) == {str(a), str(c)}
    assert listed[str(a)] == f"{DAMAGED} a"
    assert b.hex not in list_cache.LISTINGS[str(root)].entries  # pruned


def test_a_session_without_our_index_is_dated_by_its_newest_event(root, tmp_path):
    # Without updatedAt the date comes from the events: adding one must move it.
    sid = make(root, str(tmp_path), title="t", updated="x")
    (root / sid.hex / "trio_acp_session.json").unlink()
    events = root / sid.hex / "events"
    old = events / "event-00000-a.json"
    old.write_text("{}")
    os.utime(old, (1_000_000_000, 1_000_000_000))
    os.utime(events, (1_000_000_000, 1_000_000_000))
    first = SessionStore(root).list(None, None)[0][0].updated_at
    (events / "event-00001-b.json").write_text("{}")
    assert SessionStore(root).list(None, None)[0][0].updated_at > first
