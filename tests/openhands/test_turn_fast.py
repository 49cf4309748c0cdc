"""The turn and the outbox on a scripted conversation: no SDK, virtual time.

Each test plays turns through `turn.play_prompt` with the session's real outbox (bridge →
translation → coalescing → the end-of-turn rule) and confirm logic, against
`testing.fake_conversation` under `autojump_clock`: milliseconds each.
"""

from __future__ import annotations

import math
import subprocess
import sys
import uuid
from typing import Any

import pytest
import trio
import trio.testing

from trio_acp import schema
from trio_acp.credentials import SecretValues, UpdateMask
from trio_acp.openhands.permissions import confirm
from trio_acp.openhands.permissions.policy import RuleBook
from trio_acp.openhands.sessions import commands, turn
from trio_acp.openhands.sessions.bridge_items import TokenChunk
from trio_acp.openhands.sessions.outbox import Outbox
from trio_acp.openhands.translate import Translator
from trio_acp.testing.fake_conversation import Failure, FakeConversation, Reply, Tool


@pytest.fixture
def autojump(autojump_clock):
    return autojump_clock


class _Client:
    """Records what reaches the wire; a permission question waits for `answer`."""

    def __init__(self) -> None:
        self.wire: list[Any] = []
        self.asked = trio.Event()
        self.answer: Any = None
        self.answered = trio.Event()

    async def request_permission(self, request: Any) -> Any:
        self.wire.append(("ask", request.tool_call.tool_call_id))
        self.asked.set()
        await self.answered.wait()
        return self.answer


class _Host:
    """A session reduced to what a turn uses (turn.TurnHost, and what confirm reads)."""

    def __init__(self, nursery: trio.Nursery, script: list[Reply]) -> None:
        self.id = uuid.UUID(int=1)
        self.cwd = "/"
        self.model = "fake"
        self.client = _Client()
        self.critic = None  # no critic (test_critic_fast.py has one)
        self.rules = RuleBook(None)
        self.outbox = Outbox(Translator("/"), UpdateMask(SecretValues()), self.send_update)
        self.conversation = FakeConversation(
            script,
            nursery,
            on_event=self.outbox.post_event,
            on_token=self.outbox.post_token,
            on_retry=lambda attempt, total, error: self.outbox.post_note(
                schema.AgentThoughtChunk(
                    content=schema.TextContent(text=f"retry {attempt}/{total}")
                )
            ),
        )
        self._turns = 0
        nursery.start_soon(self.outbox.pump)

    async def send_update(self, update: Any, *, at_once: bool = False) -> None:
        self.client.wire.append(update)

    async def execute_command(self, name: str, arg: str) -> str:
        return f"ran {name}"

    def record_turn(self, blocks: list[Any], seq: int) -> None:
        pass

    def post_usage(self, seq: int) -> None:
        pass

    async def confirm_pending(self, conv: Any, cancel_event: trio.Event) -> str:
        return await confirm.confirm_pending(self, conv, cancel_event)

    async def flush_turn_updates(self) -> None:
        await self.outbox.flush()

    async def note_cut_short(self, since: int, *, cancelled: bool) -> None:
        if cancelled:
            await self.conversation.note_interruption()

    async def prompt(self, text: str, cancel_event: trio.Event | None = None) -> str:
        self._turns += 1
        blocks: list[Any] = [schema.TextContent(text=text)]
        event = cancel_event if cancel_event is not None else trio.Event()
        # As the session runs it: the request's own cancel becomes the turn's event.
        response = await turn.with_one_cancel(
            event.set,
            lambda: turn.play_prompt(
                self, blocks, event, self._turns, command=commands.parse(blocks)
            ),
        )
        self.client.wire.append(("response", response.stop_reason))
        return response.stop_reason


def _texts(wire: list[Any]) -> str:
    return "".join(
        u.content.text
        for u in wire
        if isinstance(u, schema.AgentMessageChunk) and hasattr(u.content, "text")
    )


def _tool_statuses(wire: list[Any]) -> list[tuple[str, str | None]]:
    return [
        (type(u).__name__, u.status)
        for u in wire
        if isinstance(u, (schema.ToolCallStart, schema.ToolCallProgress))
    ]


async def _cancel_when(event: trio.Event, cancel: trio.Event) -> None:
    await event.wait()
    cancel.set()


async def test_all_of_a_turns_updates_come_before_its_response(autojump):
    async with trio.open_nursery() as nursery:
        host = _Host(
            nursery, [Reply("one two three", tools=(Tool("ls", seconds=1),)), Reply("four")]
        )
        assert await host.prompt("go") == "end_turn"
        assert await host.prompt("again") == "end_turn"
        nursery.cancel_scope.cancel()
    wire = host.client.wire
    first = wire.index(("response", "end_turn"))
    assert _texts(wire[:first]).split() == ["one", "two", "three"]
    assert _tool_statuses(wire[:first])[-1] == ("ToolCallProgress", "completed")
    assert _texts(wire[first:]).split() == ["four"]
    assert wire[-1] == ("response", "end_turn")


async def test_stragglers_after_a_turns_end_are_dropped(autojump):
    async with trio.open_nursery() as nursery:
        host = _Host(nursery, [Reply("done")])
        assert await host.prompt("go") == "end_turn"
        # A tool thread that outlived its turn, a late token: posted after the response.
        host.outbox.bridge.post(TokenChunk(_late_chunk(), 1))
        host.outbox.post_note(
            schema.AgentMessageChunk(content=schema.TextContent(text="late")), seq=1
        )
        await host.outbox.flush()
        nursery.cancel_scope.cancel()
    wire = host.client.wire
    assert wire[-1] == ("response", "end_turn")
    assert "late" not in _texts(wire)


def _late_chunk() -> Any:
    from types import SimpleNamespace

    delta = SimpleNamespace(content="late", reasoning_content=None, tool_calls=None)
    return SimpleNamespace(
        id="late", choices=[SimpleNamespace(index=0, delta=delta, finish_reason=None)]
    )


async def test_cancel_during_a_tool_interrupts_it_and_closes_the_call(autojump):
    async with trio.open_nursery() as nursery:
        host = _Host(nursery, [Reply("working", tools=(Tool("sleep 30", seconds=math.inf),))])
        cancel = trio.Event()

        async def cancel_soon() -> None:
            await trio.sleep(5)
            cancel.set()

        nursery.start_soon(cancel_soon)
        with trio.fail_after(60):
            assert await host.prompt("go", cancel) == "cancelled"
        nursery.cancel_scope.cancel()
    assert host.conversation.interrupts >= 1
    assert host.conversation.interruptions_noted == 1
    wire = host.client.wire
    assert _tool_statuses(wire)[-1] == ("ToolCallProgress", "failed")
    assert wire[-1] == ("response", "cancelled")


async def test_cancel_during_a_permission_question_runs_nothing(autojump):
    async with trio.open_nursery() as nursery:
        host = _Host(nursery, [Reply("asking", tools=(Tool("rm -rf build", confirm=True),))])
        cancel = trio.Event()
        nursery.start_soon(_cancel_when, host.client.asked, cancel)
        with trio.fail_after(60):
            assert await host.prompt("go", cancel) == "cancelled"
        nursery.cancel_scope.cancel()
    wire = host.client.wire
    call = next(u.tool_call_id for u in wire if isinstance(u, schema.ToolCallStart))
    # The tool call was on the wire before the question about it.
    assert wire.index(("ask", call)) > next(
        i for i, u in enumerate(wire) if isinstance(u, schema.ToolCallStart)
    )
    assert host.conversation.rejected == ["The user cancelled before approving this action."]
    assert not any(
        "ok" in str(u)
        for u in wire
        if isinstance(u, schema.ToolCallProgress) and u.status == "completed"
    )
    assert wire[-1] == ("response", "cancelled")


async def test_cancel_during_a_model_retry_back_off(autojump):
    async with trio.open_nursery() as nursery:
        host = _Host(nursery, [Reply(failure=Failure(retries=5, backoff=30))])
        cancel = trio.Event()

        async def cancel_after_first_note() -> None:
            await trio.sleep(45)  # during the second back-off
            cancel.set()

        nursery.start_soon(cancel_after_first_note)
        with trio.fail_after(600):
            assert await host.prompt("go", cancel) == "cancelled"
        nursery.cancel_scope.cancel()
    wire = host.client.wire
    notes = [u for u in wire if isinstance(u, schema.AgentThoughtChunk)]
    assert 1 <= len(notes) < 5
    assert wire[-1] == ("response", "cancelled")


async def test_a_failed_model_call_ends_the_turn_with_an_error_after_its_updates(autojump):
    from trio_acp.rpc import RequestError

    async with trio.open_nursery() as nursery:
        host = _Host(nursery, [Reply(failure=Failure(retries=2, backoff=1))])
        with pytest.raises(RequestError):
            await host.prompt("go")
        nursery.cancel_scope.cancel()
    notes = [u for u in host.client.wire if isinstance(u, schema.AgentThoughtChunk)]
    assert len(notes) == 2


def test_the_turn_the_outbox_and_the_fake_import_no_sdk():
    code = (
        "import sys, trio_acp.openhands.sessions.turn, trio_acp.openhands.sessions.outbox, trio_acp.testing.fake_conversation;"
        "print(sorted(m for m in sys.modules if m == 'openhands' or m.startswith('openhands.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
