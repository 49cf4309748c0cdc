"""Hostile files in the persistence directory (trio_acp.openhands.sessions.store): whatever a file
holds, session/list answers, a damaged session lists as damaged, the cache file never
speaks for a session against its own files, and what is shown is fit to be shown."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import orjson
import pytest
from test_store_list_cache import make  # one stored session, as the cache tests build it

from trio_acp.openhands.sessions import list_cache
from trio_acp.openhands.sessions import store as store_mod
from trio_acp.openhands.sessions.damage import find_damage
from trio_acp.openhands.sessions.store import (
    DAMAGED,
    LIST_CACHE_FILE,
    SET_ASIDE_CACHE_FILE,
    SessionStore,
    parse_session_id,
)
from trio_acp.openhands.translate.text import MAX_TITLE_CHARS

NESTED = "[" * 100_000


@pytest.fixture
def root(tmp_path):
    return tmp_path / "conversations"


def new_process(root: Path) -> None:
    list_cache.LISTINGS.pop(str(root), None)
    store_mod._WALKS.clear()


def listed(root: Path, cwd=None) -> list[tuple[str, str, str | None]]:
    page, _ = SessionStore(root).list(cwd, None)
    # As the agent answers it: a page that cannot be encoded fails the whole request.
    orjson.dumps(
        [[s.session_id, s.cwd, s.title, s.updated_at, s.additional_directories] for s in page]
    )
    return [(s.session_id, s.cwd, s.title) for s in page]


def test_a_deeply_nested_cache_file_is_set_aside_and_rebuilt(root, tmp_path):
    a = make(root, str(tmp_path), title="a", updated="2026-01-01T00:00:00Z")
    b = make(root, str(tmp_path), title="b", updated="2026-01-02T00:00:00Z")
    want = [(str(b), str(tmp_path), "b"), (str(a), str(tmp_path), "a")]
    assert listed(root) == want
    cache = root / LIST_CACHE_FILE
    cache.write_text(NESTED)
    new_process(root)
    assert listed(root) == want
    assert (root / SET_ASIDE_CACHE_FILE).read_text() == NESTED  # kept for a look
    rebuilt = json.loads(cache.read_text())
    assert sorted(rebuilt["entries"]) == sorted([a.hex, b.hex])
    new_process(root)
    assert listed(root) == want


def test_a_deeply_nested_base_state_lists_that_session_as_damaged(root, tmp_path):
    ok = make(root, str(tmp_path), title="ok", updated="2026-01-01T00:00:00Z")
    bad = make(root, str(tmp_path), title="bad", updated="2026-01-02T00:00:00Z")
    (root / bad.hex / "base_state.json").write_text(NESTED)
    assert listed(root) == [
        (str(bad), str(tmp_path), f"{DAMAGED} bad"),
        (str(ok), str(tmp_path), "ok"),
    ]
    damage = find_damage(root / bad.hex, check_state=lambda d: None, check_event=lambda d: None)
    assert damage is not None and damage.problem == "is not valid JSON (nested too deeply)"


def test_a_deeply_nested_index_or_event_costs_only_its_session(root, tmp_path):
    ok = make(root, str(tmp_path), title="ok", updated="2026-01-01T00:00:00Z")
    index_less = make(root, str(tmp_path), title="x", updated="2026-01-02T00:00:00Z")
    (root / index_less.hex / "trio_acp_session.json").unlink()  # titled by its first event
    (root / index_less.hex / "events" / f"event-00000-{uuid.uuid4()}.json").write_text(NESTED)
    nested_index = make(root, str(tmp_path), title="y", updated="2026-01-03T00:00:00Z")
    (root / nested_index.hex / "trio_acp_session.json").write_text(NESTED)
    shown = {sid: title for sid, _, title in listed(root)}
    assert shown[str(ok)] == "ok"
    # Both still listed, from base_state.json's working directory, untitled.
    assert shown[str(index_less)] is None and shown[str(nested_index)] is None


def _forge(root: Path, sid: uuid.UUID, **changes) -> None:
    """Rewrite the cache file's entry of `sid` (its stamps kept: it still looks current)."""
    cache = root / LIST_CACHE_FILE
    data = json.loads(cache.read_text())
    stamps, (session_id, cwd, title, updated, dirs, archived) = data["entries"][sid.hex]
    entry = {
        "cwd": cwd,
        "title": title,
        "updated": updated,
        "dirs": dirs,
        "archived": archived,
        **changes,
    }
    data["entries"][sid.hex] = [
        stamps,
        [
            session_id,
            entry["cwd"],
            entry["title"],
            entry["updated"],
            entry["dirs"],
            entry["archived"],
        ],
    ]
    cache.write_text(json.dumps(data))


@pytest.mark.parametrize(
    "forged",
    [
        {"cwd": "/etc"},
        {"title": "something else"},
        {"title": "\x1b[31mred\x1b[0m" * 500_000},  # 5 MB of escape codes
        {"dirs": ["/etc"]},
        {"archived": True},  # would hide it from the default list (sessions/archive.py)
    ],
    ids=["cwd", "title", "escapes", "directories", "archived"],
)
def test_a_forged_cache_entry_never_outranks_the_sessions_files(root, tmp_path, forged):
    other = make(root, str(tmp_path), title="other", updated="2026-01-01T00:00:00Z")
    mine = make(root, str(tmp_path), title="mine", updated="2026-01-02T00:00:00Z")
    want = [(str(mine), str(tmp_path), "mine"), (str(other), str(tmp_path), "other")]
    assert listed(root) == want
    _forge(root, mine, **forged)
    new_process(root)
    assert listed(root) == want
    page, _ = SessionStore(root).list(None, None)
    assert [s.additional_directories for s in page] == [[], []]
    # A cache caught lying is set aside (if it got as far as being used) and the one saved
    # instead holds what the files say.
    saved = json.loads((root / LIST_CACHE_FILE).read_text())
    assert saved["entries"][mine.hex][1][1:3] == [str(tmp_path), "mine"]
    new_process(root)
    assert listed(root) == want


def test_a_forged_cwd_in_the_cache_hides_no_session_from_a_filtered_list(root, tmp_path):
    # The cache's cwd decides which sessions a filtered list reads; one it put elsewhere
    # would be left out of its own cwd's list, never read, never vouched for.
    elsewhere = tmp_path / "elsewhere"
    other = make(root, str(elsewhere), title="other", updated="2026-01-01T00:00:00Z")
    mine = make(root, str(tmp_path), title="mine", updated="2026-01-02T00:00:00Z")
    want = [(str(mine), str(tmp_path), "mine")]
    assert listed(root, cwd=str(tmp_path)) == want
    _forge(root, mine, cwd=str(elsewhere))
    new_process(root)
    assert listed(root, cwd=str(tmp_path)) == want
    # ...and the list of the cwd it was moved to does not show it either.
    _forge(root, mine, cwd=str(elsewhere))
    new_process(root)
    assert listed(root, cwd=str(elsewhere)) == [(str(other), str(elsewhere), "other")]
    saved = json.loads((root / LIST_CACHE_FILE).read_text())
    assert saved["entries"][mine.hex][1][1] == str(tmp_path)


def test_a_filtered_list_reads_each_session_of_another_cwd_once_per_process(
    root, tmp_path, monkeypatch
):
    for n in range(5):
        make(root, str(tmp_path / "elsewhere"), title=f"o{n}", updated="2026-01-01T00:00:00Z")
    mine = make(root, str(tmp_path), title="mine", updated="2026-01-02T00:00:00Z")
    assert listed(root, cwd=str(tmp_path)) == [(str(mine), str(tmp_path), "mine")]
    new_process(root)
    reads: list[str] = []
    original = store_mod._read_json
    monkeypatch.setattr(store_mod, "_read_json", lambda p: reads.append(str(p)) or original(p))
    listed(root, cwd=str(tmp_path))
    # Each session of the other cwd: its index only (it names the cwd), once.
    others = [p for p in reads if mine.hex not in p]
    assert len(others) == 5 and all(p.endswith("/trio_acp_session.json") for p in others)
    first = len(reads)
    listed(root, cwd=str(tmp_path))
    assert len(reads) == first  # checked once, then trusted for this process


def test_a_forged_entry_for_no_session_hides_none(root, tmp_path):
    sid = make(root, str(tmp_path), title="t", updated="2026-01-01T00:00:00Z")
    listed(root)
    cache = root / LIST_CACHE_FILE
    data = json.loads(cache.read_text())
    data["entries"][sid.hex][1] = None  # "not a conversation"
    cache.write_text(json.dumps(data))
    new_process(root)
    assert listed(root) == [(str(sid), str(tmp_path), "t")]


def test_titles_are_cleaned(root, tmp_path):
    titles = {
        "\x1b[31mred\x1b[0m and \x1b]0;window title\x07plain": "red and plain",
        "a\nb\tc\x00d\x7fe\x9bf": "a b c d e f",
        "\u202eevil\u2066 x": "evil x",
        "lone \ud800 surrogate": "lone surrogate",
        "x" * 5_000_000: "x" * (MAX_TITLE_CHARS - 1) + "…",
        "\x1b[31m" * 1_000_000: None,
    }
    sids = {}
    for i, title in enumerate(titles):
        sid = make(root, str(tmp_path), title="placeholder", updated=f"2026-01-0{i + 1}T00:00:00Z")
        index = root / sid.hex / "trio_acp_session.json"
        index.write_text(json.dumps({**json.loads(index.read_text()), "title": title}))
        sids[str(sid)] = titles[title]
    shown = {sid: title for sid, _, title in listed(root)}
    assert shown == sids


def test_values_that_cannot_be_sent_are_not_listed(root, tmp_path):
    ok = make(root, str(tmp_path), title="ok", updated="2026-01-01T00:00:00Z")
    for changes in (
        {"cwd": "/tmp/\ud800"},
        {"additionalDirectories": ["/tmp/\udfff"]},
        {"updatedAt": "x" * 1_000_000},
        {"updatedAt": "2026-01-01\x1b[2J"},
    ):
        sid = make(root, str(tmp_path), title="t", updated="2026-01-02T00:00:00Z")
        index = root / sid.hex / "trio_acp_session.json"
        index.write_text(json.dumps({**json.loads(index.read_text()), **changes}))
    page, _ = SessionStore(root).list(None, None)
    listed(root)  # encodable
    assert str(ok) in [s.session_id for s in page]
    for s in page:
        assert len(s.updated_at) < 40 and s.updated_at.isprintable()
        # An unusable cwd in the index: base_state.json's working directory instead.
        assert s.cwd == str(tmp_path)
        assert s.additional_directories == []


def test_only_the_canonical_session_id_is_one():
    sid = uuid.uuid4()
    assert parse_session_id(str(sid)) == sid
    for other in (
        "{" + str(sid) + "}",
        "urn:uuid:" + str(sid),
        str(sid).upper(),
        sid.hex,
        " " + str(sid),
        str(sid)[:-1] + "g",
        None,
        7,
    ):
        assert parse_session_id(other) is None, other
