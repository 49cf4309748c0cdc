"""session/load's replay in windows (translate/replay.py) against the replay it replaced.

A varied conversation — tool calls of every kind (parallel ones, one answered long after,
one never run, one never announced, an id used twice), thoughts, images, permission and
hook rejections, condensations, errors, interruptions — is stored through the SDK's own
event log and read back with it, as session/load reads it. The windowed replay must give
exactly the updates of translating the whole history first (`Translator.replay` +
`coalesce`), in the same order, whatever the window; then the agent's session/load of it
(the conversation's own file store, the windowed replay through the outbox) must send the
same frames, and the session must go on with the whole history.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import trio
from openhands.sdk.conversation.event_store import EventLog
from openhands.sdk.event import (
    ActionEvent,
    AgentErrorEvent,
    Condensation,
    CondensationRequest,
    CondensationSummaryEvent,
    InterruptEvent,
    MessageEvent,
    ObservationEvent,
    PauseEvent,
    UserRejectObservation,
)
from openhands.sdk.event.conversation_error import ConversationErrorEvent
from openhands.sdk.io import LocalFileStore
from openhands.sdk.llm import ImageContent, Message, MessageToolCall, TextContent
from openhands.sdk.tool.builtins import (
    FinishAction,
    FinishObservation,
    ThinkAction,
    ThinkObservation,
)
from openhands.tools.file_editor import FileEditorAction, FileEditorObservation
from openhands.tools.task_tracker import TaskTrackerAction, TaskTrackerObservation
from openhands.tools.task_tracker.definition import TaskItem
from openhands.tools.terminal import TerminalAction, TerminalObservation

from _inprocess import RecordingClient, agent_env, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.backends.local_conversation import LocalConversation
from trio_acp.openhands.sdk import import_sdk
from trio_acp.openhands.sessions.outbox import Outbox
from trio_acp.openhands.translate import Translator, coalesce
from trio_acp.openhands.translate.replay import replay_windows
from trio_acp.testing import ScriptedLLM, scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair

PNG = "data:image/png;base64,iVBORw0KGgo="


# ------------------------------------------------------------------ the conversation


def _action(act, tool, call_id, rid, thought="", reasoning=None):
    return ActionEvent(
        thought=[TextContent(text=thought)] if thought else [],
        reasoning_content=reasoning,
        action=act,
        tool_name=tool,
        tool_call_id=call_id,
        tool_call=MessageToolCall(
            id=call_id,
            name=tool,
            arguments=json.dumps(act.model_dump(mode="json", exclude={"kind"})),
            origin="completion",
        ),
        llm_response_id=rid,
    )


def _observe(obs, tool, call_id, action):
    return ObservationEvent(
        observation=obs, tool_name=tool, tool_call_id=call_id, action_id=action.id
    )


def _user(text, images=()):
    content: list = [TextContent(text=text)]
    if images:
        content.append(ImageContent(image_urls=list(images)))
    return MessageEvent(source="user", llm_message=Message(role="user", content=content))


def _say(text, rid, reasoning=None, images=()):
    content: list = [TextContent(text=text)]
    if images:
        content.append(ImageContent(image_urls=list(images)))
    return MessageEvent(
        source="agent",
        llm_message=Message(role="assistant", content=content, reasoning_content=reasoning),
        llm_response_id=rid,
    )


def varied_history(cwd: str, *, turns: int = 3, odd: bool = True) -> list:
    """Realistic turns; with `odd`, also what only a damaged or unusual history holds (an
    observation for a call never announced, a tool call id used twice, a call never run)."""
    events: list = []
    for t in range(turns):
        path = f"{cwd}/src/mod_{t}.py"
        events.append(_user(f"Turn {t}: fix [word:heron{t}] in mod_{t}.py", images=[PNG]))
        run = _action(
            TerminalAction(command=f"pytest tests/test_{t}.py"),
            "terminal",
            f"c{t}-run",
            f"r{t}-1",
            thought="Run the tests first.",
            reasoning="The user wants a fix.",
        )
        events += [
            run,
            _observe(
                TerminalObservation.from_text(
                    text="F\nE   assert 3 == 4\n1 failed", command=run.action.command, exit_code=1
                ),
                "terminal",
                f"c{t}-run",
                run,
            ),
        ]
        # Two calls of one response, answered in order: the first stays open across
        # the other's announcement.
        view = _action(
            FileEditorAction(command="view", path=path),
            "file_editor",
            f"c{t}-v",
            f"r{t}-2",
            thought="Off by one?",
        )
        edit = _action(
            FileEditorAction(command="str_replace", path=path, old_str="4", new_str="3"),
            "file_editor",
            f"c{t}-e",
            f"r{t}-2",
        )
        events += [
            view,
            edit,
            _observe(
                FileEditorObservation.from_text(text="1\tx = 4\n", command="view", path=path),
                "file_editor",
                f"c{t}-v",
                view,
            ),
            _observe(
                FileEditorObservation.from_text(
                    text="edited",
                    command="str_replace",
                    path=path,
                    old_content="x = 4\n",
                    new_content="x = 3\n",
                ),
                "file_editor",
                f"c{t}-e",
                edit,
            ),
        ]
        think = _action(ThinkAction(thought="Check the callers."), "think", f"c{t}-th", f"r{t}-3")
        tasks = [TaskItem(title="Fix", status="done"), TaskItem(title="Re-run", status="todo")]
        plan = _action(
            TaskTrackerAction(command="plan", task_list=tasks), "task_tracker", f"c{t}-p", f"r{t}-4"
        )
        events += [
            think,
            _observe(ThinkObservation(), "think", f"c{t}-th", think),
            plan,
            _observe(
                TaskTrackerObservation.from_text(text="ok", command="plan", task_list=tasks),
                "task_tracker",
                f"c{t}-p",
                plan,
            ),
        ]
        refused = _action(TerminalAction(command="rm -rf build"), "terminal", f"c{t}-rm", f"r{t}-5")
        hooked = _action(TerminalAction(command="curl x"), "terminal", f"c{t}-hk", f"r{t}-5")
        events += [
            refused,
            hooked,
            UserRejectObservation(
                tool_name="terminal",
                tool_call_id=f"c{t}-rm",
                action_id=refused.id,
                rejection_reason="User rejected the action.",
            ),
            UserRejectObservation(
                tool_name="terminal",
                tool_call_id=f"c{t}-hk",
                action_id=hooked.id,
                rejection_reason="no network",
                rejection_source="hook",
            ),
        ]
        # A long-running call answered after the model said several things.
        slow = _action(TerminalAction(command="make all"), "terminal", f"c{t}-slow", f"r{t}-6")
        events.append(slow)
        events += [_say(f"Still building ({i}).", f"r{t}-7") for i in range(4)]
        events.append(
            _observe(
                TerminalObservation.from_text(text="built", command="make all", exit_code=0),
                "terminal",
                f"c{t}-slow",
                slow,
            )
        )
        events.append(
            AgentErrorEvent(tool_name="terminal", tool_call_id=f"c{t}-slow", error="late")
        )
        request = CondensationRequest()
        events += [
            request,
            Condensation(
                forgotten_event_ids={run.id}, summary=f"summary {t}", llm_response_id=f"r{t}-8"
            ),
            CondensationSummaryEvent(summary="s"),
            _say("Fixed.", f"r{t}-9", reasoning="Done; summarise.", images=[PNG]),
            _say(" And tested.", f"r{t}-9"),
        ]
        done = _action(FinishAction(message=f"Turn {t} done."), "finish", f"c{t}-f", f"r{t}-10")
        events += [
            done,
            _observe(FinishObservation.from_text(text="ok"), "finish", f"c{t}-f", done),
        ]
        if t == 1:
            events += [InterruptEvent(), PauseEvent()]
            events.append(
                ConversationErrorEvent(source="environment", code="LLMError", detail="boom")
            )
    if odd:
        events.append(AgentErrorEvent(tool_name="terminal", tool_call_id="never", error="x"))
        again = _action(TerminalAction(command="ls"), "terminal", "c0-run", "r-again")
        events += [again, _say("Listing again.", "r-again")]
        events.append(_action(TerminalAction(command="rm x"), "terminal", "pending", "r-last"))
    return events


def store(events: list, directory: Path) -> list:
    """Write through the SDK's event log, and read back as session/load reads it."""
    log = EventLog(LocalFileStore(str(directory)), "events")
    parent = None
    for event in events:
        event = event.model_copy(update={"parent_id": parent}) if parent else event
        log.append(event)
        parent = event.id
    return list(EventLog(LocalFileStore(str(directory)), "events"))


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> list:
    return store(varied_history("/work/project"), tmp_path_factory.mktemp("conv"))


def old_replay(events: list, compaction: bool) -> tuple[list, Translator]:
    t = Translator("/work/project", compaction=compaction)
    return coalesce(t.replay(events)), t


@pytest.mark.parametrize("compaction", [False, True])
@pytest.mark.parametrize("window", [1, 2, 3, 5, 8, 64, 200, 100_000])
def test_windowed_replay_is_the_whole_replay(stored, window, compaction):
    expected, old = old_replay(stored, compaction)
    t = Translator("/work/project", compaction=compaction)
    parts = list(replay_windows(t, stored, window))
    assert all(parts)  # never an empty part
    got = [update for part in parts for update in part]
    assert [schema.to_wire(u) for u in got] == [schema.to_wire(u) for u in expected]
    assert got == expected
    # The translator knows the replayed calls as the old replay left them.
    assert t._calls.keys() == old._calls.keys()
    if window <= 8:
        assert len(parts) > 1  # it did go out in parts


def test_the_history_covers_what_it_says(stored):
    expected, _ = old_replay(stored, True)
    kinds = {type(u).__name__ for u in expected}
    assert {
        "UserMessageChunk",
        "AgentMessageChunk",
        "AgentThoughtChunk",
        "ToolCallStart",
        "AgentPlanUpdate",
        "CompactionUpdate",
    } <= kinds
    starts = {u.tool_call_id: u for u in expected if isinstance(u, schema.ToolCallStart)}
    assert starts["c0-rm"].status == "failed" and starts["c0-slow"].status == "failed"
    assert starts["pending"].status == "pending" and "never" in starts
    assert any(
        isinstance(u.content, schema.ImageContent) for u in expected if hasattr(u, "content")
    )


def test_an_empty_history_and_a_failing_event():
    assert list(replay_windows(Translator("/w"), [])) == []

    class Broken:
        @property
        def llm_message(self):
            raise RuntimeError("a translation bug")

    Broken.__name__ = "MessageEvent"
    events = [Broken(), _user("after the broken one")]
    got = [u for part in replay_windows(Translator("/w"), events, 1) for u in part]
    assert got == coalesce(Translator("/w").replay(events))
    assert [u.content.text for u in got] == ["after the broken one"]


# ------------------------------------------------------------------ the file store


def test_the_file_store_reads_event_files_as_the_sdk_does(tmp_path):
    sdk = import_sdk()

    class NoSecrets:
        def mask(self, text):
            return text

    ours = sdk.MaskingFileStore(str(tmp_path), secrets=NoSecrets())
    theirs = LocalFileStore(str(tmp_path))
    name = f"events/event-00000-{uuid.uuid4()}.json"
    ours.write(name, '{"kind": "x", "text": "é"}')
    assert ours.read(name) == theirs.read(name) == '{"kind": "x", "text": "é"}'
    missing = f"events/event-00001-{uuid.uuid4()}.json"
    for store_ in (ours, theirs):
        with pytest.raises(FileNotFoundError) as info:
            store_.read(missing)
        assert str(info.value) == missing
    # Anything but an event file name takes the SDK's own (sandboxed) path.
    (tmp_path / "base_state.json").write_text("{}")
    assert ours.read("base_state.json") == "{}"
    with pytest.raises(ValueError):
        ours.read("events/../../outside.json")


# ------------------------------------------------------------------ through the agent


async def test_session_load_sends_the_whole_replay_then_warms_up_and_goes_on(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    order: list[str] = []
    warm_up, replay = LocalConversation.warm_up, Outbox.replay

    async def recording_warm_up(self, report):
        order.append("warm-up")
        return await warm_up(self, report)

    async def recording_replay(self, events, critic=None):
        await replay(self, events, critic)
        order.append("replayed")

    with ScriptedLLM() as llm:
        env = agent_env(llm, home)
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, RecordingClient()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(ws), mcp_servers=[])).session_id
        conv_dir = home / "conversations" / uuid.UUID(sid).hex
        base = json.loads((conv_dir / "base_state.json").read_text())
        log = EventLog(LocalFileStore(str(conv_dir)), "events")
        parent = base["leaf_event_id"]
        for event in varied_history(str(ws), turns=4, odd=False):
            event = event.model_copy(update={"parent_id": parent})
            log.append(event)
            parent = event.id
        base["leaf_event_id"] = parent
        (conv_dir / "base_state.json").write_text(json.dumps(base))
        # What the replay sent before it was windowed, from the same stored events.
        expected = [
            schema.to_wire(u)
            for u in old_replay(list(EventLog(LocalFileStore(str(conv_dir)), "events")), False)[0]
        ]

        monkeypatch.setattr(LocalConversation, "warm_up", recording_warm_up)
        monkeypatch.setattr(Outbox, "replay", recording_replay)
        client = RecordingClient()
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                with trio.fail_after(120):
                    await conn.agent.load_session(session_id=sid, cwd=str(ws), mcp_servers=[])
                got = [schema.to_wire(u) for u in client.updates]
                assert got[: len(expected)] == expected
                # Then only the session's own updates (commands), after the response.
                assert all(
                    u["sessionUpdate"] not in ("tool_call", "user_message_chunk")
                    for u in got[len(expected) :]
                )
                session = agent._sessions[uuid.UUID(sid)]
                with trio.fail_after(120):
                    await session.warmed.wait()
                assert order == ["replayed", "warm-up"]  # not during the replay
                # The conversation goes on with the whole history: the model sees the last
                # turn's prompt.
                client.updates.clear()
                with trio.fail_after(120):
                    r = await conn.agent.prompt(
                        session_id=sid,
                        prompt=[schema.TextContent(text=scenario_prompt("remember"))],
                    )
                assert r.stop_reason == "end_turn"
                text = "".join(
                    u.content.text
                    for u in client.updates
                    if isinstance(u, schema.AgentMessageChunk)
                )
                assert "You said earlier: heron3" in text
