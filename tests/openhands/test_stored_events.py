"""session/load's own reading of the event files (sdk/stored_events.py) against the SDK's
parse of the same files, and the load answered before the SDK opens the conversation
(sessions/stored_load.py).

The views must replay exactly as the SDK's events do: the same updates, in the same
order, on a varied stored conversation (every kind of tool call, thoughts, images,
rejections, condensations, errors, interruptions: test_replay_windows.py's) and on one
an agent ran through the scripted scenarios (text, tool calls, reasoning, model errors,
a sub-agent, a condensation, a cancelled turn). Every field the SDK's object has, the
view reads the same.

The SDK's open after the load is held by a gate the test opens (`HeldOpen`), so the order
of what happens is decided by events, never by time: a prompt waits for the open; a
cancel, at each step of it, answers at once; a close while it is held.
"""

from __future__ import annotations

import enum
import json
import uuid
from pathlib import Path
from typing import Any, cast

import pytest
import trio
import trio.lowlevel
import trio.testing
from openhands.sdk.conversation.event_store import EventLog
from openhands.sdk.io import LocalFileStore
from pydantic import BaseModel
from test_replay_windows import store, varied_history

from _inprocess import RecordingClient, agent_env, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.permissions import turn_points
from trio_acp.openhands.sdk.stored_events import (
    StoredEvent,
    StoredEventsError,
    read_events,
)
from trio_acp.openhands.sessions import stored_load
from trio_acp.openhands.translate import Translator, coalesce
from trio_acp.openhands.translate.content import class_names
from trio_acp.rpc import RequestError
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair

TIMEOUT = 120


def sdk_events(directory: Path) -> list[Any]:
    """What the SDK's open reads: its event log, iterated."""
    return list(EventLog(LocalFileStore(str(directory)), "events"))


def replay(events: list[Any], cwd: str) -> list[Any]:
    return [schema.to_wire(u) for u in coalesce(Translator(cwd).replay(events))]


def same(ours: Any, theirs: Any, where: str) -> None:
    """`ours` reads as `theirs`: every field of an SDK model, recursively."""
    if isinstance(theirs, BaseModel):
        assert type(ours).__name__ == type(theirs).__name__, where
        assert class_names(ours) == class_names(theirs), where
        assert isinstance(ours, type(theirs)), where  # a view passes for its SDK class
        for name in type(theirs).model_fields:
            same(getattr(ours, name), getattr(theirs, name), f"{where}.{name}")
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(theirs, dict):
        assert ours.keys() == theirs.keys(), where
        for key in theirs:
            same(ours[key], theirs[key], f"{where}[{key!r}]")
    else:
        assert type(ours) is type(theirs) and ours == theirs, where
        if isinstance(theirs, enum.Enum):
            assert ours is theirs, where


def ours(directory: Path) -> list[Any]:
    """What a load reads: the views, the active branch checked from base_state.json's leaf."""
    base = directory / "base_state.json"
    leaf = json.loads(base.read_text()).get("leaf_event_id") if base.exists() else None
    return read_events(directory, leaf)


def check_against_the_sdk(directory: Path, cwd: str) -> list[Any]:
    ours_, theirs = ours(directory), sdk_events(directory)
    assert len(ours_) == len(theirs)
    for i, (a, b) in enumerate(zip(ours_, theirs, strict=True)):
        same(a, b, f"event {i} ({type(b).__name__})")
        # What needs the SDK's own object gets it, equal to the SDK's parse.
        assert (a.sdk_object() if isinstance(a, StoredEvent) else a) == b
    got, expected = replay(ours_, cwd), replay(theirs, cwd)
    assert got == expected
    return expected


def test_a_varied_conversation_replays_as_the_sdks_events(tmp_path):
    events = store(varied_history(str(tmp_path)), tmp_path / "conv")
    expected = check_against_the_sdk(tmp_path / "conv", str(tmp_path))
    kinds = {u["sessionUpdate"] for u in expected}
    assert {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
    } <= kinds
    assert len(events) > 50


# Each a turn of the one conversation the agent keeps; together: text, reasoning, every
# tool, a plan, model failures, a sub-agent, a condensation, a turn cut short.
SCENARIOS = ["echo", "terminal", "edit", "plan", "demo", "error500", "badjson", "delegate"]


async def test_the_scripted_scenarios_replay_as_the_sdks_events(tmp_path, llm):
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    with trio.fail_after(4 * TIMEOUT):
        env = agent_env(llm, home)
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, RecordingClient()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(ws), mcp_servers=[])).session_id

                async def say(text: str) -> None:
                    try:
                        await conn.agent.prompt(
                            session_id=sid, prompt=[schema.TextContent(text=text)]
                        )
                    except RequestError:
                        pass  # a failed model call is a turn's answer, and an event

                for name in SCENARIOS:
                    await say(scenario_prompt(name, path=str(ws / "f.txt")))
                await say("/compact")
                # A turn cut short: cancelled once the model was asked.
                session = agent._sessions[uuid.UUID(sid)]
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(say, scenario_prompt("sleep"))
                    while not session.busy:
                        await trio.lowlevel.checkpoint()
                    await trio.testing.wait_all_tasks_blocked()
                    await conn.agent.cancel(session_id=sid)
        directory = home / "conversations" / uuid.UUID(sid).hex
        expected = check_against_the_sdk(directory, str(ws))
    kinds = {u["sessionUpdate"] for u in expected}
    assert {"user_message_chunk", "agent_message_chunk", "tool_call"} <= kinds


def test_the_replay_reads_the_views_without_the_sdks_validation(tmp_path):
    # What makes the load fast: the translator's reads are answered from the JSON. A
    # field or property it starts to read that a view cannot answer (a new annotation, a
    # class with validators of its own) would validate every event again, silently.
    store(varied_history(str(tmp_path)), tmp_path / "conv")
    views = ours(tmp_path / "conv")
    replay(views, str(tmp_path))
    viewed = [e for e in views if isinstance(e, StoredEvent)]
    assert len(viewed) > 50
    validated = sorted({type(e).__name__ for e in viewed if e._real is not None})
    assert validated == []


def test_what_the_reader_does_not_take_goes_the_sdks_way(tmp_path):
    store(varied_history(str(tmp_path), turns=1), tmp_path / "conv")
    files = sorted((tmp_path / "conv" / "events").glob("event-*.json"))
    original = files[1].read_bytes()
    data = json.loads(original)
    for damage in [
        original[: len(original) // 2],  # truncated
        b"",  # empty: the SDK's open fails on it too
        b"42",
        json.dumps({**data, "kind": "FrobnicateEvent"}).encode(),
        json.dumps({**data, "timestamp": [1]}).encode(),  # a type the SDK refuses
        json.dumps({**data, "surprise": 1}).encode(),  # a key the SDK forbids
        json.dumps({k: v for k, v in data.items() if k != "tool_name"}).encode(),  # required
    ]:
        files[1].write_bytes(damage)
        with pytest.raises(StoredEventsError):
            ours(tmp_path / "conv")
        if damage:  # an empty file fails the SDK's open, not its log's iteration
            with pytest.raises(Exception):  # noqa: B017 -- the SDK refuses it too (any way)
                sdk_events(tmp_path / "conv")
    files[1].write_bytes(original)
    assert len(ours(tmp_path / "conv")) == len(files)
    assert read_events(tmp_path / "nothing", None) == []


# ------------------------------------------------------------------ a replay cut short


class _HeldOutbox:
    """An outbox whose replay starts, then waits for the test: a cancel, or a failure
    (the client gone), comes exactly there."""

    def __init__(self, fail: bool) -> None:
        self.started, self.go, self.fail = trio.Event(), trio.Event(), fail

    async def replay(self, history: Any, critic: Any) -> None:
        self.started.set()
        await self.go.wait()
        if self.fail:
            raise BrokenPipeError("the client is gone")


class _LoadingSession:
    critic = None

    def __init__(self, load: stored_load.StoredLoad, outbox: _HeldOutbox) -> None:
        self.stored_load, self.outbox = load, outbox


async def _not_asked(exc: Exception) -> RequestError:
    raise AssertionError("the open did not fail")


@pytest.mark.parametrize("cut", ["cancel", "failure"])
async def test_a_replay_cut_short_lets_the_sdks_open_go_on(cut):
    # The open waits for `replayed` (set once the load's answer is out); a load cancelled
    # or failing mid-replay must set it, or the session's every prompt would wait forever.
    outbox = _HeldOutbox(fail=cut == "failure")
    load = stored_load.StoredLoad(["an event"], _not_asked)
    session = _LoadingSession(load, outbox)
    raised: list[BaseException] = []

    async def replay(scope: trio.CancelScope) -> None:
        with scope:
            try:
                await stored_load.replay_history(cast(Any, session))
            except BaseException as exc:
                raised.append(exc)
                if isinstance(exc, trio.Cancelled):
                    raise  # (the failure is kept to look at, not raised into the nursery)

    with trio.fail_after(TIMEOUT):
        scope = trio.CancelScope()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(replay, scope)
            await outbox.started.wait()
            assert not load.replayed.is_set() and load.history is None
            if cut == "cancel":
                scope.cancel()
            else:
                outbox.go.set()
            await trio.testing.wait_all_tasks_blocked()
    assert load.replayed.is_set()
    assert isinstance(raised[0], trio.Cancelled if cut == "cancel" else BrokenPipeError)


# ------------------------------------------------------------------ the open after a load


class HeldOpen:
    """The SDK's import as `SdkLoader` offers it: the load's own read gets it at once, the
    session's open (every later `get`) only once `open()` is called."""

    def __init__(self) -> None:
        self._gate = trio.Event()
        self.gets = 0

    ready = True

    def open(self) -> None:
        self._gate.set()

    async def get(self) -> Any:
        self.gets += 1
        if self.gets > 1:
            await self._gate.wait()
        return await loader().get()


@pytest.fixture
async def stored_session(tmp_path, llm):
    """A session whose first prompt said "heron7", stored by an agent now closed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = agent_env(llm, tmp_path / "home")
    with trio.fail_after(TIMEOUT):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, RecordingClient()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                new = await conn.agent.new_session(cwd=str(ws), mcp_servers=[])
                await conn.agent.prompt(
                    session_id=new.session_id,
                    prompt=[schema.TextContent(text=scenario_prompt("echo", "heron7"))],
                )
    return env, ws, new.session_id


def _text(client: RecordingClient) -> str:
    return "".join(
        u.content.text
        for u in client.updates
        if isinstance(u, schema.AgentMessageChunk | schema.UserMessageChunk)
        and isinstance(u.content, schema.TextContent)
    )


async def test_load_is_answered_before_the_sdk_opens_and_the_prompt_waits(stored_session):
    env, ws, sid = stored_session
    gate, client = HeldOpen(), RecordingClient()

    async def main() -> None:
        async with open_openhands_agent(env=env, sdk_loader=gate) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                loaded = await conn.agent.load_session(session_id=sid, cwd=str(ws), mcp_servers=[])
                session = agent._sessions[uuid.UUID(sid)]
                assert session.conversation is None  # answered; the open is held
                assert "heron7" in _text(client)  # replayed from the files
                assert loaded.modes is not None
                assert loaded.modes.current_mode_id == "always-approve"
                result: dict[str, Any] = {}

                async def prompt() -> None:
                    result["r"] = await conn.agent.prompt(
                        session_id=sid,
                        prompt=[schema.TextContent(text=scenario_prompt("remember"))],
                    )

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(prompt)
                    while not session.busy:
                        await trio.lowlevel.checkpoint()
                    await trio.testing.wait_all_tasks_blocked()
                    assert "r" not in result  # waiting for the open, not refused
                    gate.open()
                assert result["r"].stop_reason == "end_turn"
                # The SDK opened the whole history: the model sees the earlier prompt.
                assert "You said earlier: heron7" in _text(client)

    with trio.fail_after(TIMEOUT):
        await main()


@pytest.mark.parametrize("step", ["sdk", "llm", "agent", "open"])
async def test_a_cancel_at_each_step_of_the_open_after_a_load(stored_session, step):
    env, ws, sid = stored_session
    gate, client = HeldOpen(), RecordingClient()
    sessions: dict[uuid.UUID, Any] = {}
    hit: list[str] = []

    def cancel_at(point: str, detail: Any) -> None:
        if point == "build" and detail == step:
            hit.append(detail)
            for session in sessions.values():
                session.request_cancel()

    async def main() -> None:
        async with open_openhands_agent(env=env, sdk_loader=gate) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                await conn.agent.load_session(session_id=sid, cwd=str(ws), mcp_servers=[])
                session = agent._sessions[uuid.UUID(sid)]
                result: dict[str, Any] = {}

                async def prompt() -> None:
                    result["r"] = await conn.agent.prompt(
                        session_id=sid,
                        prompt=[schema.TextContent(text=scenario_prompt("echo", "never"))],
                    )

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(prompt)
                    while not session.busy:
                        await trio.lowlevel.checkpoint()
                    if step == "sdk":
                        # Reached right after the replay: the open waits for the SDK now.
                        await trio.testing.wait_all_tasks_blocked()
                        assert hit == ["sdk"] and "r" not in result
                        session.request_cancel()
                    sessions.update(agent._sessions)
                    gate.open()
                assert hit == [step]
                assert result["r"].stop_reason == "cancelled"
                # The open went on: the session works.
                after = await conn.agent.prompt(
                    session_id=sid,
                    prompt=[schema.TextContent(text=scenario_prompt("echo", "after"))],
                )
                assert after.stop_reason == "end_turn"
                assert "after" in _text(client) and "never" not in _text(client)

    with trio.fail_after(TIMEOUT), turn_points.stepping_in(cancel_at):
        await main()


async def test_closing_a_loaded_session_while_it_opens(stored_session):
    env, ws, sid = stored_session
    gate = HeldOpen()

    async def main() -> None:
        async with open_openhands_agent(env=env, sdk_loader=gate) as agent:
            async with open_in_memory_pair(agent, RecordingClient()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                await conn.agent.load_session(session_id=sid, cwd=str(ws), mcp_servers=[])
                await conn.agent.close_session(session_id=sid)
                assert uuid.UUID(sid) not in agent._sessions  # closed while its open waited
                with pytest.raises(RequestError) as info:
                    await conn.agent.prompt(
                        session_id=sid, prompt=[schema.TextContent(text="hello")]
                    )
                assert info.value.code == -32002
                # Loaded again, and opened.
                gate.open()
                await conn.agent.load_session(session_id=sid, cwd=str(ws), mcp_servers=[])
                r = await conn.agent.prompt(
                    session_id=sid,
                    prompt=[schema.TextContent(text=scenario_prompt("echo", "again"))],
                )
                assert r.stop_reason == "end_turn"

    with trio.fail_after(TIMEOUT):
        await main()
