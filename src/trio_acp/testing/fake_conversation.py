"""A scripted conversation: `openhands.conversation.Conversation` without the SDK.

For fast tests of the turn logic and the outbox (`autojump_clock` friendly: everything
runs on the Trio thread, waits are Trio sleeps and events). Each `run` plays the next
`Reply` of the script: streams its text as token chunks, then for each `Tool` emits an
action event, optionally stops to ask for confirmation, "runs" the tool (a Trio sleep, or
blocked until interrupted), and emits its observation; a `Failure` instead ends the run
with an error after the given retry back-off. Events go through the same `on_event` /
`on_token` callbacks an SDK conversation calls, shaped as the translator reads them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import attrs
import trio
import trio.lowlevel

FINISHED = "finished"
WAITING_FOR_CONFIRMATION = "waiting_for_confirmation"
ERROR = "error"
IDLE = "idle"
PAUSED = "paused"


@attrs.frozen
class Tool:
    command: str
    seconds: float = 0.0  # math.inf: blocks until interrupted
    confirm: bool = False  # stop for the user's approval first
    output: str = "ok"


@attrs.frozen
class Failure:
    """The model call fails (after `retries` retry notes, `backoff` seconds apart)."""

    message: str = "the model is overloaded"
    retries: int = 0
    backoff: float = 0.0


@attrs.frozen
class Reply:
    text: str = ""
    tools: tuple[Tool, ...] = ()
    failure: Failure | None = None
    # The critic's verdict on this reply's answer, for a conversation with a critic: a
    # score, or the reason its evaluation failed (a str).
    critic: float | str | None = None
    # Agent behavioral issues the critic reports with the score: name -> probability.
    issues: tuple[tuple[str, float], ...] = ()


# Shaped and named as the translator reads SDK events (it dispatches on the class name):
# the attributes the SDK's classes have that the translator reads, no more.
@attrs.frozen
class ToolCall:
    arguments: str


@attrs.frozen
class ActionEvent:
    id: str
    llm_response_id: str
    tool_call_id: str
    tool_name: str
    tool_call: ToolCall
    action: Any
    thought: list[Any]
    summary: str | None
    security_risk: Any


@attrs.frozen
class TextContent:
    text: str


@attrs.frozen
class Observation:
    content: list[TextContent]
    is_error: bool


@attrs.frozen
class ObservationEvent:
    id: str
    tool_call_id: str
    tool_name: str
    observation: Observation


@attrs.frozen
class UserRejectObservation:
    tool_call_id: str
    tool_name: str
    rejection_reason: str


@attrs.frozen
class CriticResult:
    score: float
    metadata: dict[str, Any]


@attrs.frozen
class MessageEvent:
    id: str
    llm_response_id: str
    source: str
    llm_message: Any
    critic_result: CriticResult | None


# A streamed chunk, shaped as litellm's `ModelResponseStream` (translate/fields.py reads it).
@attrs.frozen
class Delta:
    content: str | None
    reasoning_content: str | None
    tool_calls: list[Any] | None


@attrs.frozen
class StreamChoice:
    index: int
    delta: Delta
    finish_reason: str | None


@attrs.frozen
class StreamChunk:
    id: str
    choices: list[StreamChoice]


class _Run:
    def __init__(self) -> None:
        self._done = trio.Event()
        self.error: BaseException | None = None
        self.cancel_scope = trio.CancelScope()

    def done(self) -> bool:
        return self._done.is_set()

    async def outcome(self) -> BaseException | None:
        await self._done.wait()
        return self.error

    async def wait_done(self) -> None:
        await self._done.wait()


@attrs.define
class FakeConversation:
    """Plays `script` one reply per run; records what the turn logic asked of it."""

    script: list[Reply]
    nursery: trio.Nursery
    on_event: Callable[[Any], None] = lambda event: None
    on_token: Callable[[Any], None] = lambda chunk: None
    on_retry: Callable[[int, int, BaseException | None], None] = lambda attempt, total, error: None
    messages: list[Any] = attrs.field(factory=list)
    senders: list[str | None] = attrs.field(factory=list)
    interrupts: int = 0
    rejected: list[str] = attrs.field(factory=list)
    stopped_tool_calls: list[str] = attrs.field(factory=list)
    interruptions_noted: int = 0
    closed: bool = False
    events: list[Any] = attrs.field(factory=list)
    # The agent has a critic: each answer carries its reply's `critic` verdict.
    with_critic: bool = False
    _critic_error: str | None = None
    _status: str = IDLE
    _run: _Run | None = None
    _pending: list[Any] = attrs.field(factory=list)
    _approved: trio.Event = attrs.field(factory=trio.Event)
    _calls: int = 0

    # --- set-up -------------------------------------------------------------------

    async def warm_up(self, report: dict[str, str]) -> list[Any]:
        report["tools"] = "done"
        return []

    def llm_options(self) -> Any:
        from trio_acp.openhands.backends.conversation import LlmOptions

        return LlmOptions(reasoning_effort=None, stream=True)

    async def set_mode(self, mode: str) -> None:
        pass

    async def use_model(
        self, choice: Any, *, reasoning_effort: str | None, stream: bool
    ) -> str | None:
        return None

    async def update_llm(self, **update: Any) -> None:
        pass

    # --- a turn ---------------------------------------------------------------------

    def status(self) -> str:
        return self._status

    def event_count(self) -> int:
        return len(self.events)

    def critic_outcome(self, since: int) -> Any:
        from trio_acp.openhands.setup.critic_review import outcome_of

        if not self.with_critic:
            return None
        error, self._critic_error = self._critic_error, None
        return outcome_of(self.events[since:], error)

    def last_error(self, since: int) -> tuple[str | None, str | None]:
        for event in reversed(self.events[since:]):
            if getattr(event, "code", None):
                return event.code, event.detail
        return None, None

    async def send_message(self, parts: list[Any], sender: str | None = None) -> None:
        self.messages.append(parts)
        self.senders.append(sender)

    def start_run(self) -> _Run:
        run = self._run = _Run()
        if self._status == WAITING_FOR_CONFIRMATION:
            self._approved.set()  # a run after a confirmation: the actions were approved
        else:
            self._approved = trio.Event()
            self.nursery.start_soon(
                self._play, run, self.script.pop(0) if self.script else Reply("(no reply)")
            )
        return run

    async def _play(self, run: _Run, reply: Reply) -> None:
        self._calls += 1
        rid = f"fake-response-{self._calls}"
        self._status = "running"
        try:
            with run.cancel_scope:
                await self._reply(rid, reply)
                if self._status == "running":
                    self._status = FINISHED
            if run.cancel_scope.cancelled_caught and self._status in (
                "running",
                WAITING_FOR_CONFIRMATION,
            ):
                self._status = PAUSED
        except Exception as exc:
            run.error = exc
            self._status = ERROR
        finally:
            if self._status != WAITING_FOR_CONFIRMATION or run.error is not None:
                run._done.set()

    async def _reply(self, rid: str, reply: Reply) -> None:
        if reply.failure is not None:
            failure = reply.failure
            for attempt in range(1, failure.retries + 1):
                self.on_retry(attempt, failure.retries, RuntimeError(failure.message))
                await trio.sleep(failure.backoff)
            raise RuntimeError(failure.message)
        for word in reply.text.split(" ") if reply.text else ():
            self.on_token(_chunk(rid, word + " "))
            await trio.lowlevel.checkpoint()
        for index, tool in enumerate(reply.tools):
            call_id = f"{rid}-call-{index}"
            action = ActionEvent(
                id=call_id,
                llm_response_id=rid,
                tool_call_id=call_id,
                tool_name="terminal",
                tool_call=ToolCall(arguments=json.dumps({"command": tool.command})),
                action=None,
                thought=[],
                summary=None,
                security_risk=None,
            )
            self.events.append(action)
            self.on_event(action)
            if tool.confirm:
                self._pending = [action]
                self._status = WAITING_FOR_CONFIRMATION
                assert self._run is not None
                self._run._done.set()  # the run stops here; the next one resumes
                await self._approved.wait()
                run = self._run
                self._pending = []
                self._status = "running"
                with run.cancel_scope:
                    await self._tool(action, tool)
                if run.cancel_scope.cancelled_caught:
                    self._status = PAUSED
                    run._done.set()
                    return
                continue
            await self._tool(action, tool)
        message = MessageEvent(
            id=f"{rid}-message",
            llm_response_id=rid,
            source="agent",
            llm_message=None,
            critic_result=_critic_result(reply) if self.with_critic else None,
        )
        if self.with_critic and isinstance(reply.critic, str):
            self._critic_error = reply.critic
        self.events.append(message)

    async def _tool(self, action: Any, tool: Tool) -> None:
        await trio.sleep(tool.seconds if math.isfinite(tool.seconds) else math.inf)
        observation = ObservationEvent(
            id=f"{action.id}-obs",
            tool_call_id=action.tool_call_id,
            tool_name=action.tool_name,
            observation=Observation(content=[TextContent(text=tool.output)], is_error=False),
        )
        self.events.append(observation)
        self.on_event(observation)

    async def interrupt(self) -> None:
        self.interrupts += 1
        if self._run is not None:
            self._run.cancel_scope.cancel()

    async def stop_tools(self) -> None:
        pass

    def stop_tool_call(self, tool_call_id: str) -> tuple[bool, Any]:
        self.stopped_tool_calls.append(tool_call_id)
        return True, None

    async def pending_actions(self) -> list[Any]:
        return list(self._pending)

    async def reject_pending(self, reason: str) -> None:
        self.rejected.append(reason)
        for action in self._pending:
            event = UserRejectObservation(
                tool_call_id=action.tool_call_id,
                tool_name=action.tool_name,
                rejection_reason=reason,
            )
            self.events.append(event)
            self.on_event(event)
        self._pending = []
        if self._status == WAITING_FOR_CONFIRMATION:
            # The SDK records the rejection and the run is over; so is the scripted tool.
            self._status = FINISHED
            if self._run is not None:
                self._run.cancel_scope.cancel()

    async def note_interruption(self) -> None:
        if self._status != FINISHED:
            self.interruptions_noted += 1

    def usage(self) -> Any:
        return None

    def skills(self) -> list[Any]:
        return []

    async def history(self) -> list[Any]:
        return list(self.events)

    async def condense(self) -> Any:
        from trio_acp.openhands.backends.conversation import Condensed

        return Condensed(empty=True)

    async def fork(self, fork_id: Any) -> None:
        raise NotImplementedError("a fake conversation has nothing on disk to fork")

    async def close(self) -> None:
        self.closed = True
        if self._run is not None:
            self._run.cancel_scope.cancel()


def _critic_result(reply: Reply) -> CriticResult | None:
    if not isinstance(reply.critic, float | int):
        return None
    issues = [
        {"name": name, "display_name": name.replace("_", " ").title(), "probability": p}
        for name, p in reply.issues
    ]
    return CriticResult(
        score=float(reply.critic),
        metadata={"categorized_features": {"agent_behavioral_issues": issues}},
    )


def _chunk(rid: str, text: str) -> StreamChunk:
    delta = Delta(content=text, reasoning_content=None, tool_calls=None)
    return StreamChunk(id=rid, choices=[StreamChoice(index=0, delta=delta, finish_reason=None)])
