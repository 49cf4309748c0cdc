"""The live conversation a session drives, and its local (in-process SDK) implementation.

`Conversation` is what the turn logic, the session, `confirm` and `commands` may ask of
a conversation: run it, interrupt it, hand it a message, decide on its pending actions,
read the little state a turn needs, switch its model, condense it, close it. It says
nothing about threads or the SDK's objects, so a remote conversation (an OpenHands
agent-server) and a scripted fake (`trio_acp.testing.fake_conversation`) implement it too.

`LocalConversation` owns an in-process SDK conversation and everything that touches it:
- `arun()` runs on the conversation's private asyncio loop thread (`LoopThread`), so
  `interrupt()` can abort it mid-LLM-stream or mid-tool;
- short blocking SDK calls (`send_message`, `close`, setters) run on Trio worker threads
  under the conversation's own `CapacityLimiter`, never on the Trio thread (they take the
  SDK's state lock); interrupting has a limiter of its own, so a setter blocked on that
  lock behind a running tool never delays a cancel;
- the SDK's callbacks (events, tokens) are the `on_event`/`on_token` the opener passed:
  they run on the SDK's threads and must never wait.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, Protocol

import attrs
import trio

from trio_acp.openhands.backends.loop_thread import LoopThread, wait_done, wait_future
from trio_acp.openhands.errors import SEE_LOG, describe
from trio_acp.openhands.permissions.credential_files import CredentialFiles
from trio_acp.openhands.permissions.run_gate import RunGate, run_under
from trio_acp.openhands.permissions.tool_processes import (
    gate_terminals,
    remove_editor_history,
    stop_tool_processes,
)
from trio_acp.openhands.sdk import (
    confirmation_setup,
    fork_conversation,
    interruption_event,
    stopped_message_event,
    stopped_tool_event,
    supports_reasoning_effort,
    warm_model_path,
    warm_tool_schemas,
)
from trio_acp.openhands.sdk.audio import audio_content
from trio_acp.openhands.sessions.journal import JournalRecord
from trio_acp.openhands.sessions.recovery import Recovery, plan_recovery, turn_tail
from trio_acp.openhands.setup.critic import CriticFailures, prime_template
from trio_acp.openhands.setup.critic_review import CriticOutcome, is_answer, outcome_of
from trio_acp.openhands.setup.mcp_startup import McpStartFailure, McpStartup
from trio_acp.openhands.translate.prompt import AudioPart, ImagePart, TextPart, merge_text

log = logging.getLogger(__name__)

# The conversation's execution status, as the SDK words it (its values go on the wire in
# a failed turn's error data).
FINISHED = "finished"
WAITING_FOR_CONFIRMATION = "waiting_for_confirmation"
ERROR = "error"
STUCK = "stuck"


@attrs.frozen
class Usage:
    """Tokens and cost so far, and the context the last model call used."""

    last_used: int  # prompt + completion tokens of the last call
    context_window: int
    cost: float | None
    prompt_tokens: int | None  # accumulated
    completion_tokens: int | None


@attrs.frozen
class Condensed:
    """How a `/condense` went: `failure` is None when it worked."""

    added: int = 0  # events it added to the history
    failure: str | None = None
    empty: bool = False  # nothing to condense yet


@attrs.frozen
class LlmOptions:
    """What the session offers of the conversation's LLM."""

    reasoning_effort: str | None  # None: the model has none to choose
    stream: bool


class Run(Protocol):
    """One run of the conversation (until it finishes, stops for confirmation, fails...)."""

    def done(self) -> bool: ...

    async def outcome(self) -> BaseException | None:
        """Wait for the run's end: None, or the error it ended with."""
        ...

    async def wait_done(self) -> None:
        """Wait until the run is over, however it ended."""
        ...


class Conversation(Protocol):
    async def warm_up(self, report: dict[str, str]) -> list[McpStartFailure]:
        """Start the tools and warm the model call path; returns MCP start-up failures."""
        ...

    def llm_options(self) -> LlmOptions: ...

    async def set_mode(self, mode: str) -> None: ...

    async def use_model(
        self, choice: Any, *, reasoning_effort: str | None, stream: bool
    ) -> str | None:
        """Switch to another configured model; returns its reasoning effort (None: none)."""
        ...

    async def update_llm(self, **update: Any) -> None:
        """Change options of the current LLM (`stream`, `reasoning_effort`)."""
        ...

    def status(self) -> str: ...

    def event_count(self) -> int: ...

    def critic_outcome(self, since: int) -> CriticOutcome | None:
        """The critic's verdict on the last answer since event `since` (None: no critic,
        or no answer)."""
        ...

    def last_error(self, since: int) -> tuple[str | None, str | None]:
        """(code, detail) of the last error event since `since`, or (None, None)."""
        ...

    async def send_message(self, parts: list[TextPart | ImagePart | AudioPart]) -> None: ...

    def start_run(self) -> Run: ...

    async def interrupt(self) -> None: ...

    async def stop_tools(self) -> None:
        """Stop what the tools started (the terminal's processes)."""
        ...

    async def pending_actions(self) -> list[Any]: ...

    async def reject_pending(self, reason: str) -> None: ...

    async def note_interruption(self) -> None:
        """Record in the history that the user cut the turn short (unless it was complete)."""
        ...

    def usage(self) -> Usage | None: ...

    def skills(self) -> list[Any]:
        """The skills in the agent's context (`/skills`)."""
        ...

    async def history(self) -> list[Any]: ...

    async def condense(self) -> Condensed: ...

    async def fork(self, fork_id: Any) -> None: ...

    async def close(self) -> None: ...


class _FutureRun:
    def __init__(self, fut: Any) -> None:
        self._fut = fut

    def done(self) -> bool:
        return bool(self._fut.done())

    async def outcome(self) -> BaseException | None:
        try:
            await wait_future(self._fut)
        except Exception as exc:
            return exc
        return None

    async def wait_done(self) -> None:
        # Only that the run is over: a run cancelled outright (interrupted before it
        # started) ends with a cancelled future, which is not an error here.
        await wait_done(self._fut)


def user_message(sdk: SimpleNamespace, parts: list[TextPart | ImagePart | AudioPart]) -> Any:
    """The SDK's user `Message` for a prompt's parts (prompt.py), local or remote alike:
    adjacent text parts become one `TextContent` (`merge_text`: a part costs the SDK a
    deep copy on every model call)."""
    content: list[Any] = []
    for part in merge_text(parts):
        if isinstance(part, TextPart):
            content.append(sdk.TextContent(text=part.text))
        elif isinstance(part, ImagePart):
            content.append(sdk.ImageContent(image_urls=[part.url]))
        elif isinstance(part, AudioPart):
            content.append(audio_content(part.data, part.format, part.label))
    return sdk.Message(role="user", content=content)


class LocalConversation:
    """An `openhands.sdk` conversation in this process (see the module's docstring)."""

    def __init__(self, sdk: SimpleNamespace, conv: Any, name: str, make_llm: Any = None) -> None:
        self._sdk = sdk
        self._conv = conv
        self._make_llm = make_llm
        # The files whose reading the SDK must stop for in every mode (`set_mode`).
        self._credentials: CredentialFiles | None = None
        self._cwd = ""
        self.limiter = trio.CapacityLimiter(2)
        self._interrupt_limiter = trio.CapacityLimiter(1)
        self._loop: LoopThread | None = LoopThread(name)
        # A send a cancel stopped waiting for (`send_abandonable`) that has not landed yet,
        # and whether the turn it belonged to was cut short (`note_interruption`).
        self._send_lock = threading.Lock()
        self._sending = False
        self._cut_short = False
        self._landed: trio.Event | None = None
        # The gate of the current (or last) run: what its tools may still start (run_gate.py).
        self._gate: RunGate | None = None
        gate_terminals()
        # Why the critic's last evaluation failed (the SDK only logs it, on the loop thread).
        self._critic_failures: CriticFailures | None = None
        if getattr(conv.agent, "critic", None) is not None:
            self._critic_failures = CriticFailures(self._loop.ident)
            self._critic_failures.attach()

    @classmethod
    async def open(
        cls,
        sdk: SimpleNamespace,
        factory: Callable[..., Any],
        *,
        on_event: Callable[[Any], None],
        on_token: Callable[[Any], None],
        name: str,
        make_llm: Any = None,
        credential_files: CredentialFiles | None = None,
        cwd: str = "",
    ) -> LocalConversation:
        """Build the SDK conversation (blocking: on a worker thread)."""
        conv = await trio.to_thread.run_sync(
            lambda: factory(callbacks=[on_event], token_callbacks=[on_token])
        )
        made = cls(sdk, conv, name, make_llm)
        made._credentials, made._cwd = credential_files, cwd
        return made

    @property
    def sdk_conversation(self) -> Any:
        """The SDK's object itself, for tests and diagnostics only."""
        return self._conv

    # --- set-up -------------------------------------------------------------------

    async def warm_up(self, report: dict[str, str]) -> list[McpStartFailure]:
        """Start the agent's tools (terminal shell, MCP servers) while the user types.

        The SDK does this lazily on the first message, and the terminal's start-up alone
        sleeps a second: done here, the first prompt does not wait for it. It is the SDK's
        own thread-safe, idempotent initializer; if it fails, the first prompt tries again
        and reports the error. Then the tools' schemas are built once, and meanwhile the
        model call path is warmed (`warm_model_path`: the first call's lazy imports and
        tokenizer; bench/README.md has the figures). A prompt sent before all this is
        over waits for what it needs of it (the SDK's lock, the import lock).
        """
        conv = self._conv
        steps: dict[str, tuple[Any, Any, bool]] = {
            # Touches no conversation state and owns nothing: not on the session's limiter,
            # where it would hold up a set_mode right after session/new, and a close need
            # not wait for it.
            "model call path": (
                functools.partial(warm_model_path, self._sdk, conv.agent.llm),
                None,
                True,
            ),
        }
        ensure_ready = getattr(conv, "_ensure_agent_ready", None)
        if ensure_ready is not None:

            def tools() -> None:
                ensure_ready()
                warm_tool_schemas(conv.agent)

            # Not abandoned on cancel: a close must wait for it, or the shell it is starting
            # would outlive the session (conv.close() would find no tools to close yet).
            steps["tools"] = (tools, self.limiter, False)
        critic = getattr(conv.agent, "critic", None)
        if critic is not None and hasattr(critic, "_get_template_renderer"):
            # Its chat template, fetched from the network on first use: now, rather than
            # in the first evaluation, under the conversation's lock (critic.py).
            steps["critic chat template"] = (
                functools.partial(prime_template, critic),
                None,
                True,
            )
        async with trio.open_nursery() as nursery:
            for name, step in steps.items():
                nursery.start_soon(self._warm_step, report, name, *step)
        # The servers start once, in the warm-up or in the first prompt, whichever takes
        # the SDK's lock first; either way that is over now (session_build.py gives the
        # conversation its `McpStartup`).
        startup = getattr(conv, "_mcp_tool_provider", None)
        return list(startup.failures) if isinstance(startup, McpStartup) else []

    async def _warm_step(
        self, report: dict[str, str], name: str, step: Any, limiter: Any, abandon: bool
    ) -> None:
        try:
            await trio.to_thread.run_sync(step, limiter=limiter, abandon_on_cancel=abandon)
        except Exception as exc:
            report[name] = f"failed: {describe(exc)}"
            log.warning("warming up (%s) failed; the first prompt will retry", name, exc_info=True)
        else:
            report[name] = "done"

    def llm_options(self) -> LlmOptions:
        llm = self._conv.agent.llm
        effort = (
            (llm.reasoning_effort or "high") if supports_reasoning_effort(self._sdk, llm) else None
        )
        return LlmOptions(reasoning_effort=effort, stream=bool(getattr(llm, "stream", True)))

    async def set_mode(self, mode: str) -> None:
        policy, analyzer = confirmation_setup(self._sdk, mode, self._credentials, self._cwd)
        conv = self._conv

        def apply() -> None:
            # Both take the state lock: a worker thread, never the Trio thread.
            conv.set_security_analyzer(analyzer)
            conv.set_confirmation_policy(policy)

        await trio.to_thread.run_sync(apply, limiter=self.limiter)

    async def use_model(
        self, choice: Any, *, reasoning_effort: str | None, stream: bool
    ) -> str | None:
        conv, sdk, make_llm = self._conv, self._sdk, self._make_llm

        def switch() -> str | None:
            llm = make_llm(choice)
            update: dict[str, Any] = {"stream": stream}
            new_effort = None
            if supports_reasoning_effort(sdk, llm):
                new_effort = reasoning_effort or llm.reasoning_effort or "high"
                update["reasoning_effort"] = new_effort
            conv.switch_llm(llm.model_copy(update=update))  # takes the state lock
            return new_effort

        return await trio.to_thread.run_sync(switch, limiter=self.limiter)

    async def update_llm(self, **update: Any) -> None:
        conv = self._conv

        def switch() -> None:
            conv.switch_llm(conv.agent.llm.model_copy(update=update))

        await trio.to_thread.run_sync(switch, limiter=self.limiter)

    # --- a turn ---------------------------------------------------------------------

    def status(self) -> str:
        status = self._conv.state.execution_status
        return str(getattr(status, "value", status))

    def event_count(self) -> int:
        return len(self._conv.state.events)

    def critic_outcome(self, since: int) -> CriticOutcome | None:
        if self._critic_failures is None:
            return None
        events = self._conv.state.events
        error = self._critic_failures.take()
        # From the end: the answer is last or nearly (each event read may touch the disk).
        for index in range(len(events) - 1, since - 1, -1):
            if is_answer(event := events[index]):
                return outcome_of([event], error)
        return None

    def last_error(self, since: int) -> tuple[str | None, str | None]:
        events = self._conv.state.events
        for index in range(len(events) - 1, since - 1, -1):
            event = events[index]
            if type(event).__name__ == "ConversationErrorEvent":
                return event.code, event.detail
        return None, None

    @property
    def send_abandonable(self) -> bool:
        """A cancel may stop waiting for the send (turn.py) while the agent's tools are
        still starting: the SDK starts them (the MCP servers: up to TRIO_ACP_MCP_TIMEOUT
        each, mcp_startup.py) under the state lock that taking a message in needs, and a
        cancel must not wait for that. Also while such a send is still landing."""
        return self._sending or not getattr(self._conv, "_agent_ready", True)

    async def send_message(self, parts: list[TextPart | ImagePart | AudioPart]) -> None:
        message = user_message(self._sdk, parts)
        if self._landed is not None:
            # The message of a turn cut short is still landing: this one goes after it.
            await self._landed.wait()
        if not self.send_abandonable:
            await trio.to_thread.run_sync(self._conv.send_message, message, limiter=self.limiter)
            return
        conv, token, landed = self._conv, trio.lowlevel.current_trio_token(), trio.Event()
        self._landed, self._sending, self._cut_short = landed, True, False
        began = threading.Event()  # set under `_send_lock`: the message is being sent
        skip = threading.Event()  # set under `_send_lock`: cancelled before that

        def send() -> None:
            with self._send_lock:
                if skip.is_set():
                    return
                began.set()
            try:
                conv.send_message(message)
            finally:
                with self._send_lock:
                    cut_short, self._sending = self._cut_short, False
                if cut_short:
                    # After the message it answers for, never before it.
                    with conv.state:
                        conv.state.append_event(interruption_event(self._sdk))
                try:
                    token.run_sync_soon(landed.set)
                except trio.RunFinishedError:
                    pass

        try:
            await trio.to_thread.run_sync(send, limiter=self.limiter, abandon_on_cancel=True)
        except BaseException:
            with self._send_lock:
                if not began.is_set():  # never sent, and now never will be
                    skip.set()
                    self._sending = False
                    landed.set()
            raise

    def start_run(self) -> Run:
        assert self._loop is not None
        gate = self._gate = RunGate()
        return _FutureRun(self._loop.submit(functools.partial(run_under, gate, self._conv.arun)))

    @property
    def run_gate(self) -> RunGate | None:
        """The gate of the current (or last) run, for tests and diagnostics."""
        return self._gate

    async def interrupt(self) -> None:
        await trio.to_thread.run_sync(self._conv.interrupt, limiter=self._interrupt_limiter)

    async def stop_tools(self) -> None:
        await trio.to_thread.run_sync(
            stop_tool_processes, self._conv, self._gate, limiter=self._interrupt_limiter
        )

    async def pending_actions(self) -> list[Any]:
        sdk, conv = self._sdk, self._conv
        return await trio.to_thread.run_sync(
            lambda: sdk.ConversationState.get_unmatched_actions(conv.state.active_branch()),
            limiter=self.limiter,
        )

    async def reject_pending(self, reason: str) -> None:
        await trio.to_thread.run_sync(
            self._conv.reject_pending_actions, reason, limiter=self.limiter
        )

    async def note_interruption(self) -> None:
        """Appended to the SDK's state directly (persisted, no callbacks): the client
        already knows it cancelled; the model and a later `session/load` learn it."""
        with self._send_lock:
            if self._sending:
                # The message is still landing (its send was abandoned): the note follows
                # it there (`send_message`).
                self._cut_short = True
                return
        sdk, conv = self._sdk, self._conv

        def note() -> None:
            with conv.state:  # the SDK's state lock: a worker thread, never the Trio thread
                if conv.state.execution_status == sdk.ExecutionStatus.FINISHED:
                    return  # the reply was complete when the cancel landed
                conv.state.append_event(interruption_event(sdk))

        # Abandonable: a run that outlived its interrupt may still hold the lock, and a
        # cancel must answer within its budget rather than wait for it.
        await trio.to_thread.run_sync(note, limiter=self._interrupt_limiter, abandon_on_cancel=True)

    async def recover(self, journal: JournalRecord, cwd: str) -> Recovery:
        """The conversation was just opened from disk: close what a process that stopped
        mid-turn left open, and keep what the user saw of it (recovery.py). Appended to the
        SDK's state directly (persisted, no callbacks): the replay that follows shows it."""
        sdk, conv = self._sdk, self._conv

        def recover() -> Recovery:
            with conv.state:  # the SDK's state lock: a worker thread, never the Trio thread
                state = conv.state
                tail = turn_tail(state.events)
                waiting = state.execution_status == sdk.ExecutionStatus.WAITING_FOR_CONFIRMATION
                plan = plan_recovery(
                    tail,
                    sdk.ConversationState.get_unmatched_actions(tail),
                    waiting_for_confirmation=waiting,
                    journal=journal,
                    cwd=cwd,
                )
                for ending in plan.endings:
                    state.append_event(stopped_tool_event(sdk, ending))
                if plan.text is not None:
                    state.append_event(stopped_message_event(sdk, plan.text, plan.thought))
                if waiting and plan.endings:
                    # Nothing is pending any more; left waiting, the next run would
                    # execute the actions the user never approved.
                    state.execution_status = sdk.ExecutionStatus.IDLE
                return plan

        return await trio.to_thread.run_sync(recover, limiter=self.limiter)

    def skills(self) -> list[Any]:
        # The agent's context is fixed once the conversation exists: no lock needed.
        context = getattr(self._conv.agent, "agent_context", None)
        return list(getattr(context, "skills", None) or [])

    def usage(self) -> Usage | None:
        stats = self._conv.conversation_stats
        if not stats.usage_to_metrics:
            # The SDK registers only LLMs of exactly its `LLM` class with the stats
            # (`get_all_llms`); the session's is our subclass (sdk/__init__.py
            # `SessionLLM`), so its metrics are read from it directly.
            return usage_of(
                SimpleNamespace(get_combined_metrics=lambda: self._conv.agent.llm.metrics)
            )
        return usage_of(stats)

    # --- the whole conversation --------------------------------------------------------

    async def history(self) -> list[Any]:
        conv = self._conv
        return await trio.to_thread.run_sync(lambda: list(conv.state.events), limiter=self.limiter)

    async def condense(self) -> Condensed:
        conv = self._conv

        def has_history() -> bool:
            # Only the system prompt so far: the SDK would record a condensation request it
            # cannot serve, and the next prompt would pay for it. Nothing to do, say so.
            return any(type(e).__name__ != "SystemPromptEvent" for e in conv.state.view.events)

        if not await trio.to_thread.run_sync(has_history, limiter=self.limiter):
            return Condensed(empty=True)
        before = len(conv.state.events)
        error, logged = await trio.to_thread.run_sync(_condense_now, conv, limiter=self.limiter)
        if error is not None:
            return Condensed(failure=_condense_failure(self._sdk, error, logged))
        return Condensed(added=len(conv.state.events) - before)

    async def fork(self, fork_id: Any) -> None:
        """Copy this conversation, history and all, to `fork_id` on disk."""
        conv, sdk = self._conv, self._sdk
        await trio.to_thread.run_sync(
            lambda: fork_conversation(sdk, conv, fork_id), limiter=self.limiter
        )

    async def close(self) -> None:
        """Close the SDK conversation (tool executors, terminals) and stop the loop thread."""
        conv, gate = self._conv, self._gate
        try:
            await trio.to_thread.run_sync(
                lambda: _close_all(conv, gate),
                limiter=self.limiter,
                abandon_on_cancel=True,
            )
        finally:
            if self._critic_failures is not None:
                self._critic_failures.detach()
            if self._loop is not None:
                self._loop.stop()


def usage_of(stats: Any) -> Usage | None:
    """`Usage` from the SDK's `ConversationStats` (local, or as an agent-server reports it)."""
    try:
        metrics = stats.get_combined_metrics()
    except Exception:
        return None
    usages = getattr(metrics, "token_usages", None) or []
    last = usages[-1] if usages else None
    total = getattr(metrics, "accumulated_token_usage", None)
    cost = metrics.accumulated_cost
    return Usage(
        last_used=((last.prompt_tokens or 0) + (last.completion_tokens or 0))
        if last is not None
        else 0,
        context_window=(getattr(last, "context_window", 0) or 0) if last is not None else 0,
        cost=cost if cost is not None and math.isfinite(cost) else None,
        prompt_tokens=total.prompt_tokens if total is not None else None,
        completion_tokens=total.completion_tokens if total is not None else None,
    )


def fork_stored(
    sdk: SimpleNamespace,
    agent: Any,
    *,
    workspace: str,
    persistence_dir: str,
    conversation_id: Any,
    fork_id: Any,
) -> None:
    """Copy a stored conversation that is not open here to `fork_id` on disk; blocking (run
    it in a worker thread). The conversation is opened just for the copy, then closed."""
    conv = sdk.Conversation(
        agent=agent,
        workspace=workspace,
        persistence_dir=persistence_dir,
        conversation_id=conversation_id,
        visualizer=None,
    )
    try:
        fork_conversation(sdk, conv, fork_id)
    finally:
        conv.close()


class _ThreadWarnings(logging.Handler):
    """Warnings logged by the calling thread (the condenser's logger is shared by sessions)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.messages.append(record.getMessage())


def _condense_now(conv: Any) -> tuple[Exception | None, list[str]]:
    # When the summary's model call fails, the SDK logs why and raises without it
    # ("Unable to compute forgotten events"): the log is where the reason is.
    seen = _ThreadWarnings()
    logger = logging.getLogger(CONDENSER_LOGGER)
    events = conv.state.events
    head = events[-1].id if len(events) else None
    logger.addHandler(seen)
    try:
        conv.condense()
        return None, seen.messages
    except Exception as exc:
        _forget_request(conv, head)
        return exc, seen.messages
    finally:
        logger.removeHandler(seen)


def _forget_request(conv: Any, head: Any) -> None:
    """Put the conversation back where it was before a failed /condense.

    The SDK keeps the condensation request it could not serve, and the next turn serves
    it first — with the user's new message inside the summary, not answered. Moving the
    conversation's head back leaves the request on an abandoned branch (still on disk,
    out of the model's view).
    """
    if head is None:
        return
    try:
        conv.navigate_to(head)
    except Exception:
        log.warning("could not drop the failed condensation request", exc_info=True)


CONDENSER_LOGGER = "openhands.sdk.context.condenser"
_LLM_FAILED = re.compile(r"LLM call failed: (.*?)(?:\. Reducing max event size.*)?$", re.S)


def _condense_failure(sdk: Any, exc: Exception, logged: list[str]) -> str:
    unchanged = "The history is unchanged"
    if isinstance(exc, ValueError) and "condenser" in str(exc).lower():
        # The SDK's text goes on with a Python snippet meant for SDK users.
        return f"{str(exc).splitlines()[0]} {unchanged}."
    if isinstance(exc, getattr(sdk, "NoCondensationAvailableException", ())):
        for text in [str(exc), *reversed(logged)]:
            found = _LLM_FAILED.search(text)
            if found:
                reason = " ".join(found.group(1).split())[:300]
                return f"the model call that writes the summary failed ({reason}). {unchanged}."
        return f"no summary could be written ({describe(exc)}). {unchanged}."
    return f"{describe(exc)}. {unchanged}. ({SEE_LOG})"


def _close_all(conv: Any, gate: RunGate | None) -> None:
    # Blocking: kill the terminals' process groups, close the SDK conversation, then
    # remove the file editors' undo history it leaves in /tmp.
    stop_tool_processes(conv, gate)
    conv.close()
    remove_editor_history(conv)
