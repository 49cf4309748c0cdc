"""One tool call stopped while its turn goes on (ACP v2's `tool_call/cancel` and
`terminal/cancel`, the agent's side: `_trio_acp/stop_tool_call`), on the real SDK in
process with the scripted model.

The stop is injected at one named point of the command's life
(`trio_acp.openhands.permissions.turn_points`): the thread that reached it asks for the
stop and is held there until the agent has answered it, so the stop comes exactly there,
whatever the machine's load. At each point the turn goes on to its next model call and
ends `end_turn` (never `cancelled`: the run's gate stays open), the model is told what
became of the command, and the command never completes (its marker file never appears,
its process is gone). The client here asks for Zed's terminal `_meta`, as the v2 gateway
asks for it (`trio_acp/v2/frames.py`): the command runs in the SDK's shell with its output
streamed, and its tool thread says which tool call it works for (run_gate.py). A stop of
a tool call waiting for permission is the gateway's own (tests/v2/test_gateway_cancel.py,
tests/e2e/test_v2_wire.py).
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import trio

from _inprocess import RecordingClient, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.permissions import turn_points
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair
from trio_acp.v2.frames import STOP_TOOL_CALL

WAIT = 60.0  # a bound against hanging, never reached when the test passes


class Probe:
    """The command of the turn: a unique `sleep`, then a marker file."""

    def __init__(self, tmp_path: Path) -> None:
        self.seconds = f"28.{uuid.uuid4().int % 10**6:06d}"
        self.marker = tmp_path / f"marker-{uuid.uuid4().hex[:8]}"
        self.command = f"sleep {self.seconds}; touch {self.marker}"

    def running(self) -> list[int]:
        return [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"] == ["sleep", self.seconds]
        ]


class StopAt:
    """A `turn_points` hook: at the first `point` whose detail `match`es, ask the agent
    to stop the turn's terminal tool call and hold the thread until it has answered."""

    def __init__(self, point: str, match: Callable[[Any], bool] = lambda _: True) -> None:
        self.point, self.match = point, match
        self.fired = threading.Event()
        self.answered = threading.Event()
        self.answer: Any = None
        self.tool_call_id: str | None = None
        self._ask: Callable[[str], None] | None = None

    def __call__(self, point: str, detail: Any) -> None:
        if point == "event" and type(detail).__name__ == "ActionEvent":
            if getattr(detail, "tool_name", None) == "terminal":
                self.tool_call_id = detail.tool_call_id
        if point != self.point or self.fired.is_set() or not self.match(detail):
            return
        if self._ask is None or self.tool_call_id is None:
            return
        self.fired.set()
        self._ask(self.tool_call_id)
        self.answered.wait(WAIT)


@contextlib.asynccontextmanager
async def _agent(env: dict[str, str], cwd: Path) -> AsyncIterator[tuple[Any, Any, str]]:
    client = RecordingClient()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(
                protocol_version=1,
                client_capabilities=schema.ClientCapabilities(meta={"terminal_output": True}),
            )
            sid = (await conn.agent.new_session(cwd=str(cwd), mcp_servers=[])).session_id
            session = agent._sessions[uuid.UUID(sid)]
            with trio.fail_after(WAIT):
                await session.warmed.wait()  # the shell is up: its start-up is no step
            yield agent, conn, sid


async def _stop_at(hook: StopAt, env: dict[str, str], llm: Any, tmp_path: Path, command: str):
    """Run a turn of `command` with `hook` stepping in; returns (the turn's answer, the
    tool results the model saw after the command, whether a `sleep` was left)."""
    probe_requests = len(llm.requests)
    async with _agent(env, tmp_path) as (agent, conn, sid):
        token = trio.lowlevel.current_trio_token()

        async def stop(call_id: str) -> None:
            # Through the connection, as the v2 gateway asks: the command is stopped
            # once the answer is on its way.
            try:
                hook.answer = await conn.agent.ext_method(
                    STOP_TOOL_CALL, {"sessionId": sid, "toolCallId": call_id}
                )
            finally:
                hook.answered.set()

        def ask(call_id: str) -> None:
            # Any thread but Trio's: hand the stop to Trio, never wait for it here.
            token.run_sync_soon(lambda: nursery.start_soon(stop, call_id))

        hook._ask = ask
        with trio.fail_after(WAIT), turn_points.stepping_in(hook):
            async with trio.open_nursery() as nursery:
                response = await conn.agent.prompt(
                    session_id=sid,
                    prompt=[schema.TextContent(text=scenario_prompt("terminal", command=command))],
                )
        # The same shell runs the next command: a stopped command list it went on with
        # would have run its `touch` before this prompt is over.
        after = await conn.agent.prompt(
            session_id=sid,
            prompt=[schema.TextContent(text=scenario_prompt("terminal", command="echo after"))],
        )
        assert after.stop_reason == "end_turn"
    results = [
        m
        for r in llm.requests[probe_requests:]
        for m in r.body.get("messages", [])
        if m.get("role") == "tool"
    ]
    return response, results


def _said(message: dict[str, Any]) -> str:
    return json.dumps(message.get("content"))


async def test_a_command_stopped_while_it_runs_is_interrupted_and_the_turn_goes_on(
    env, llm, tmp_path
):
    probe = Probe(tmp_path)
    hook = StopAt("command:after")
    response, results = await _stop_at(hook, env, llm, tmp_path, probe.command)
    assert hook.fired.is_set()
    assert hook.answer == {"stopping": True}
    # Not a cancelled turn: the model got the command's result and finished.
    assert response.stop_reason == "end_turn"
    assert results, "the model never saw the command's result"
    assert "130" in _said(results[0]), results[0]  # the command died of SIGINT
    assert probe.running() == []
    assert not probe.marker.exists(), "the stopped command ran to its end"


async def test_a_command_stopped_before_it_reaches_the_shell_is_refused_and_the_turn_goes_on(
    env, llm, tmp_path
):
    probe = Probe(tmp_path)
    hook = StopAt("command:before")
    response, results = await _stop_at(hook, env, llm, tmp_path, probe.command)
    assert hook.fired.is_set()
    assert hook.answer == {"stopping": True}
    assert response.stop_reason == "end_turn"
    assert "cancelled this tool call before its command started" in _said(results[0])
    assert probe.running() == []
    assert not probe.marker.exists()


async def test_a_command_stopped_after_it_finished_is_left_as_it_ended(env, llm, tmp_path):
    marker = tmp_path / "done"

    def observation(event: Any) -> bool:
        return type(event).__name__ == "ObservationEvent" and event.tool_name == "terminal"

    hook = StopAt("event", observation)
    response, results = await _stop_at(hook, env, llm, tmp_path, f"touch {marker}")
    assert hook.fired.is_set()
    assert hook.answer == {"stopping": False}  # over before the stop came
    assert response.stop_reason == "end_turn"
    assert marker.exists()
    assert "130" not in _said(results[0])


async def test_stopping_an_unknown_session_or_malformed_params_is_refused(env, tmp_path):
    import pytest

    from trio_acp.rpc import RequestError

    async with _agent(env, tmp_path) as (_, conn, sid):
        with pytest.raises(RequestError) as malformed:
            await conn.agent.ext_method(STOP_TOOL_CALL, {"sessionId": sid})
        assert malformed.value.code == -32602
        with pytest.raises(RequestError) as unknown:
            await conn.agent.ext_method(
                STOP_TOOL_CALL, {"sessionId": str(uuid.uuid4()), "toolCallId": "x"}
            )
        assert unknown.value.code != -32601
        with pytest.raises(RequestError) as other:
            await conn.agent.ext_method("_trio_acp/nothing", {})
        assert other.value.code == -32601
