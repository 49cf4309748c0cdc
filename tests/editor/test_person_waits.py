"""Client calls a person may answer: no fixed short timeout, and always released.

A client may put `terminal/create`, `fs/write_text_file` and `session/request_permission`
in front of its user (acpx asks before it creates a terminal or writes a file), who may
take minutes. Those waits have no bound unless `TRIO_ACP_ANSWER_TIMEOUT` sets one; the
turn's cancel, the session's end and the client's exit release them. The client here is
scripted on the wire: it answers `initialize` and then never answers again, so each
release happens at a known point (the request is on the client's side of the wire).
"""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from trio_acp import schema
from trio_acp.connection import open_agent_connection
from trio_acp.openhands.editor.client_calls import (
    ANSWER_TIMEOUT_VAR,
    ClientCallCancelled,
    ClientCallClosed,
    ClientCalls,
    ClientCallTimeout,
    configured_answer_timeout,
)
from trio_acp.openhands.editor.files import EditorFiles
from trio_acp.openhands.editor.terminal import run_in_client_terminal
from trio_acp.openhands.permissions.confirm import CANCELLED, PermissionFailed, ask
from trio_acp.openhands.permissions.policy import action_scope
from trio_acp.testing.editor import SESSION, ProxyAgent

# A guard against a hang (a wait nobody releases), not a timing check.
GUARD = 10


@pytest.fixture(autouse=True)
def _no_configured_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ANSWER_TIMEOUT_VAR, raising=False)


class SilentClient:
    """The client's end of the wire: it answers `initialize`, then reads and never
    answers (a person who has not decided yet)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._buffer = b""

    async def send(self, frame: dict[str, Any]) -> None:
        await self.stream.send_all(json.dumps(frame).encode() + b"\n")

    async def frame(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            data = await self.stream.receive_some()
            if not data:
                raise EOFError
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    async def until(self, method: str) -> dict[str, Any]:
        with trio.fail_after(GUARD):
            while True:
                frame = await self.frame()
                if frame.get("method") == method:
                    return frame


@asynccontextmanager
async def silent_client() -> AsyncIterator[tuple[Any, SilentClient]]:
    """(the agent's `ClientProxy`, the scripted client) over an in-memory stream."""
    agent = ProxyAgent()
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    client = SilentClient(client_stream)
    async with open_agent_connection(agent_stream, agent):
        capabilities = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
        await client.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": capabilities},
            }
        )
        with trio.fail_after(GUARD):
            assert "result" in await client.frame()
        yield agent.client, client
        await client_stream.aclose()


def write_call(calls: ClientCalls, proxy: Any) -> Callable[[], Any]:
    files = EditorFiles(calls, proxy, SESSION, read=True, write=True)
    return lambda: files.write("/w/new.txt", "hello\n")


def create_call(calls: ClientCalls, proxy: Any) -> Callable[[], Any]:
    return lambda: calls.call(
        lambda: run_in_client_terminal(
            proxy, SESSION, command="true", create_timeout=calls.answer_timeout
        ),
        what="terminal/create",
        timeout=calls.answer_timeout,
    )


CALLS = {
    "fs/write_text_file": write_call,
    "terminal/create": create_call,
}


async def in_thread(fn: Callable[[], Any]) -> Any:
    def run() -> Any:
        try:
            return fn()
        except BaseException as exc:
            return exc

    return await trio.to_thread.run_sync(run)


@pytest.mark.parametrize("method", list(CALLS))
@pytest.mark.parametrize("release", ["cancel", "session end", "client exit"])
async def test_a_wait_for_a_person_is_released_by_cancel_session_end_and_client_exit(
    method: str, release: str
) -> None:
    calls = ClientCalls()
    assert calls.answer_timeout == math.inf  # nothing but these releases ends the wait
    outcome: list[Any] = []
    async with silent_client() as (proxy, client):
        async with trio.open_nursery() as nursery:
            await nursery.start(calls.run)
            call = CALLS[method](calls, proxy)

            async def tool() -> None:
                outcome.append(await in_thread(call))

            nursery.start_soon(tool)
            request = await client.until(method)
            assert not outcome  # waiting: the request is with the client, unanswered
            if release == "cancel":
                calls.cancel_turn()
            elif release == "session end":
                calls.close()
            else:
                await client.stream.aclose()
            with trio.fail_after(GUARD):
                while not outcome:
                    await trio.sleep(0.01)
            if release != "client exit":
                # The client is told to drop the question.
                cancel = await client.until("$/cancel_request")
                assert cancel["params"] == {"requestId": request["id"]}
            calls.close()
    (error,) = outcome
    expected = ClientCallCancelled if release == "cancel" else ClientCallClosed
    assert isinstance(error, expected), error


async def test_a_terminal_create_answered_after_minutes_is_waited_for(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The person answers 20 minutes later (virtual time): the command runs. With the
    10 s bound there was before, the tool call failed with "terminal/create timed out"."""
    client = ScriptedTerminal(answer_after=20 * 60)
    result = await run_in_client_terminal(client, SESSION, command="true")
    assert result.exit_code == 0 and result.output == "ok"
    assert client.methods == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]


async def test_a_configured_bound_gives_up_on_terminal_create(
    autojump_clock: trio.testing.MockClock,
) -> None:
    client = ScriptedTerminal(answer_after=20 * 60)
    with pytest.raises(ClientCallTimeout, match="did not answer within 90 s"):
        await run_in_client_terminal(client, SESSION, command="true", create_timeout=90)


async def test_a_client_that_never_answers_terminal_output_fails_the_command(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """`terminal/output` is the client's own answer, not a person's: it stays bounded, so
    the tool call fails rather than waiting for a cancel; the terminal is still released."""
    client = ScriptedTerminal(answer_after=0, output_hangs=True)
    with trio.fail_after(3600), pytest.raises(ClientCallTimeout, match="terminal/output"):
        await run_in_client_terminal(client, SESSION, command="true")
    assert client.methods[-2:] == ["terminal/kill", "terminal/release"]


class ScriptedTerminal:
    """A client whose `terminal/create` answers after `answer_after` seconds and whose
    command has already exited."""

    def __init__(self, answer_after: float, *, output_hangs: bool = False) -> None:
        self.answer_after = answer_after
        self.output_hangs = output_hangs
        self.methods: list[str] = []

    async def create_terminal(self, **_: Any) -> schema.CreateTerminalResponse:
        self.methods.append("terminal/create")
        await trio.sleep(self.answer_after)
        return schema.CreateTerminalResponse(terminal_id="t1")

    async def wait_for_terminal_exit(self, **_: Any) -> schema.WaitForTerminalExitResponse:
        self.methods.append("terminal/wait_for_exit")
        return schema.WaitForTerminalExitResponse(exit_code=0)

    async def terminal_output(self, **_: Any) -> schema.TerminalOutputResponse:
        self.methods.append("terminal/output")
        if self.output_hangs:
            await trio.sleep_forever()
        return schema.TerminalOutputResponse(
            output="ok", truncated=False, exit_status=schema.TerminalExitStatus(exit_code=0)
        )

    async def kill_terminal(self, **_: Any) -> schema.KillTerminalResponse:
        self.methods.append("terminal/kill")
        return schema.KillTerminalResponse()

    async def release_terminal(self, **_: Any) -> schema.ReleaseTerminalResponse:
        self.methods.append("terminal/release")
        return schema.ReleaseTerminalResponse()


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, math.inf), ("", math.inf), ("0", math.inf), ("none", math.inf), ("90", 90.0)]
    + [("-5", math.inf), ("soon", math.inf)],
)
def test_the_bound_comes_from_the_environment(value: str | None, expected: float) -> None:
    env = {} if value is None else {ANSWER_TIMEOUT_VAR: value}
    assert configured_answer_timeout(env) == expected


def test_a_session_takes_the_configured_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ANSWER_TIMEOUT_VAR, "90")
    calls = ClientCalls()
    assert calls.answer_timeout == 90
    files = EditorFiles(calls, None, SESSION, read=True, write=True)
    assert files._write_timeout == 90


# --- session/request_permission ------------------------------------------------------


def terminal_action() -> Any:
    # What `ask` reads of the SDK's ActionEvent (duck-typed), without importing the SDK.
    return SimpleNamespace(
        tool_name="terminal",
        tool_call_id="call-1",
        tool_call=SimpleNamespace(arguments=json.dumps({"command": "make test"})),
        summary=None,
        security_risk=None,
    )


async def ask_in(
    proxy: Any, cancel_event: trio.Event, outcome: list[Any], scope: trio.CancelScope
) -> None:
    session = SimpleNamespace(id=SESSION, cwd="/w", client=proxy)
    action = terminal_action()
    with scope:
        try:
            outcome.append(
                await ask(session, action, action_scope("terminal", {}, "/w"), cancel_event)
            )
        except PermissionFailed as exc:
            outcome.append(exc)
        return
    outcome.append("cancelled by the session's end")


@pytest.mark.parametrize("release", ["cancel", "session end", "client exit"])
async def test_a_permission_question_waits_until_cancel_session_end_or_client_exit(
    release: str,
) -> None:
    cancel_event = trio.Event()
    scope = trio.CancelScope()
    outcome: list[Any] = []
    async with silent_client() as (proxy, client):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask_in, proxy, cancel_event, outcome, scope)
            request = await client.until("session/request_permission")
            assert not outcome
            release_it: dict[str, Callable[[], Awaitable[None] | None]] = {
                "cancel": cancel_event.set,
                "session end": scope.cancel,
                "client exit": client.stream.aclose,
            }
            done = release_it[release]()
            if done is not None:
                await done
            with trio.fail_after(GUARD):
                while not outcome:
                    await trio.sleep(0.01)
            if release != "client exit":
                cancel = await client.until("$/cancel_request")
                assert cancel["params"] == {"requestId": request["id"]}
    (result,) = outcome
    if release == "cancel":
        assert result == CANCELLED
    elif release == "session end":
        assert result == "cancelled by the session's end"
    else:
        assert isinstance(result, PermissionFailed)


async def test_a_configured_bound_fails_an_unanswered_permission_question_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ANSWER_TIMEOUT_VAR, "0.2")
    outcome: list[Any] = []
    async with silent_client() as (proxy, client):
        with trio.fail_after(GUARD):
            await ask_in(proxy, trio.Event(), outcome, trio.CancelScope())
        await client.until("$/cancel_request")
    (error,) = outcome
    assert isinstance(error, PermissionFailed)
    assert "did not answer the permission request within 0.2 s" in str(error)
