"""session/list's cache saved for the next process (trio_acp.openhands.sessions.store, LIST_CACHE_FILE):
a new process's first list uses it for the sessions whose files have not changed, and only for
those; a damaged or foreign cache file costs reads, never a wrong list."""

from __future__ import annotations

import json
import os
import shutil
import stat
import threading
import time
import uuid
from pathlib import Path

import pytest
from test_store_list_cache import age, make  # one stored session, as the cache tests build it

from trio_acp.openhands.sessions import list_cache
from trio_acp.openhands.sessions import store as store_mod
from trio_acp.openhands.sessions.store import DAMAGED, LIST_CACHE_FILE, PAGE_SIZE, SessionStore


@pytest.fixture
def root(tmp_path):
    return tmp_path / "conversations"


def new_process(root: Path) -> None:
    """Forget what this process has parsed, as a new process starts without it."""
    list_cache.LISTINGS.pop(str(root), None)
    store_mod._WALKS.clear()


def listed(root: Path, cwd=None) -> list[tuple[str, str | None]]:
    page, _ = SessionStore(root).list(cwd, None)
    return [(s.session_id, s.title) for s in page]


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The session directories read from their files (not taken from a cache)."""
    read: list[str] = []
    original = SessionStore._read
    monkeypatch.setattr(
        SessionStore, "_read", lambda self, d, sid: read.append(d) or original(self, d, sid)
    )
    return read


def test_a_new_process_lists_from_the_saved_cache(root, tmp_path, reads, monkeypatch):
    monkeypatch.setattr(store_mod, "PAGE_SIZE", 2)
    sids = [
        make(root, str(tmp_path), title=f"t{i}", updated=f"2026-01-0{i + 1}T00:00:00Z")
        for i in range(3)
    ]
    first = listed(root)
    assert len(reads) == 3
    cache = root / LIST_CACHE_FILE
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600  # titles are the user's words
    new_process(root)
    reads.clear()
    assert listed(root) == first == [(str(sids[2]), "t2"), (str(sids[1]), "t1")]
    # The cache file orders the list; what the page shows is read from its sessions' own
    # files (once per process: store.SessionStore._vouch), the rest is not read.
    assert sorted(os.path.basename(d) for d in reads) == sorted(s.hex for s in sids[1:])
    reads.clear()
    assert listed(root) == first and reads == []
    # The cache file is no session, and nothing else is left beside it.
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [LIST_CACHE_FILE, *(s.hex for s in sids)]
    )


def test_the_saved_cache_is_checked_against_the_files(root, tmp_path, reads):
    keep, changed, gone, damaged = (
        make(root, str(tmp_path), title=name, updated=f"2026-01-0{i + 1}T00:00:00Z")
        for i, name in enumerate(("keep", "changed", "gone", "damaged"))
    )
    listed(root)
    # Another process changes, deletes, damages and creates sessions; then a new one lists.
    store = SessionStore(root)
    store.write_index(changed, cwd=str(tmp_path), title=None)
    index = root / changed.hex / "trio_acp_session.json"
    index.write_text(json.dumps({**json.loads(index.read_text()), "title": "renamed"}))
    shutil.rmtree(root / gone.hex)
    (root / damaged.hex / "base_state.json").write_text("{ truncated")
    new = make(root, str(tmp_path), title="new", updated="2027-01-01T00:00:00Z")
    new_process(root)
    reads.clear()
    assert listed(root) == [
        (str(new), "new"),
        (str(changed), "renamed"),  # write_index dated it now
        (str(damaged), f"{DAMAGED} damaged"),
        (str(keep), "keep"),
    ]
    # Read: the changed ones, and the unchanged one the page shows (_vouch).
    assert sorted(os.path.basename(d) for d in reads) == sorted(
        s.hex for s in (changed, damaged, new, keep)
    )
    reads.clear()
    listed(root)
    # Once: only the sessions changed in the last 2 s (_RACY_NS) are read again.
    assert sorted(os.path.basename(d) for d in reads) == sorted(s.hex for s in (changed, damaged))


def test_a_damaged_or_foreign_cache_file_is_not_used(root, tmp_path, reads):
    sid = make(root, str(tmp_path), title="t", updated="2026-01-01T00:00:00Z")
    listed(root)
    cache = root / LIST_CACHE_FILE
    good = json.loads(cache.read_text())
    ((stamps, entry),) = good["entries"].values()
    other = str(uuid.uuid4())
    for bad in (
        "{ truncated",
        json.dumps([1, 2]),
        json.dumps({**good, "format": "0/0"}),  # another format, or version of trio-acp
        json.dumps({**good, "entries": [1]}),
        # Entries that do not fit their directory or their shape.
        json.dumps({**good, "entries": {sid.hex: [stamps, [other, *entry[1:]]]}}),
        json.dumps({**good, "entries": {sid.hex: [stamps, [entry[0], "relative", *entry[2:]]]}}),
        json.dumps({**good, "entries": {sid.hex: [stamps[:2], entry]}}),
        json.dumps({**good, "entries": {sid.hex: [[[1, 2.5, 3], *stamps[1:]], entry]}}),
        json.dumps({**good, "entries": {sid.hex: [stamps, [*entry[:4], "x"]]}}),
        json.dumps({**good, "entries": {"not-a-uuid": [stamps, entry]}}),
    ):
        cache.write_text(bad)
        new_process(root)
        reads.clear()
        assert listed(root) == [(str(sid), "t")], bad
        assert len(reads) == 1, bad
    # The well-formed one is used: it stands for the files it was read from (the page's
    # sessions are read once all the same, _vouch, and agree with it: it stays).
    cache.write_text(json.dumps(good))
    new_process(root)
    reads.clear()
    assert listed(root) == [(str(sid), "t")] and len(reads) == 1
    assert json.loads(cache.read_text()) == good
    reads.clear()
    assert listed(root) == [(str(sid), "t")] and reads == []


def test_an_entry_read_just_after_its_files_changed_is_read_again(root, tmp_path, reads):
    # Two versions of a file written within one tick of the file system's clock, at the
    # same size, have the same stamp: the entry of a file that changed that recently is not
    # kept (store._RACY_NS), or the second version would never be seen.
    sid = make(root, str(tmp_path), title="before", updated="2026-01-01T00:00:00Z", aged=False)
    index = root / sid.hex / "trio_acp_session.json"
    assert listed(root) == [(str(sid), "before")]
    st = index.stat()
    index.write_text(index.read_text().replace("before", "after!"))  # same size, same inode
    os.utime(index, ns=(st.st_atime_ns, st.st_mtime_ns))  # within the same tick
    assert index.stat().st_ino == st.st_ino and index.stat().st_size == st.st_size
    assert listed(root) == [(str(sid), "after!")]
    new_process(root)
    assert listed(root) == [(str(sid), "after!")]
    # Once its files are older, it is kept like any other.
    age(root, sid)
    listed(root)
    new_process(root)
    reads.clear()
    assert listed(root) == [(str(sid), "after!")] and len(reads) == 1  # _vouch
    reads.clear()
    assert listed(root) == [(str(sid), "after!")] and reads == []


def test_a_cache_that_cannot_be_saved_costs_nothing_but_time(root, tmp_path, monkeypatch):
    sid = make(root, str(tmp_path), title="t", updated="2026-01-01T00:00:00Z")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(list_cache.tempfile, "mkstemp", refuse)
    assert listed(root) == [(str(sid), "t")]
    assert not (root / LIST_CACHE_FILE).exists()
    new_process(root)
    assert listed(root) == [(str(sid), "t")]


def test_lists_at_once_while_sessions_come_and_go(root, tmp_path):
    # The agent lists in worker threads: two lists of one directory at once share its
    # entries (and save its cache file) without losing or repeating a session.
    steady = {
        str(make(root, str(tmp_path), title=f"t{i}", updated=f"2026-01-01T00:00:{i:02d}Z"))
        for i in range(PAGE_SIZE // 2)
    }
    errors: list[BaseException] = []
    stop = time.monotonic() + 1.0

    def lister() -> None:
        try:
            while time.monotonic() < stop:
                if threading.current_thread().name == "fresh":
                    new_process(root)  # a store of its own, from the cache file
                shown = {sid for sid, _ in listed(root)}
                assert steady <= shown, steady - shown
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=lister, name=n) for n in ("a", "b", "fresh")]
    for t in threads:
        t.start()
    while time.monotonic() < stop:
        sid = make(root, str(tmp_path), title="churn", updated="2027-01-01T00:00:00Z")
        shutil.rmtree(root / sid.hex)
    for t in threads:
        t.join()
    assert errors == []
    new_process(root)
    assert {sid for sid, _ in listed(root)} == steady
