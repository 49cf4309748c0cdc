"""`session/archive` and `session/unarchive` (unstable; sessions/archive.py), in-process
over raw frames, every frame held to the official schema (FrameChecker) and the answers
to `schema.unstable.json`."""

from __future__ import annotations

import uuid

from test_models_auth_fork import with_raw
from test_unstable_session import unstable_errors

from trio_acp.openhands.sessions import list_cache

UNKNOWN = str(uuid.UUID(int=9))
UNSTABLE_CLIENT = {"plan": {}}


async def listed(raw, **params) -> list[dict]:
    answer = await raw.result("session/list", params)
    assert unstable_errors("ListSessionsResponse", answer) == []
    return answer["sessions"]


def ids(sessions: list[dict]) -> list[str]:
    return sorted(s["sessionId"] for s in sessions)


async def test_archived_sessions_leave_the_list_until_asked_for_and_come_back(env, tmp_path):
    async def body(raw, agent):
        init = await raw.initialize(UNSTABLE_CLIENT)
        assert init["agentCapabilities"]["sessionCapabilities"]["archive"] == {}
        kept = (await raw.new_session(tmp_path))["sessionId"]
        gone = (await raw.new_session(tmp_path))["sessionId"]
        assert ids(await listed(raw)) == sorted([kept, gone])

        answer = await raw.result("session/archive", {"sessionId": gone})
        assert answer == {} and unstable_errors("ArchiveSessionResponse", answer) == []
        # Archiving a live session closed it, as session/close would.
        assert await raw.result("session/status", {"sessionId": gone}) == {"status": "saved"}
        assert await raw.result("session/status", {"sessionId": kept}) == {"status": "open"}
        # Again: it succeeds.
        assert await raw.result("session/archive", {"sessionId": gone}) == {}

        default = await listed(raw)
        assert ids(default) == [kept] and default[0]["archived"] is False
        assert ids(await listed(raw, archived="exclude")) == [kept]
        assert ids(await listed(raw, archived=None)) == [kept]
        only = await listed(raw, archived="only", cwd=str(tmp_path))
        assert [(s["sessionId"], s["archived"]) for s in only] == [(gone, True)]
        both = {s["sessionId"]: s["archived"] for s in await listed(raw, archived="include")}
        assert both == {kept: False, gone: True}

        # An unknown filter is refused, not read as `exclude`; unknown ids get -32002.
        for value in ("_mine", "all"):
            error = (await raw.call("session/list", {"archived": value}))["error"]
            assert error["code"] == -32602 and value in str(error.get("data")), error
        for method in ("session/archive", "session/unarchive"):
            for bad in (UNKNOWN, "../x"):
                error = (await raw.call(method, {"sessionId": bad}))["error"]
                assert error["code"] == -32002 and error["data"] == {"sessionId": bad}

        # Its history is kept: it can still be loaded (an unarchive first, as clients should).
        answer = await raw.result("session/unarchive", {"sessionId": gone})
        assert answer == {} and unstable_errors("UnarchiveSessionResponse", answer) == []
        assert await raw.result("session/unarchive", {"sessionId": gone}) == {}
        assert ids(await listed(raw)) == sorted([kept, gone])
        await raw.result(
            "session/load", {"sessionId": gone, "cwd": str(tmp_path), "mcpServers": []}
        )
        assert await raw.result("session/status", {"sessionId": gone}) == {"status": "open"}
        await raw.result("session/archive", {"sessionId": gone})

    await with_raw(env, body)

    # A restart (a new agent, nothing kept in memory): still archived.
    list_cache.LISTINGS.clear()

    async def after_restart(raw, agent):
        await raw.initialize(UNSTABLE_CLIENT)
        sessions = await listed(raw, archived="include")
        assert sorted(s["archived"] for s in sessions) == [False, True]
        archived = next(s["sessionId"] for s in sessions if s["archived"])
        assert [s["sessionId"] for s in await listed(raw, archived="only")] == [archived]
        assert archived not in ids(await listed(raw))

    await with_raw(env, after_restart)


async def test_a_client_that_knows_no_unstable_feature_sees_the_list_as_before(env, tmp_path):
    async def body(raw, agent):
        await raw.initialize()
        sid = (await raw.new_session(tmp_path))["sessionId"]
        other = (await raw.new_session(tmp_path))["sessionId"]
        await raw.result("session/archive", {"sessionId": other})
        sessions = (await raw.result("session/list", {}))["sessions"]
        # No `archived` field (unknown to the stable schema), no archived session.
        assert [s["sessionId"] for s in sessions] == [sid]
        assert "archived" not in sessions[0]
        # Sending the filter says it knows of archiving: the flag is reported.
        sessions = (await raw.result("session/list", {"archived": "include"}))["sessions"]
        assert {s["sessionId"]: s["archived"] for s in sessions} == {sid: False, other: True}

    await with_raw(env, body)


def test_the_archive_mark_is_kept_by_the_list_cache_and_pages_follow_the_filter(tmp_path):
    """SessionStore alone (no SDK): the mark is read from the index, saved in the list's
    cache file for the next process, seen at once when it changes, and a walk through
    pages keeps its filter."""
    from test_store_list_cache import age, make

    from trio_acp.openhands.sessions.store import PAGE_SIZE, SessionStore

    root = tmp_path / "conversations"
    sids = [
        make(
            root, str(tmp_path), title=f"t{i}", updated=f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z"
        )
        for i in range(2 * PAGE_SIZE + 10)
    ]
    archived = set(sids[::3])
    store = SessionStore(root)
    for sid in archived:
        store.write_archived(sid, True)
        age(root, sid)

    def walk(store: SessionStore, archived_filter: str) -> list[str]:
        shown, cursor = store.list(None, None, archived_filter)
        while cursor is not None:
            page, cursor = store.list(None, cursor, archived_filter)
            shown += page
        return [s.session_id for s in shown]

    want = {str(s) for s in archived}
    assert set(walk(store, "only")) == want
    assert set(walk(store, "exclude")) == {str(s) for s in sids} - want
    assert len(walk(store, "include")) == len(sids)

    # Archived mid-walk: the next page (which follows the first page's order) leaves it out.
    page, cursor = store.list(None, None, "exclude")
    rest = [s for s in sids if s not in archived and str(s) not in {p.session_id for p in page}]
    store.write_archived(rest[0], True)
    archived.add(rest[0])
    later = []
    while cursor is not None:
        more, cursor = store.list(None, cursor, "exclude")
        later += [s.session_id for s in more]
    assert str(rest[0]) not in later and len(later) == len(rest) - 1

    want = {str(s) for s in archived}
    # A new process (nothing in memory) takes the marks from the cache file.
    list_cache.LISTINGS.clear()
    fresh = SessionStore(root)
    assert set(walk(fresh, "only")) == want
    # Unarchived: seen by the next list (the index's stamp changed).
    back = sids[0]
    fresh.write_archived(back, False)
    assert str(back) in walk(fresh, "exclude")
    assert str(back) not in walk(fresh, "only")


def test_a_cache_file_that_says_archived_hides_no_session(tmp_path):
    """The cache file only saves reading: an entry that archives a session its files do
    not (a hand edit, another program) is caught, not believed, and the file set aside."""
    import json

    from test_store_list_cache import make

    from trio_acp.openhands.sessions.store import LIST_CACHE_FILE, SessionStore

    root = tmp_path / "conversations"
    shown = make(root, str(tmp_path), title="shown", updated="2026-01-02T00:00:00Z")
    hidden = make(root, str(tmp_path), title="hidden", updated="2026-01-01T00:00:00Z")
    SessionStore(root).list(None, None)
    cache = root / LIST_CACHE_FILE
    data = json.loads(cache.read_text())
    data["entries"][hidden.hex][1][5] = True  # the archive mark, by hand
    cache.write_text(json.dumps(data))
    list_cache.LISTINGS.clear()  # a new process
    page, _ = SessionStore(root).list(None, None)
    assert [s.session_id for s in page] == [str(shown), str(hidden)]
    assert (root / list_cache.SET_ASIDE_CACHE_FILE).exists()


async def test_archiving_a_session_mid_turn_cancels_the_turn(env, tmp_path):
    """As session/close: the running prompt answers `cancelled`, the session is saved and
    archived. The archive is sent once the turn is known to be running (its first chunk)."""
    from trio_acp.testing import scenario_prompt

    async def body(raw, agent):
        await raw.initialize(UNSTABLE_CLIENT)
        sid = (await raw.new_session(tmp_path))["sessionId"]
        slow = scenario_prompt("slow", "[chunks:4000] [delay_ms:50]")
        await raw.send(
            {
                "jsonrpc": "2.0",
                "id": "p",
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": slow}]},
            }
        )
        while not any(
            f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
            for f in raw.frames
        ):
            await raw.receive()
        assert await raw.result("session/archive", {"sessionId": sid}) == {}
        answer = next((f for f in raw.frames if f.get("id") == "p"), None)
        while answer is None:
            frame = await raw.receive()
            answer = frame if frame.get("id") == "p" else None
        assert answer["result"]["stopReason"] == "cancelled"
        assert await raw.result("session/status", {"sessionId": sid}) == {"status": "saved"}
        assert [s["sessionId"] for s in await listed(raw, archived="only")] == [sid]

    await with_raw(env, body)
