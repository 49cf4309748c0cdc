"""Cancel wins at every point of a turn: a `session/cancel` injected at each step, on the
real SDK in process with the scripted model (issue 22, items 1 and 7).

Each test runs a turn whose command is `sleep <unique>; touch <marker>` and steps in at
one named point of it (`trio_acp.openhands.permissions.turn_points`): an SDK callback, a streamed
token, a sub-agent's event, just before or just after the command reaches the shell, a
pending permission request. The thread that reached the point sends the cancel and is
held there until the cancel has landed (the run's gate closed: run_gate.py), so the cancel
comes exactly there, whatever the machine's load. Then, for every point:

- the turn answers `cancelled`;
- nothing is left running: no process of the command exists when the turn answers;
- nothing runs afterwards: no model call starts after the cancel landed, and the marker
  the command would write never appears. The next prompt runs a command in the same
  shell: a shell that went on with the cancelled command list would have run `touch`
  before it, so looking once that prompt is over is a check, not a race.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import pytest
import trio

from _inprocess import RecordingClient, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.permissions import run_gate, turn_points
from trio_acp.openhands.sdk import INTERRUPTION_TEXT
from trio_acp.openhands.setup.subagents import hub_of
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair

WAIT = 60.0  # a bound against hanging, never reached when the test passes


class CancelAt:
    """A `turn_points` hook: at the `nth` point named `point` whose detail `match`es,
    send `session/cancel` and hold the thread there until the cancel has landed."""

    def __init__(
        self,
        point: str,
        match: Callable[[Any], bool] = lambda _: True,
        nth: int = 1,
        *,
        hold_until_answered: bool = False,
    ) -> None:
        self.point, self.match, self.nth = point, match, nth
        # Hold the thread until the turn has answered (not only until the cancel landed).
        self.hold_until_answered = hold_until_answered
        self.answered = threading.Event()
        self.task_over = threading.Event()
        self.seen = 0
        self.fired = threading.Event()
        self.landed = threading.Event()
        self.requests_at_landing: int | None = None
        self.trace: list[str] = []
        self._send_cancel: Callable[[], None] | None = None
        self._requests: Callable[[], int] | None = None
        self._cancel_received = threading.Event()

    def arm(self, send_cancel: Callable[[], None], requests: Callable[[], int]) -> None:
        self._send_cancel, self._requests = send_cancel, requests

    def cancel_received(self) -> None:
        self._cancel_received.set()

    def __call__(self, point: str, detail: Any) -> None:
        self.trace.append(f"{point}:{type(detail).__name__}")
        if point == "task:over":
            self.task_over.set()
        if point != self.point or self._send_cancel is None or self.fired.is_set():
            return
        if not self.match(detail):
            return
        self.seen += 1
        if self.seen < self.nth:
            return
        self.fired.set()
        # The run this thread works for (None: not in a run yet, e.g. sending the prompt).
        gate = run_gate.current()
        self._send_cancel()
        if not self._cancel_received.wait(WAIT):
            return
        if gate is not None and not gate.closed.wait(WAIT):
            return
        assert self._requests is not None
        self.requests_at_landing = self._requests()
        self.landed.set()
        if self.hold_until_answered:
            self.answered.wait(WAIT)


def event_named(name: str, tool: str | None = None) -> Callable[[Any], bool]:
    def match(event: Any) -> bool:
        inner = getattr(event, "event", event)  # a sub-agent's event, or the session's
        if type(inner).__name__ != name:
            return False
        return tool is None or getattr(inner, "tool_name", None) == tool

    return match


class Probe:
    """The command of the turn: a unique `sleep`, then a marker file."""

    def __init__(self, tmp_path: Path) -> None:
        self.seconds = f"29.{uuid.uuid4().int % 10**6:06d}"
        self.marker = tmp_path / f"marker-{uuid.uuid4().hex[:8]}"
        self.command = f"sleep {self.seconds}; touch {self.marker}"

    def running(self) -> list[int]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            if proc.info["cmdline"] == ["sleep", self.seconds]:
                found.append(proc.pid)
        return found


class PermissionClient(RecordingClient):
    """Asked for permission, it sends session/cancel and answers `cancelled`, as ACP
    says a client does."""

    def __init__(self) -> None:
        super().__init__()
        self.cancel: Callable[[], Any] | None = None
        self.asked = 0

    async def request_permission(self, params: Any) -> Any:
        self.asked += 1
        assert self.cancel is not None
        await self.cancel()
        return schema.RequestPermissionResponse(outcome=schema.CancelledPermissionOutcome())


@contextlib.asynccontextmanager
async def _agent(
    env: dict[str, str], client: Any, cwd: Path
) -> AsyncIterator[tuple[Any, Any, str]]:
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            sid = (await conn.agent.new_session(cwd=str(cwd), mcp_servers=[])).session_id
            session = agent._sessions[uuid.UUID(sid)]
            with trio.fail_after(WAIT):
                await session.warmed.wait()  # the shell is up: its start-up is no step of a turn
            yield agent, conn, sid


async def _cancel_at(
    hook: CancelAt, env: dict[str, str], llm: Any, tmp_path: Path, prompt: str, probe: Probe
) -> tuple[schema.PromptResponse, RecordingClient]:
    """Run `prompt` with `hook` stepping in; check what every cancel point must give."""
    client = RecordingClient()
    async with _agent(env, client, tmp_path) as (agent, conn, sid):
        session = agent._sessions[uuid.UUID(sid)]
        token = trio.lowlevel.current_trio_token()
        request_cancel = session.request_cancel

        def received() -> None:
            hook.cancel_received()
            request_cancel()

        session.request_cancel = received

        async def cancel() -> None:
            await conn.agent.cancel(session_id=sid)

        def send_cancel() -> None:
            # Any thread but Trio's: hand the cancel to Trio, never wait for it here.
            token.run_sync_soon(lambda: nursery.start_soon(cancel))

        hook.arm(send_cancel, lambda: len(llm.requests))
        with trio.fail_after(WAIT), turn_points.stepping_in(hook):
            async with trio.open_nursery() as nursery:
                response = await conn.agent.prompt(
                    session_id=sid, prompt=[schema.TextContent(text=prompt)]
                )
                answered_with = len(client.updates)
            hook.answered.set()
            if hook.hold_until_answered:
                # The held thread goes on now: wait until its tool call is over.
                while not hook.task_over.is_set():
                    await trio.sleep(0.01)
        left_running = probe.running()
        requests_at_answer = len(llm.requests)
        updates_at_answer = len(client.updates)
        # The same shell runs the next command: a cancelled list it went on with would
        # have written the marker before this prompt is over.
        after = await conn.agent.prompt(
            session_id=sid,
            prompt=[schema.TextContent(text=scenario_prompt("terminal", command="echo after"))],
        )

    assert hook.fired.is_set(), f"{hook.point} was never reached: {hook.trace}"
    assert hook.landed.is_set(), "the cancel did not land"
    assert response.stop_reason == "cancelled"
    assert left_running == [], "the command is still running"
    assert requests_at_answer == hook.requests_at_landing, "a model call after the cancel"
    assert after.stop_reason == "end_turn"
    assert not probe.marker.exists(), "the cancelled command ran to its end"
    assert updates_at_answer == answered_with, "updates of the turn after its answer"
    return response, client


# The SDK's callbacks in a turn that runs one command (`terminal` scenario), in order.
TURN_EVENTS = [
    ("MessageEvent", None, 1),  # the user's message (sent before the run starts)
    ("ActionEvent", "terminal", 1),
    # The credential guard's verdict on the action (credential_guard.py), before it runs.
    ("SecurityAnalysisEvent", None, 1),
    ("ObservationEvent", "terminal", 1),
    ("ActionEvent", "finish", 1),
    ("ObservationEvent", "finish", 1),
]


AFTER_THE_COMMAND = {
    ("ObservationEvent", "terminal"),
    ("ActionEvent", "finish"),
    ("ObservationEvent", "finish"),
}


async def test_the_turn_events_are_these(env, llm, tmp_path):
    # The SDK's callbacks in an uncancelled turn: TURN_EVENTS must name every one, so that
    # the test below steps in at each.
    seen: list[tuple[str, str | None]] = []

    def record(point: str, detail: Any) -> None:
        if point == "event":
            seen.append((type(detail).__name__, getattr(detail, "tool_name", None)))

    client = RecordingClient()
    async with _agent(env, client, tmp_path) as (_, conn, sid):
        with trio.fail_after(WAIT), turn_points.stepping_in(record):
            response = await conn.agent.prompt(
                session_id=sid,
                prompt=[schema.TextContent(text=scenario_prompt("terminal", command="true"))],
            )
    assert response.stop_reason == "end_turn"
    assert seen == [(name, tool) for name, tool, _ in TURN_EVENTS], seen


@pytest.mark.parametrize(("name", "tool", "nth"), TURN_EVENTS, ids=lambda v: str(v))
async def test_cancel_at_each_sdk_callback(env, llm, tmp_path, name, tool, nth):
    probe = Probe(tmp_path)
    hook = CancelAt("event", event_named(name, tool), nth)
    command = probe.command
    if (name, tool) in AFTER_THE_COMMAND:
        # The command must end for these events to exist: a quick one.
        command = "true"
    prompt = scenario_prompt("terminal", command=command)
    await _cancel_at(hook, env, llm, tmp_path, prompt, probe)


async def test_cancel_mid_stream(env, llm, tmp_path):
    probe = Probe(tmp_path)
    hook = CancelAt("token", nth=3)
    prompt = scenario_prompt("terminal", command=probe.command)
    await _cancel_at(hook, env, llm, tmp_path, prompt, probe)


@pytest.mark.parametrize("point", ["command:before", "command:after"])
async def test_cancel_as_the_command_reaches_the_shell(env, llm, tmp_path, point):
    # Issue 22.1: a cancel 2-49 ms after the tool call's announcement used to find no
    # process yet, and the command then ran to its end.
    probe = Probe(tmp_path)
    hook = CancelAt(point)
    prompt = scenario_prompt("terminal", command=probe.command)
    await _cancel_at(hook, env, llm, tmp_path, prompt, probe)


@pytest.mark.parametrize(
    ("point", "match"),
    [
        ("subagent", event_named("ActionEvent", "terminal")),
        ("command:before", lambda _: True),
        ("command:after", lambda _: True),
    ],
    ids=["subagent-action", "subagent-command-before", "subagent-command-after"],
)
async def test_cancel_during_a_sub_agents_step(env, llm, tmp_path, point, match):
    probe = Probe(tmp_path)
    hook = CancelAt(point, match)
    prompt = scenario_prompt("delegate", command=probe.command)
    await _cancel_at(hook, env, llm, tmp_path, prompt, probe)


async def test_cancel_as_a_sub_agent_starts(env, llm, tmp_path):
    # Issue 22.7: the delegating call's thread passed the SDK's checks before the cancel,
    # and reached the task tool after it. The sub-agent must not start then: it would
    # call the model after the turn's answer, and post what it did outside the turn. The
    # thread is held until the turn has answered, so this is exactly that order.
    probe = Probe(tmp_path)
    hook = CancelAt("task", hold_until_answered=True)
    prompt = scenario_prompt("delegate", command=probe.command)
    await _cancel_at(hook, env, llm, tmp_path, prompt, probe)


async def test_cancel_while_a_permission_is_pending(env, llm, tmp_path):
    probe = Probe(tmp_path)
    env = {**env, "TRIO_ACP_DEFAULT_MODE": "always-ask"}
    client = PermissionClient()
    async with _agent(env, client, tmp_path) as (agent, conn, sid):

        async def cancel() -> None:
            await conn.agent.cancel(session_id=sid)

        client.cancel = cancel
        with trio.fail_after(WAIT):
            response = await conn.agent.prompt(
                session_id=sid,
                prompt=[
                    schema.TextContent(text=scenario_prompt("terminal", command=probe.command))
                ],
            )
        requests = len(llm.requests)
        left_running = probe.running()
        client.cancel = None
    assert client.asked == 1
    assert response.stop_reason == "cancelled"
    assert left_running == []
    assert len(llm.requests) == requests
    assert not probe.marker.exists()


CLI_FILES = Path(__file__).parent / "openhands_cli_files"
TEMPLATE = Path(__file__).parent / "critic" / "chatml.jinja"


def _critic_env(env: dict[str, str], llm: Any, home: Path) -> dict[str, str]:
    """The agent with the SDK's critic on the scripted server (test_critic_in_process.py)."""
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(CLI_FILES / "critic_refinement" / "cli_config.json", home / "cli_config.json")
    return {
        **env,
        "OPENHANDS_PERSISTENCE_DIR": str(home),
        "LLM_MAX_INPUT_TOKENS": "128000",
        "TRIO_ACP_PUBLIC_SKILLS": "0",
        "TRIO_ACP_CRITIC_URL": f"{llm.url}/vllm",
        "TRIO_ACP_CRITIC_CHAT_TEMPLATE": str(TEMPLATE),
        # Longer than any bound of this test: without the abandon, the cancel waits for it.
        "TRIO_ACP_CRITIC_TIMEOUT": "3600",
    }


@pytest.mark.parametrize("step", ["first answer", "refinement"])
async def test_cancel_during_the_critic(env, llm, tmp_path, step):
    # The critic's request stalls (`[critic:...,stall]`); the cancel comes while it waits.
    # "refinement": the first answer's verdict asks for a refinement, and the cancel
    # comes during the critic's look at the refined answer, in the same turn.
    env = _critic_env(env, llm, tmp_path / "critic-home")
    steps = "stall" if step == "first answer" else "0.2,stall"
    llm.critic_requests.clear()
    client = RecordingClient()
    async with _agent(env, client, tmp_path) as (_, conn, sid):
        result: dict[str, Any] = {}

        async def run_prompt() -> None:
            result["r"] = await conn.agent.prompt(
                session_id=sid,
                prompt=[schema.TextContent(text=scenario_prompt("echo", f"x [critic:{steps}]"))],
            )

        stalls = 1 if step == "first answer" else 2
        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_prompt)
                while len(llm.critic_requests) < stalls:
                    await trio.sleep(0.01)
                requests = len(llm.requests)
                await conn.agent.cancel(session_id=sid)
        answered_with = len(client.updates)
        # Its own critic step: the critic takes the last `[critic:...]` tag it is shown.
        after = await conn.agent.prompt(
            session_id=sid,
            prompt=[schema.TextContent(text=scenario_prompt("echo", "after [critic:0.9]"))],
        )
    assert result["r"].stop_reason == "cancelled"
    assert len(llm.requests) == requests + 1  # only the next prompt's
    assert after.stop_reason == "end_turn"
    assert answered_with <= len(client.updates)


HUNG = Path(__file__).parent / "mcp" / "hung_server.py"


def _hung_running() -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if (
            str(HUNG) in (proc.info["cmdline"] or [])
            and proc.info["status"] != psutil.STATUS_ZOMBIE
        ):
            found.append(proc.pid)
    return found


def _cancel_at_send(session: Any) -> Callable[[str, Any], None]:
    """A `turn_points` hook: `session/cancel` just before the prompt is sent. The `send`
    point is on the Trio thread, where the reader handles a cancel: it is handled here,
    synchronously, as the reader would."""

    def hook(point: str, detail: Any) -> None:
        if point == "send":
            session.request_cancel()

    return hook


async def test_cancel_just_before_the_prompt_is_sent(env, llm, tmp_path):
    # A ready conversation takes the message at once: it lands, nothing runs.
    probe = Probe(tmp_path)
    client = RecordingClient()
    async with _agent(env, client, tmp_path) as (agent, conn, sid):
        session = agent._sessions[uuid.UUID(sid)]
        requests = len(llm.requests)
        with trio.fail_after(WAIT), turn_points.stepping_in(_cancel_at_send(session)):
            response = await conn.agent.prompt(
                session_id=sid,
                prompt=[
                    schema.TextContent(text=scenario_prompt("terminal", command=probe.command))
                ],
            )
        assert response.stop_reason == "cancelled"
        assert len(llm.requests) == requests, "a model call after the cancel"
        after = await conn.agent.prompt(
            session_id=sid,
            prompt=[schema.TextContent(text=scenario_prompt("terminal", command="echo after"))],
        )
    assert after.stop_reason == "end_turn"
    assert probe.running() == [] and not probe.marker.exists()


async def test_cancel_before_the_send_does_not_wait_for_mcp_servers_starting(env, llm, tmp_path):
    # Issue 22.5: the cancel came before the send, while the MCP servers start (under the
    # SDK's lock the send needs): the turn awaited the whole send, so the cancel waited for
    # the start-up. The server hangs until the test releases it: no bound, no timing.
    release = tmp_path / "release"
    env = {**env, "TRIO_ACP_MCP_TIMEOUT": "600"}
    hung = schema.McpServerStdio(
        name="hung", command=sys.executable, args=[str(HUNG), str(release)], env=[]
    )
    client = RecordingClient()
    try:
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                new = await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[hung])
                sid = new.session_id
                session = agent._sessions[uuid.UUID(sid)]
                with trio.fail_after(WAIT):
                    while not _hung_running():
                        await trio.sleep(0.05)
                with trio.fail_after(WAIT), turn_points.stepping_in(_cancel_at_send(session)):
                    response = await conn.agent.prompt(
                        session_id=sid,
                        prompt=[schema.TextContent(text=scenario_prompt("echo", "first"))],
                    )
                assert response.stop_reason == "cancelled"
                assert _hung_running() and not release.exists()  # answered while it hung
                release.touch()
                with trio.fail_after(WAIT):
                    after = await conn.agent.prompt(
                        session_id=sid,
                        prompt=[schema.TextContent(text=scenario_prompt("echo", "second"))],
                    )
                assert after.stop_reason == "end_turn"
                events = list(session.conversation.sdk_conversation.state.events)
    finally:
        release.touch()
    # The cancelled message landed, its interruption note right after it, then the next.
    said = [
        "".join(getattr(c, "text", "") for c in e.llm_message.content)
        for e in events
        if type(e).__name__ == "MessageEvent"
    ]
    first = next(i for i, text in enumerate(said) if "] first" in text)
    assert INTERRUPTION_TEXT in said[first + 1]
    assert "] second" in said[first + 2]


async def test_closing_a_session_does_not_wait_for_mcp_servers_starting(env, llm, tmp_path):
    # Issue 22.5: the warm-up starts the MCP servers under the SDK's lock that closing the
    # conversation needs, and is not abandoned (its shell must not outlive the session):
    # session/close waited for the start-up's whole bound. The server hangs until released.
    release = tmp_path / "release"
    env = {**env, "TRIO_ACP_MCP_TIMEOUT": "600"}
    hung = schema.McpServerStdio(
        name="hung", command=sys.executable, args=[str(HUNG), str(release)], env=[]
    )
    client = RecordingClient()
    try:
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                new = await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[hung])
                with trio.fail_after(WAIT):
                    while not _hung_running():
                        await trio.sleep(0.05)
                    await conn.agent.close_session(session_id=new.session_id)
                assert _hung_running() and not release.exists()  # closed while it hung
    finally:
        release.touch()


async def test_cancel_while_a_sub_agent_waits_on_its_model(env, llm, tmp_path):
    # Issue 22.7: a sub-agent blocked in its model call (here one that never answers) held
    # the cancelled turn up to STOP_WAIT (5 s), then the turn answered with the sub-agent
    # still running, and what it posted afterwards was dropped. Its call is cut now, as
    # the session's own is: when the turn answers, the sub-agent is over.
    client = RecordingClient()
    async with _agent(env, client, tmp_path) as (agent, conn, sid):
        session = agent._sessions[uuid.UUID(sid)]
        hub = hub_of(session.conversation)
        assert hub is not None
        before = len(llm.requests)
        result: dict[str, Any] = {}

        async def run_prompt() -> None:
            result["response"] = await conn.agent.prompt(
                session_id=sid,
                prompt=[schema.TextContent(text=scenario_prompt("delegate", sub="stall"))],
            )
            result["live"] = len(hub._live)
            result["requests"] = len(llm.requests)

        with trio.fail_after(WAIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_prompt)
                # The parent's call, then the sub-agent's, which stalls: it is in its call.
                await llm.await_requests(
                    before + 2, timeout=WAIT, predicate=lambda rs: rs[-1].outcome == "stall"
                )
                await conn.agent.cancel(session_id=sid)
        after = await conn.agent.prompt(
            session_id=sid, prompt=[schema.TextContent(text=scenario_prompt("echo", "after"))]
        )
    assert result["response"].stop_reason == "cancelled"
    assert result["live"] == 0, "the sub-agent was still running when the turn answered"
    assert result["requests"] == before + 2, "a model call after the cancel"
    assert after.stop_reason == "end_turn"
