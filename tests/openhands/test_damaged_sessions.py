"""Damaged conversations on disk, and other failures: every error says what failed and what to do.

Raw frames over an in-memory connection to the real agent (the SDK imported once for the
module). One stored conversation is made once (`pristine`), and each test damages a copy
of it the way a crash, a full disk or a hand edit would.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any, cast

import pytest
import trio
import trio.testing
from test_agent_in_process import RawClient

from _inprocess import agent_env, loader
from trio_acp.connection import open_agent_connection
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.testing import ScriptedLLM, scenario_prompt

# What no error message may contain: Trio's group wrapping and the rpc layer's fallback.
SAYS_NOTHING = ("Exceptions from", "sub-exception", "Internal error")


# The summarizer's request ends with this (the SDK's summarizing prompt); the toggle makes
# only those requests fail, the way an overloaded provider would fail them.
SUMMARY_REQUEST = "Now summarize the events"
summaries_fail = {"on": False}


@pytest.fixture(scope="module")
def llm():
    with ScriptedLLM() as server:
        server.add_rule(lambda text: summaries_fail["on"] and SUMMARY_REQUEST in text, "error500")
        yield server


@contextlib.asynccontextmanager
async def raw_agent(env):
    """The agent on an in-memory connection, a RawClient on the other end, initialized."""
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = RawClient(client_stream)
    with trio.fail_after(90):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                await raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": "init",
                        "method": "initialize",
                        "params": {"protocolVersion": 1},
                    }
                )
                await raw.until(lambda f: f.get("id") == "init")
                yield raw
                await client_stream.aclose()


async def call(raw, request_id, method, params) -> tuple[dict, list[dict]]:
    """(response, the frames before it)."""
    await raw.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    frames: list[dict] = []
    response = await raw.until(lambda f: frames.append(f) or f.get("id") == request_id)
    return response, frames


async def say(raw, request_id, sid, text) -> tuple[dict, str]:
    """(response, the agent's message text of the turn)."""
    response, frames = await call(
        raw,
        request_id,
        "session/prompt",
        {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
    )
    chunks = [
        f["params"]["update"]["content"].get("text", "")
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    ]
    return response, "".join(chunks)


def assert_says_something(error: dict, *fragments: str) -> None:
    message = error["message"]
    for bad in SAYS_NOTHING:
        assert bad not in message, message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.fixture(scope="module")
def pristine(llm, tmp_path_factory):
    """A stored conversation made by the agent: (home, session id, cwd)."""
    home = tmp_path_factory.mktemp("pristine")
    ws = tmp_path_factory.mktemp("ws")

    async def make():
        async with raw_agent(agent_env(llm, home)) as raw:
            new, _ = await call(raw, 1, "session/new", {"cwd": str(ws), "mcpServers": []})
            sid = new["result"]["sessionId"]
            response, _ = await say(
                raw, 2, sid, scenario_prompt("terminal", "Say [word:heron] hello")
            )
            assert response["result"]["stopReason"] == "end_turn"
            return sid

    sid = trio.run(make)
    return home, sid, str(ws)


class Stored:
    """A copy of the pristine conversation in this test's own persistence directory."""

    def __init__(self, pristine, tmp_path: Path) -> None:
        source, self.sid, self.cwd = pristine
        self.home = tmp_path / "home"
        shutil.copytree(source, self.home)
        self.dir = self.home / "conversations" / self.sid.replace("-", "")
        self.base = self.dir / "base_state.json"
        self.events = sorted((self.dir / "events").glob("event-*.json"))
        assert len(self.events) >= 4

    def params(self) -> dict:
        return {"sessionId": self.sid, "cwd": self.cwd, "mcpServers": []}


@pytest.fixture
def stored(pristine, tmp_path):
    s = Stored(pristine, tmp_path)
    yield s
    _undo_locks(tmp_path)


def _truncate(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


def _edit(path: Path, **fields) -> None:
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data))


def _make_unreadable(path: Path) -> None:
    # root reads any file whatever its mode: a directory in its place fails the same
    # read (an OSError) the same way.
    if os.geteuid() == 0:
        path.unlink()
        path.mkdir()
    else:
        path.chmod(0)


def _undo_locks(root: Path) -> None:
    if os.geteuid() == 0 and shutil.which("chattr"):
        subprocess.run(["chattr", "-R", "-i", str(root)], capture_output=True)
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):
            path.chmod(0o755 if path.is_dir() else 0o644)


DAMAGE = {
    # name: (damage, file the message must name, what it must say about it)
    "base truncated": (lambda s: _truncate(s.base), "base", "is not valid JSON"),
    "base not an object": (
        lambda s: s.base.write_text("[1, 2]"),
        "base",
        "does not hold a JSON object",
    ),
    "base wrong field type": (lambda s: _edit(s.base, agent=5), "base", "agent: "),
    "base unreadable": (lambda s: _make_unreadable(s.base), "base", "cannot be read"),
    # Deeper than json recurses: a RecursionError, once, failed the whole session/list.
    "base nested too deeply": (
        lambda s: s.base.write_text("[" * 100_000),
        "base",
        "is not valid JSON (nested too deeply)",
    ),
    "event truncated": (lambda s: _truncate(s.events[1]), "event", "is not valid JSON"),
    "event nested too deeply": (
        lambda s: s.events[1].write_text("[" * 100_000),
        "event",
        "is not valid JSON (nested too deeply)",
    ),
    "event empty": (lambda s: s.events[1].write_text(""), "event", "is empty"),
    "event not an object": (
        lambda s: s.events[1].write_text("42"),
        "event",
        "does not hold a JSON object",
    ),
    "event wrong field type": (lambda s: _edit(s.events[1], timestamp=[1]), "event", "timestamp: "),
    "event of an unknown kind": (
        lambda s: _edit(s.events[1], kind="FrobnicateEvent"),
        "event",
        "'FrobnicateEvent'",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGE))
async def test_a_damaged_conversation_names_the_file_and_what_to_do(case, stored, llm):
    damage, which, problem = DAMAGE[case]
    damage(stored)
    named = stored.base if which == "base" else stored.events[1]
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        for request_id, method in [(1, "session/load"), (2, "session/resume")]:
            response, frames = await call(raw, request_id, method, stored.params())
            error = response["error"]
            assert error["code"] == -32603
            assert_says_something(error, str(named), problem, "delete the session", "move")
            assert error["data"] == {"path": str(named)}
            assert not [
                f for f in frames if f.get("method") == "session/update"
            ]  # nothing replayed
        # Not half-registered: the session is not live, the agent still works.
        response, _ = await say(raw, 3, stored.sid, "hello")
        assert response["error"]["code"] == -32002
        listed, _ = await call(raw, 4, "session/list", {})
        [entry] = [s for s in listed["result"]["sessions"] if s["sessionId"] == stored.sid]
        if which == "base" and "field type" not in case:
            assert entry["title"].startswith("[damaged]")  # seen, so that it can be deleted
        new, _ = await call(raw, 5, "session/new", {"cwd": stored.cwd, "mcpServers": []})
        response, _ = await say(raw, 6, new["result"]["sessionId"], "still fine")
        assert response["result"]["stopReason"] == "end_turn"
        deleted, _ = await call(raw, 7, "session/delete", {"sessionId": stored.sid})
        assert deleted["result"] == {}
        listed, _ = await call(raw, 8, "session/list", {})
        assert stored.sid not in [s["sessionId"] for s in listed["result"]["sessions"]]
    assert not stored.dir.exists()


async def test_following_the_advice_opens_the_session(stored, llm):
    _truncate(stored.base)
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        response, _ = await call(raw, 1, "session/load", stored.params())
        assert "Move that file away" in response["error"]["message"]
        stored.base.rename(stored.dir / "base_state.json.bad")
        # The history is still there, and the conversation goes on.
        response, frames = await call(raw, 2, "session/load", stored.params())
        assert "result" in response, response
        replayed = json.dumps([f for f in frames if f.get("method") == "session/update"])
        assert "heron" in replayed
        response, text = await say(raw, 3, stored.sid, scenario_prompt("remember"))
        assert response["result"]["stopReason"] == "end_turn" and "heron" in text


async def test_following_the_advice_for_a_damaged_event_opens_the_history_before_it(stored, llm):
    damaged = stored.events[2]
    _truncate(damaged)
    aside = stored.home / "aside"
    aside.mkdir()
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        response, _ = await call(raw, 1, "session/load", stored.params())
        assert_says_something(
            response["error"], str(damaged), "the event files after it and base_state.json"
        )
        for path in [*stored.events[2:], stored.base]:
            path.rename(aside / path.name)
        response, frames = await call(raw, 2, "session/load", stored.params())
        assert "result" in response, response
        # events[1] is the first prompt: before the damaged file, so it is replayed.
        assert "heron" in json.dumps([f for f in frames if f.get("method") == "session/update"])
        response, _ = await say(raw, 3, stored.sid, "and now?")
        assert response["result"]["stopReason"] == "end_turn"


@pytest.mark.parametrize("case", ["missing", "empty"])
async def test_without_a_base_state_the_session_opens_from_its_history(case, stored, llm):
    if case == "missing":
        stored.base.unlink()
    else:
        stored.base.write_text("")
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        listed, _ = await call(raw, 1, "session/list", {})
        assert stored.sid in [s["sessionId"] for s in listed["result"]["sessions"]]
        response, frames = await call(raw, 2, "session/load", stored.params())
        assert "result" in response, response
        assert "heron" in json.dumps([f for f in frames if f.get("method") == "session/update"])
        response, _ = await say(raw, 3, stored.sid, "go on")
        assert response["result"]["stopReason"] == "end_turn"


@pytest.mark.parametrize("case", ["invalid JSON", "nested too deeply", "a directory"])
async def test_a_damaged_rules_file_is_set_aside_and_reported(case, stored, llm):
    rules = stored.dir / "trio_acp_rules.json"
    if case == "invalid JSON":
        rules.write_text('{"rules": [')
    elif case == "nested too deeply":
        rules.write_text("[" * 100_000)
    else:
        rules.mkdir()
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        response, _ = await call(raw, 1, "session/load", stored.params())
        assert "result" in response, response  # asking again is safe: the session opens
        _, text = await say(raw, 2, stored.sid, "/rules")
        assert (
            str(rules) in text
            and "trio_acp_rules.json.damaged" in text
            and "no 'always' rules" in text
        )
        _, status = await say(raw, 3, stored.sid, "/status")
        assert "rules file" in status and str(rules) in status
    assert (stored.dir / "trio_acp_rules.json.damaged").exists()


@pytest.mark.parametrize("case", ["invalid JSON", "wrong field types", "a directory"])
async def test_a_damaged_session_index_costs_neither_the_list_nor_the_session(case, stored, llm):
    index = stored.dir / "trio_acp_session.json"
    if case == "invalid JSON":
        index.write_text('{"cwd": ')
    elif case == "wrong field types":
        index.write_text(json.dumps({"cwd": ["/x"], "title": 3, "updatedAt": 7}))
    else:
        index.unlink()
        index.mkdir()
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        listed, _ = await call(raw, 1, "session/list", {"cwd": stored.cwd})
        assert [s["sessionId"] for s in listed["result"]["sessions"]] == [stored.sid]
        response, _ = await call(raw, 2, "session/load", stored.params())
        assert "result" in response, response
        response, _ = await say(raw, 3, stored.sid, "hello")
        assert response["result"]["stopReason"] == "end_turn"


async def test_one_unreadable_conversation_does_not_fail_the_list(stored, llm):
    # An OpenHands CLI conversation (no index of ours) whose workspace has the wrong type.
    other = stored.home / "conversations" / ("0" * 32)
    shutil.copytree(stored.dir, other)
    (other / "trio_acp_session.json").unlink()
    _edit(other / "base_state.json", workspace="not an object")
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        listed, _ = await call(raw, 1, "session/list", {})
        assert [s["sessionId"] for s in listed["result"]["sessions"]] == [stored.sid]


async def test_a_delete_that_cannot_remove_everything_says_what_is_left(stored, llm):
    locked = stored.events[2]
    if os.geteuid() == 0:
        if (
            not shutil.which("chattr")
            or subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode
        ):
            pytest.skip("cannot make a file undeletable here (root without chattr +i)")
    else:
        locked.parent.chmod(0o555)
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        response, _ = await call(raw, 1, "session/delete", {"sessionId": stored.sid})
        assert response["error"]["code"] == -32603
        assert_says_something(response["error"], str(locked), "by hand", str(stored.dir))


async def test_an_unexpected_failure_in_a_turn_names_what_failed(stored, llm):
    # The conversation's events directory replaced by a file while the session is open:
    # the SDK cannot record the prompt.
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        response, _ = await call(raw, 1, "session/load", stored.params())
        assert "result" in response
        # A turn first: the conversation is open (a load opens it after its answer,
        # sessions/stored_load.py), the failure is the turn's.
        response, _ = await say(raw, 2, stored.sid, "hello")
        assert response["result"]["stopReason"] == "end_turn"
        shutil.rmtree(stored.dir / "events")
        (stored.dir / "events").write_text("not a directory")
        response, _ = await say(raw, 3, stored.sid, "hello")
        assert response["error"]["code"] == -32603
        assert_says_something(
            response["error"], "session/prompt failed", str(stored.dir / "events")
        )


async def test_condense_with_nothing_to_condense_says_so_and_leaves_no_request(llm, tmp_path):
    async with raw_agent(agent_env(llm, tmp_path / "home")) as raw:
        new, _ = await call(raw, 1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = new["result"]["sessionId"]
        before = len(llm.requests)
        response, text = await say(raw, 2, sid, "/condense")
        assert response["result"]["stopReason"] == "end_turn"
        assert text.startswith("Nothing to condense yet")
        # The next prompt is just a prompt: no summary the user was told would not happen.
        response, text = await say(raw, 3, sid, "hello")
        assert response["result"]["stopReason"] == "end_turn" and text == "Echo: hello"
        assert not [r for r in llm.requests[before:] if SUMMARY_REQUEST in json.dumps(r.body)]


async def test_condense_while_the_model_fails_says_so_and_the_session_recovers(llm, tmp_path):
    async with raw_agent(agent_env(llm, tmp_path / "home")) as raw:
        new, _ = await call(raw, 1, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        sid = new["result"]["sessionId"]
        response, _ = await say(raw, 2, sid, "hello")
        assert response["result"]["stopReason"] == "end_turn"
        summaries_fail["on"] = True
        try:
            response, text = await say(raw, 3, sid, "/condense")
        finally:
            summaries_fail["on"] = False
        assert response["result"]["stopReason"] == "end_turn"
        assert text.startswith("Could not condense: the model call that writes the summary failed")
        assert "500" in text and not any(bad in text for bad in SAYS_NOTHING)
        # The failed request is not left for the next turn to serve first (it would fold
        # the user's new message into a summary instead of answering it).
        before = len(llm.requests)
        response, text = await say(raw, 4, sid, "again")
        assert response["result"]["stopReason"] == "end_turn" and text == "Echo: again"
        assert not [r for r in llm.requests[before:] if SUMMARY_REQUEST in json.dumps(r.body)]
        response, text = await say(raw, 5, sid, "/condense")
        assert text.startswith("Conversation condensed")


async def test_a_conversation_that_fails_to_open_for_another_reason_says_why_and_where(stored, llm):
    # Nothing damaged: a base_state.json copied from another conversation (another id).
    _edit(stored.base, id="0" * 32)
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        response, _ = await call(raw, 1, "session/load", stored.params())
        assert response["error"]["code"] == -32603
        assert_says_something(
            response["error"],
            f"session {stored.sid} cannot be opened: ValueError: Conversation ID mismatch",
            str(stored.dir),
            "delete the session",
        )


async def test_a_session_that_cannot_start_raises_the_failure_itself_not_a_group():
    from trio_acp.openhands.editor.session_roots import SessionRoots
    from trio_acp.openhands.sessions.session import Session
    from trio_acp.openhands.sessions.session_parts import SessionBuild

    def factory(**_):
        raise OSError(28, "No space left on device", "/x/base_state.json")

    session = Session(
        session_id=uuid.UUID(int=0),
        roots=SessionRoots("/"),
        client=None,
        # Any SDK stand-in: the factory fails before the SDK is used.
        build=SessionBuild(sdk=cast(Any, object()), open_local=factory),
    )
    async with trio.open_nursery() as nursery:
        with pytest.raises(OSError) as info:
            await nursery.start(session.serve)
    assert info.value.filename == "/x/base_state.json"


async def test_only_the_canonical_session_id_names_a_session(stored, llm):
    # uuid.UUID reads {…}, urn:uuid:…, upper-case and dash-less forms too: each opened the
    # session under an id the client never got. Only the id session/new gave is one.
    others = ["{" + stored.sid + "}", "urn:uuid:" + stored.sid, stored.sid.upper()]
    others.append(uuid.UUID(stored.sid).hex)
    async with raw_agent(agent_env(llm, stored.home)) as raw:
        for i, other in enumerate(others):
            response, frames = await call(
                raw, f"load{i}", "session/load", {**stored.params(), "sessionId": other}
            )
            assert response["error"]["code"] == -32002, (other, response)
            assert not [f for f in frames if f.get("method") == "session/update"]
        response, _ = await call(raw, "load", "session/load", stored.params())
        assert "result" in response, response
        for i, other in enumerate(others):
            response, _ = await say(raw, f"say{i}", other, "hello")
            assert response["error"]["code"] == -32002, (other, response)
        response, _ = await say(raw, "say", stored.sid, "hello")
        assert response["result"]["stopReason"] == "end_turn"
