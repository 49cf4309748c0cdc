"""The in-process SDK conversation: the `Conversation` (conversation.py) a local session drives.

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
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

import trio

from trio_acp.openhands.backends.condense import condense
from trio_acp.openhands.backends.conversation import (
    Condensed,
    LlmOptions,
    Run,
    StopCommand,
    Usage,
    usage_of,
    user_message,
)
from trio_acp.openhands.backends.local_handles import FutureRun, Landing
from trio_acp.openhands.backends.loop_thread import LoopThread
from trio_acp.openhands.errors import describe
from trio_acp.openhands.permissions.credential_files import CredentialFiles
from trio_acp.openhands.permissions.run_gate import RunGate, ToolCallStops, run_under
from trio_acp.openhands.permissions.tool_processes import (
    remove_editor_history,
    stop_command_in,
    stop_tool_processes,
)
from trio_acp.openhands.sdk import (
    abandoned_warm_ups,
    confirmation_setup,
    fork_conversation,
    internals,
    interruption_event,
    stopped_message_event,
    stopped_tool_event,
    supports_reasoning_effort,
    warm_model_path,
    warm_tool_schemas,
)
from trio_acp.openhands.sessions.journal import JournalRecord
from trio_acp.openhands.sessions.recovery import (
    Recovery,
    plan_recovery,
    turn_tail,
    unsaved_text,
)
from trio_acp.openhands.setup.critic import CriticFailures, prime_template
from trio_acp.openhands.setup.critic_review import CriticOutcome, is_answer, outcome_of
from trio_acp.openhands.setup.mcp_startup import McpStartFailure, McpStartup
from trio_acp.openhands.translate.interruptions import FAILED_TEXT
from trio_acp.openhands.translate.prompt import AudioPart, ImagePart, TextPart

if TYPE_CHECKING:
    from trio_acp.openhands.sdk import classes
    from trio_acp.openhands.sdk.classes import LLM, ActionEvent, Event, Metrics, Skill
    from trio_acp.openhands.sdk.classes import LocalConversation as SdkConversation
    from trio_acp.openhands.sdk.loaded import Sdk
    from trio_acp.openhands.sessions.session_parts import LocalFactory, MakeLlm
    from trio_acp.openhands.setup.models import ModelChoice

log = logging.getLogger(__name__)


class LocalConversation:
    """An `openhands.sdk` conversation in this process (see the module's docstring)."""

    def __init__(
        self, sdk: Sdk, conv: SdkConversation, name: str, make_llm: MakeLlm | None = None
    ) -> None:
        self._sdk = sdk
        self._conv = conv
        self._make_llm = make_llm
        # The files whose reading the SDK must stop for in every mode (`set_mode`).
        self._credentials: CredentialFiles | None = None
        self._cwd = ""
        self.limiter = trio.CapacityLimiter(2)
        self._interrupt_limiter = trio.CapacityLimiter(1)
        self._loop: LoopThread | None = LoopThread(name)
        # The last abandonable send (`send_message`): until it has landed, the next send
        # goes after it and the turn's interruption note follows it (`note_interruption`).
        self._send_lock = threading.Lock()
        self._landing: Landing | None = None
        # The gate of the current (or last) run: what its tools may still start (run_gate.py).
        self._gate: RunGate | None = None
        # Its tool calls, stoppable one by one across its runs (run_gate.py).
        self._stops = ToolCallStops()
        from trio_acp.openhands.sdk.terminal_gate import gate_terminals

        gate_terminals()
        # Why the critic's last evaluation failed (the SDK only logs it, on the loop thread).
        self._critic_failures: CriticFailures | None = None
        if getattr(conv.agent, "critic", None) is not None:
            self._critic_failures = CriticFailures(self._loop.ident)
            self._critic_failures.attach()

    @classmethod
    async def open(
        cls,
        sdk: Sdk,
        factory: LocalFactory,
        *,
        on_event: Callable[[Event], None],
        on_token: Callable[[object], None],  # litellm's stream chunks, read duck-typed
        name: str,
        make_llm: MakeLlm | None = None,
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
    def sdk_conversation(self) -> SdkConversation:
        """The SDK's object itself, for tests and diagnostics only."""
        return self._conv

    # --- set-up -------------------------------------------------------------------

    async def warm_up(self, report: dict[str, str]) -> list[McpStartFailure]:
        """Build the agent's tools and start the MCP servers while the user types.

        The SDK does this lazily on the first message: done here, the first prompt does
        not wait for it. The terminal's shell is not started here (an idle session keeps
        none): its first command or the turn starts it (`start_run`). It is the SDK's
        own thread-safe, idempotent initializer; if it fails, the first prompt tries again
        and reports the error. Then the tools' schemas are built once, and meanwhile the
        model call path is warmed (`warm_model_path`: the first call's lazy imports and
        tokenizer; bench/README.md has the figures). A prompt sent before all this is
        over waits for what it needs of it (the SDK's lock, the import lock).
        """
        conv = self._conv
        steps: dict[str, tuple[Callable[[], object], trio.CapacityLimiter | None, bool]] = {
            # Touches no conversation state and owns nothing: not on the session's limiter,
            # where it would hold up a set_mode right after session/new, and a close need
            # not wait for it.
            "model call path": (
                functools.partial(warm_model_path, self._sdk, conv.agent.llm),
                None,
                True,
            ),
        }
        ensure_ready = internals.agent_initializer(conv)
        tools_built = trio.Event()
        if ensure_ready is not None:
            # Not abandoned on cancel: a close must wait for it, or what it is building (MCP
            # servers, the file editor's directory) would outlive the session (conv.close()
            # would find no tools to close yet).
            steps["tools"] = (ensure_ready, self.limiter, False)
        over = False

        async def tool_schemas() -> None:
            # After the tools; only caches (read-only): off the limiter, and abandoned by a
            # close, which would otherwise wait for ~0.1-1 s of CPU (stdin EOF right after
            # session/new: bench/README.md, "Idle sessions and exit").
            await tools_built.wait()
            if report.get("tools") == "done":
                await self._warm_step(
                    report,
                    "tool schemas",
                    functools.partial(warm_tool_schemas, conv.agent),
                    None,
                    True,
                )

        critic = getattr(conv.agent, "critic", None)
        if critic is not None and internals.has_chat_template(critic):
            # Its chat template, fetched from the network on first use: now, rather than
            # in the first evaluation, under the conversation's lock (critic.py).
            steps["critic chat template"] = (
                functools.partial(prime_template, critic),
                None,
                True,
            )

        async def stop_starting_on_cancel() -> None:
            # The tools step is not abandoned (above), so a cancel (the session closing)
            # stops the MCP start-up it may be in, rather than wait for its bound.
            try:
                await trio.sleep_forever()
            finally:
                if not over:
                    self._stop_starting()

        async with trio.open_nursery() as watch:
            watch.start_soon(stop_starting_on_cancel)
            async with trio.open_nursery() as nursery:
                for name, step in steps.items():
                    done = tools_built if name == "tools" else None
                    nursery.start_soon(self._warm_step, report, name, *step, done)
                if ensure_ready is not None:
                    nursery.start_soon(tool_schemas)
            over = True
            watch.cancel_scope.cancel()
        # The servers start once, in the warm-up or in the first prompt, whichever takes
        # the SDK's lock first; either way that is over now (session_build.py gives the
        # conversation its `McpStartup`).
        startup = self._mcp_startup()
        return list(startup.failures) if startup is not None else []

    def _mcp_startup(self) -> McpStartup | None:
        startup = internals.mcp_tool_provider(self._conv)
        return startup if isinstance(startup, McpStartup) else None

    def _stop_starting(self) -> None:
        """Closing: give up on MCP servers still starting (mcp_startup.py), which hold the
        SDK's lock that closing needs, instead of waiting for TRIO_ACP_MCP_TIMEOUT."""
        startup = self._mcp_startup()
        if startup is not None:
            startup.stop()

    async def _warm_step(
        self,
        report: dict[str, str],
        name: str,
        step: Callable[[], object],
        limiter: trio.CapacityLimiter | None,
        abandon: bool,
        over: trio.Event | None = None,
    ) -> None:
        if abandon:
            # Counted, so that the interpreter's exit waits for it (abandoned_warm_ups.py).
            step = functools.partial(abandoned_warm_ups.run, step)
        try:
            await trio.to_thread.run_sync(step, limiter=limiter, abandon_on_cancel=abandon)
        except Exception as exc:
            report[name] = f"failed: {describe(exc)}"
            log.warning("warming up (%s) failed; the first prompt will retry", name, exc_info=True)
        else:
            report[name] = "done"
        finally:
            if over is not None:
                over.set()

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
        self, choice: ModelChoice, *, reasoning_effort: str | None, stream: bool
    ) -> str | None:
        conv, sdk, make_llm = self._conv, self._sdk, self._make_llm
        if make_llm is None:
            raise RuntimeError("this conversation was opened without a way to build models")

        def switch() -> str | None:
            llm = make_llm(choice)
            update: dict[str, object] = {"stream": stream}
            new_effort = None
            if supports_reasoning_effort(sdk, llm):
                new_effort = reasoning_effort or llm.reasoning_effort or "high"
                update["reasoning_effort"] = new_effort
            conv.switch_llm(llm.model_copy(update=update))  # takes the state lock
            return new_effort

        return await trio.to_thread.run_sync(switch, limiter=self.limiter)

    async def update_llm(self, **update: object) -> None:
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
            if type(event).__name__ == "ConversationErrorEvent":  # the SDK's, by name
                code, detail = getattr(event, "code", None), getattr(event, "detail", None)
                return code, detail
        return None, None

    @property
    def send_abandonable(self) -> bool:
        """A cancel may stop waiting for the send (turn.py) while the agent's tools are
        still starting: the SDK starts them (the MCP servers: up to TRIO_ACP_MCP_TIMEOUT
        each, mcp_startup.py) under the state lock that taking a message in needs, and a
        cancel must not wait for that. Also while such a send is still landing."""
        landing = self._landing
        return (landing is not None and not landing.done) or not getattr(
            self._conv, "_agent_ready", True
        )

    async def send_message(
        self, parts: list[TextPart | ImagePart | AudioPart], sender: str | None = None
    ) -> None:
        message = user_message(self._sdk, parts)
        if not self.send_abandonable:
            await trio.to_thread.run_sync(
                _untyped(self._conv).send_message, message, sender, limiter=self.limiter
            )
            return
        # The thread starts before this task's first checkpoint, so a cancel, even one
        # set before the turn got here, only stops the waiting: the message lands, after
        # the one still landing, and a turn cut short has its note right after it.
        landing = Landing(previous=self._landing)
        self._landing = landing
        conv, sdk, token = self._conv, self._sdk, trio.lowlevel.current_trio_token()
        send_message = _untyped(conv).send_message

        def send() -> None:
            try:
                if landing.previous is not None:
                    landing.previous.landed.wait()
                    landing.previous = None
                send_message(message, sender)
            except BaseException as exc:
                landing.error = exc
            finally:
                with self._send_lock:
                    landing.done = True
                    cut_short = landing.cut_short
                if cut_short:
                    try:
                        with conv.state:
                            conv.state.append_event(interruption_event(sdk))
                    except Exception:
                        log.warning("could not record the interruption", exc_info=True)
                landing.landed.set()
                try:
                    token.run_sync_soon(landing.wake.set)
                except trio.RunFinishedError:
                    pass

        trio.lowlevel.start_thread_soon(send, lambda _: None, name="trio-acp send_message")
        await landing.wake.wait()
        if landing.error is not None:
            raise landing.error

    def start_run(self) -> Run:
        assert self._loop is not None
        gate = self._gate = RunGate(self._stops)
        run = FutureRun(
            self._loop.submit(functools.partial(run_under, gate, _untyped(self._conv).arun))
        )
        self._prestart_terminals()
        return run

    def _prestart_terminals(self) -> None:
        """Start the terminal tool's shell, if it has not started, on a thread of its own
        while the model thinks: an idle session keeps no shell, and a turn's first command
        finds one ready (sdk/terminal_start.py). Nothing waits for the thread; closing
        the conversation waits for a shell it is starting, or stops it from starting."""
        from trio_acp.openhands.sdk.terminal_start import prestart

        trio.lowlevel.start_thread_soon(
            functools.partial(prestart, self._conv.agent),
            lambda _: None,
            name="trio-acp terminal start",
        )

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

    def stop_tool_call(self, tool_call_id: str) -> tuple[bool, StopCommand | None]:
        stopping, shell = self._stops.stop(tool_call_id)  # a lock held for a lookup only
        if shell is None:
            return stopping, None
        gate = self._gate

        async def stop() -> None:
            await trio.to_thread.run_sync(
                stop_command_in, shell, gate, limiter=self._interrupt_limiter
            )

        return stopping, stop

    async def pending_actions(self) -> list[ActionEvent]:
        sdk, conv = self._sdk, self._conv
        return await trio.to_thread.run_sync(
            lambda: sdk.ConversationState.get_unmatched_actions(conv.state.active_branch()),
            limiter=self.limiter,
        )

    async def reject_pending(self, reason: str) -> None:
        await trio.to_thread.run_sync(
            self._conv.reject_pending_actions, reason, limiter=self.limiter
        )

    async def note_interruption(self, shown: JournalRecord | None = None, since: int = 0) -> None:
        """Appended to the SDK's state directly (persisted, no callbacks): the client
        already knows it cancelled; the model and a later `session/load` learn it. With
        `shown` (the turn journal's record of what the turn showed) the note keeps the
        streamed text no event since `since` (the turn's first) holds: the reply the
        cancel cut short, which the SDK never saves."""
        with self._send_lock:
            landing = self._landing
            if landing is not None and not landing.done:
                # The message is still landing (its send was abandoned): the note follows
                # it there (`send_message`).
                landing.cut_short = True
                return
        sdk, conv = self._sdk, self._conv

        cwd = self._cwd

        def note() -> None:
            with conv.state:  # the SDK's state lock: a worker thread, never the Trio thread
                if conv.state.execution_status == sdk.ExecutionStatus.FINISHED:
                    return  # the reply was complete when the cancel landed
                text = thought = None
                if shown:
                    text, thought = unsaved_text(_since(conv.state.events, since), shown, cwd)
                conv.state.append_event(interruption_event(sdk, text, thought))

        # Abandonable: a run that outlived its interrupt may still hold the lock, and a
        # cancel must answer within its budget rather than wait for it.
        await trio.to_thread.run_sync(note, limiter=self._interrupt_limiter, abandon_on_cancel=True)

    async def keep_shown(self, shown: JournalRecord, since: int) -> None:
        """The turn failed (its model call, say): keep what it showed of a reply no event
        since `since` holds, as a stopped process's is kept (recovery.py), ending with
        `FAILED_TEXT`. Persisted, no callbacks: the client saw it already."""
        if not shown.shown:
            return
        sdk, conv, cwd = self._sdk, self._conv, self._cwd

        def keep() -> None:
            with conv.state:  # the SDK's state lock: a worker thread, never the Trio thread
                text, thought = unsaved_text(_since(conv.state.events, since), shown, cwd)
                if text is None and thought is None:
                    return
                body = f"{text}\n\n{FAILED_TEXT}" if text else FAILED_TEXT
                conv.state.append_event(stopped_message_event(sdk, body, thought))

        # Abandonable, as the note: a run that outlived its failure may still hold the lock.
        await trio.to_thread.run_sync(keep, limiter=self._interrupt_limiter, abandon_on_cancel=True)

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

    def skills(self) -> list[Skill]:
        # The agent's context is fixed once the conversation exists: no lock needed.
        context = getattr(self._conv.agent, "agent_context", None)
        return list(getattr(context, "skills", None) or [])

    def usage(self) -> Usage | None:
        stats = self._conv.conversation_stats
        if not stats.usage_to_metrics:
            # The SDK registers only LLMs of exactly its `LLM` class with the stats
            # (`get_all_llms`); the session's is our subclass (sdk/llm.py), so its
            # metrics are read from it directly.
            return usage_of(_LlmMetrics(self._conv.agent.llm))
        return usage_of(stats)

    # --- the whole conversation --------------------------------------------------------

    async def history(self) -> list[Event]:
        conv = self._conv
        return await trio.to_thread.run_sync(lambda: list(conv.state.events), limiter=self.limiter)

    async def condense(self) -> Condensed:
        return await condense(self._sdk, self._conv, self.limiter)

    async def fork(self, fork_id: uuid.UUID) -> None:
        """Copy this conversation, history and all, to `fork_id` on disk."""
        conv, sdk = self._conv, self._sdk
        await trio.to_thread.run_sync(
            lambda: fork_conversation(sdk, conv, fork_id), limiter=self.limiter
        )

    async def close(self) -> None:
        """Close the SDK conversation (tool executors, terminals) and stop the loop thread."""
        conv, gate = self._conv, self._gate
        self._stop_starting()
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


class _LlmMetrics:
    """One LLM's metrics, shaped as `usage_of` reads the SDK's `ConversationStats`."""

    def __init__(self, llm: LLM) -> None:
        self._llm = llm

    def get_combined_metrics(self) -> Metrics:
        return self._llm.metrics


def _untyped(conv: SdkConversation) -> classes.ObservedConversation:
    """The SDK conversation, for the methods its `@observe` decorator (lmnr) leaves typed
    as taking `Never` on a fresh mypy run (`send_message`, `arun`)."""
    return cast("classes.ObservedConversation", conv)


def _since(events: Sequence[Event], start: int) -> list[Event]:
    """The events from index `start` on (the SDK's event list reads each from disk)."""
    return [events[i] for i in range(max(0, start), len(events))]


def _close_all(conv: SdkConversation, gate: RunGate | None) -> None:
    # Blocking: kill the terminals' process groups, close the SDK conversation, then
    # remove the file editors' undo history it leaves in /tmp.
    stop_tool_processes(conv, gate)
    conv.close()
    remove_editor_history(conv)
