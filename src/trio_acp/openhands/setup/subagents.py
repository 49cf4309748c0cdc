"""Sub-agents: the `task` tool (the OpenHands CLI's delegation), run so that the client sees
their work, the session's approval mode covers their actions, and a cancel stops them.

The SDK's task tool (`openhands.tools.task`) runs a sub-agent as an SDK conversation of its
own, with the blocking `run()`, on the parent's tool thread; its events reach no callback of
the parent's, it approves a waiting sub-agent's actions by itself when it was given no
confirmation handler (the CLI gives none: there a sub-agent runs tools unasked whatever the
mode), and interrupting the parent does not reach it. So the session registers its own
variant of the tool set under the same name (`task_tool_set`: stored conversations and the
CLI's keep working unchanged). Its SDK classes are in the door (`sdk/delegation.py`); this
module is the rest:

- **Visible.** The parent conversation's visualizer is a `SubagentView` (no output of its
  own): the SDK asks it for a sub-visualizer when it creates a sub-agent's conversation, and
  that one posts each of the sub-agent's events to the session's outbox as a `SubagentEvent`
  naming the delegating tool call (`translate/subagents.py` shows them nested under it).
  Its thread posts `SubagentBegan` first and `SubagentEnded` last: the delegating call's
  result, which a cancel makes the parent post early from its own thread, is shown after
  them; and a turn answers only once its sub-agents are done (`wait_for_subagents`,
  bounded), so what they did up to a stop is shown in the turn.
  A task resumed with `resume` runs without visualizer in the SDK: its steps are not shown,
  its result is.
- **Asked.** The sub-agent gets the session's confirmation policy and security analyzer
  (an agent file's own `permission_mode` may only ask more). When it stops for
  confirmation, its tool thread hands the batch to the running turn (`Hub.serve`), which
  puts it to the user exactly as the parent's actions are (`confirm.confirm_pending`: the
  same "always" rules, preview and fail-closed answers) and waits for the decision. With no
  turn to ask (cancelled, or over), the sub-agent is stopped: it never runs a tool unasked.
- **Stopped.** A cancel interrupts the parent's `arun()`, but the sub-agent keeps running on
  the parent's tool thread, where the SDK's blocking `run()` could only pause between
  steps (a model call held a cancel for up to `STOP_WAIT`). So a sub-agent runs with
  `arun()` on an asyncio loop of its own in that thread (subagent_run.py), and stopping
  the session's tools (`tool_processes.stop_tool_processes`) also stops every live
  sub-agent: its run is cut (mid-model-call too), its pending question is answered "stop",
  its tools are interrupted and their processes killed, and we wait (bounded) until its
  thread is done, so what it showed up to the stop is in the turn.
- The sub-agent's terminal runs as a plain subprocess, as the session's does, and the
  agent's credentials are masked in its tool output as in the session's
  (`sdk.mask_in_conversation`). Its conversation's files, under the session's
  `subagents/` directory and deleted when it ends, are written by the SDK's own store,
  without our masking of tool arguments (`sdk.MaskingFileStore`).

Threads: sub-agents run on the parent's tool threads; their callbacks only post (never
wait); a sub-agent waiting for a decision waits on a `threading.Event` that the turn's answer,
a cancel, or the end of the turn's serving always sets.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from trio_acp.openhands.permissions import turn_points
from trio_acp.openhands.permissions.confirm import CANCELLED, PendingBatch
from trio_acp.openhands.sdk import internals
from trio_acp.openhands.translate.shapes import SdkObject
from trio_acp.openhands.translate.subagents import (
    META_KEY,
    SubagentBegan,
    SubagentEnded,
    SubagentEvent,
    nested_id,
)

if TYPE_CHECKING:
    from trio_acp.credentials import SecretValues
    from trio_acp.openhands.sdk.classes import Action, ActionEvent, Event, LocalConversation
    from trio_acp.openhands.sdk.delegation import SubagentView

#: What the hub posts: the session's event callback, which takes the sub-agents' items
#: (translate/subagents.py) along with the SDK's events, and reads them duck-typed.
Post = Callable[[SdkObject], None]

log = logging.getLogger(__name__)

RUN, REJECT, STOP = "run", "reject", "stop"
# How long stopping the tools waits for the sub-agents' threads to end.
STOP_WAIT = 5.0
# How far back the delegating call's ActionEvent is looked for.
_LOOK_BACK = 200

#: The running delegation of this tool thread (`current.delegation`, `current.hub`): set by
#: the task executor around the SDK's delegation, read by the sub-agent's visualizer and
#: task manager (`sdk/delegation.py`), which the SDK calls on this same thread.
current = threading.local()


class SubagentStopped(Exception):
    """The sub-agent was stopped (a cancel, or no one to ask)."""


@attrs.define(eq=False)
class Delegation:
    """One running `task` call: the delegating tool call and its sub-agent's conversation."""

    parent_tool_call_id: str
    label: str
    conversation: LocalConversation | None = None
    stopped: threading.Event = attrs.Factory(threading.Event)
    finished: threading.Event = attrs.Factory(threading.Event)
    # Cuts the sub-agent's run short, model call included (`run_until_stopped`); any
    # thread, never blocks. None while no run is under way.
    cut_run: Callable[[], None] | None = None
    lock: threading.Lock = attrs.Factory(threading.Lock)
    # The tool calls the sub-agent announced and has no result for yet (its thread, under
    # `lock`: sdk/delegation.py's view notes each event).
    running_tools: set[str] = attrs.Factory(set)

    def tool_started(self, tool_call_id: str) -> None:
        with self.lock:
            self.running_tools.add(tool_call_id)

    def tool_ended(self, tool_call_id: str) -> None:
        with self.lock:
            self.running_tools.discard(tool_call_id)

    def stop(self) -> None:
        """Mark it stopped and cut its run, mid-model-call if need be; never blocks.

        Not while its tools run: the cancel stops their processes
        (`tool_processes.stop_tool_processes`), so they end at once with their result
        (a killed command's output and exit code), which the user then sees, and the run
        stops at that event (`SubagentStopped`). Cutting it there would drop that result."""
        with self.lock:
            self.stopped.set()
            cut = None if self.running_tools else self.cut_run
        if cut is not None:
            cut()


@attrs.define(eq=False)
class Ask:
    """A sub-agent's batch of actions waiting for the user's decision."""

    delegation: Delegation
    actions: list[ActionEvent]
    answer: str | None = None
    reason: str = ""
    done: threading.Event = attrs.Factory(threading.Event)


class Hub:
    """The sub-agents of one session: what they post, ask, and how they are stopped."""

    def __init__(self, post: Post | None = None, secrets: SecretValues | None = None) -> None:
        self._post = post
        # The agent's credentials (`credentials.SecretValues`): masked in the sub-agents'
        # conversations as in the session's.
        self.secrets = secrets
        self._lock = threading.Lock()
        self._live: list[Delegation] = []
        self._asks: list[Ask] = []
        self._serving: tuple[trio.lowlevel.TrioToken, trio.MemorySendChannel[Ask]] | None = None
        # Set by a cancel: delegations that start afterwards stop at once. A turn's
        # serving clears it.
        self._cancelled = False
        # Trio tasks waiting until no sub-agent runs (`wait_ended`), and when the wait for
        # stopped sub-agents gives up (set by `stop_all`, cleared by a turn's serving).
        self._idle_waiters: list[tuple[trio.lowlevel.TrioToken, trio.Event]] = []
        self._stop_deadline: float | None = None

    # --- the sub-agent's threads ----------------------------------------------------------

    def begin(self, parent_tool_call_id: str, label: str) -> Delegation:
        d = Delegation(parent_tool_call_id, label)
        with self._lock:
            self._live.append(d)
            if self._cancelled:
                d.stopped.set()
        # In the stream of the session's events, before any of the sub-agent's: until its
        # end, the delegating call's result waits for them (translate/subagents.py).
        self._send(SubagentBegan(parent_tool_call_id))
        return d

    def end(self, d: Delegation) -> None:
        # After every event of the sub-agent, and before the delegating call's result.
        self._send(SubagentEnded(d.parent_tool_call_id))
        with self._lock:
            if d in self._live:
                self._live.remove(d)
            waiters = [] if self._live else self._idle_waiters
            if not self._live:
                self._idle_waiters = []
        d.finished.set()
        for token, idle in waiters:  # wakes the turn; never waits for it
            try:
                token.run_sync_soon(idle.set)
            except trio.RunFinishedError:
                pass

    def post(self, d: Delegation, event: Event) -> None:
        turn_points.reached("subagent", event)
        self._send(SubagentEvent(d.parent_tool_call_id, d.label, event))

    def _send(self, item: SubagentBegan | SubagentEnded | SubagentEvent) -> None:
        if self._post is None:
            return
        try:
            self._post(item)
        except Exception:  # a callback must never fail the sub-agent's step
            log.exception("posting a sub-agent's event failed")

    def ask(self, d: Delegation, actions: list[ActionEvent]) -> tuple[str, str]:
        """Block until the user decided on `actions`: (RUN | REJECT | STOP, reason)."""
        ask = Ask(d, actions)
        with self._lock:
            serving = self._serving
            if d.stopped.is_set() or serving is None:
                return STOP, "No one could be asked to approve it."
            self._asks.append(ask)
        token, send = serving

        def deliver() -> None:  # on the Trio thread: must not raise
            try:
                send.send_nowait(ask)
            except (trio.ClosedResourceError, trio.BrokenResourceError, trio.WouldBlock):
                self._settle(ask, STOP, "The turn is over.")

        try:
            token.run_sync_soon(deliver)
        except trio.RunFinishedError:
            self._settle(ask, STOP, "The session is closed.")
        ask.done.wait()
        with self._lock:
            if ask in self._asks:
                self._asks.remove(ask)
        return ask.answer or STOP, ask.reason

    def _settle(self, ask: Ask, answer: str, reason: str = "") -> None:
        with self._lock:
            if ask.done.is_set():
                return
            ask.answer, ask.reason = answer, reason
            ask.done.set()

    # --- stopping -------------------------------------------------------------------------

    def interrupt(self) -> None:
        """Mark every sub-agent stopped and release its question; never blocks."""
        with self._lock:
            self._cancelled = True
            live, asks = list(self._live), list(self._asks)
        for d in live:
            d.stop()
        for ask in asks:
            self._settle(ask, STOP, "The user cancelled.")

    def stop_all(
        self, stop_processes: Callable[[LocalConversation], object], wait: float = STOP_WAIT
    ) -> None:
        """Stop every live sub-agent and wait (at most `wait` s) for its thread; blocking."""
        self.interrupt()
        with self._lock:
            live = list(self._live)
        for d in live:
            conv = d.conversation
            if conv is None:
                continue
            _interrupt_tools(conv)
            try:
                stop_processes(conv)
            except Exception:
                log.warning("stopping a sub-agent's processes failed", exc_info=True)
            # In a thread of its own (both wait for the SDK's lock). While its tools run,
            # pause(): their processes were just stopped, so they end with their result
            # (what the user should see of a killed command), and the run stops at that
            # event (`SubagentStopped`). Otherwise interrupt(): it cancels the run's task
            # (subagent_run.py), a model call included — mid-tool that would drop the
            # tool's result for "Tool call interrupted before completion".
            with d.lock:
                tools_running = bool(d.running_tools)
            halt = conv.pause if tools_running else conv.interrupt
            threading.Thread(target=_quietly(halt), daemon=True).start()
        deadline = time.monotonic() + wait
        with self._lock:
            self._stop_deadline = deadline
        for d in live:
            if not d.finished.wait(max(0.0, deadline - time.monotonic())):
                log.warning("sub-agent %s did not stop within %.0f s", d.label, wait)

    # --- the turn (Trio) ------------------------------------------------------------------

    async def wait_ended(self, timeout: float = STOP_WAIT) -> bool:
        """Wait until no sub-agent runs, so that everything they posted is in the session's
        stream: at most `timeout` s, and no longer than `stop_all` waited for them. True
        if none runs. Waits on Trio only (woken by `end`, from the sub-agent's thread)."""
        idle = trio.Event()
        with self._lock:
            if not self._live:
                return True
            if self._stop_deadline is not None:
                timeout = min(timeout, self._stop_deadline - time.monotonic())
            entry = (trio.lowlevel.current_trio_token(), idle)
            self._idle_waiters.append(entry)
        with trio.move_on_after(max(0.0, timeout)):
            await idle.wait()
            return True
        with self._lock:
            if entry in self._idle_waiters:
                self._idle_waiters.remove(entry)
        log.warning("a sub-agent was still running when its turn ended")
        return False

    async def serve(
        self,
        decide: Callable[[Ask], Awaitable[tuple[str, str]]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Answer the sub-agents' questions with `decide`, one at a time, until cancelled."""
        send, receive = trio.open_memory_channel[Ask](math.inf)
        with self._lock:
            self._serving = (trio.lowlevel.current_trio_token(), send)
            self._cancelled = False
            self._stop_deadline = None
        task_status.started()
        try:
            async with receive:
                async for ask in receive:
                    if ask.done.is_set():
                        continue
                    try:
                        answer, reason = await decide(ask)
                    except Exception:
                        log.exception("asking about a sub-agent's actions failed")
                        answer, reason = REJECT, "The permission request failed; nothing was run."
                    self._settle(ask, answer, reason)
        finally:
            with self._lock:
                self._serving = None
                asks = list(self._asks)
            send.close()
            for ask in asks:
                self._settle(ask, STOP, "The turn is over.")


def _quietly(fn: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception:
            log.debug("%r failed", fn, exc_info=True)

    return run


def _interrupt_tools(conv: object) -> None:
    for executor in internals.tool_executors(conv):
        interrupt = getattr(executor, "interrupt", None)
        if interrupt is not None:
            _quietly(interrupt)()


def hub_of(conversation: object) -> Hub | None:
    """The sub-agent hub of a session's conversation (`LocalConversation`), if it has one."""
    sdk_conv = getattr(conversation, "sdk_conversation", conversation)
    view = internals.visualizer(sdk_conv)
    hub = getattr(view, "hub", None)
    return hub if isinstance(hub, Hub) else None


def delegating_call_id(conversation: LocalConversation | None, action: Action) -> str:
    """The tool call id of the ActionEvent whose action the executor was handed."""
    # The SDK's events, newest first, read duck-typed: an ActionEvent's action and call id.
    recent: list[SdkObject] = []
    if conversation is not None:
        try:
            events = conversation.state.events
            n = len(events)
            recent = [events[i] for i in range(n - 1, max(-1, n - 1 - _LOOK_BACK), -1)]
        except Exception:
            recent = []
    for match in (lambda e: e.action is action, lambda e: e.action == action):
        for event in recent:
            if getattr(event, "action", None) is not None and match(event):
                return str(event.tool_call_id)
    return f"task-{uuid.uuid4().hex[:12]}"


def subagent_view(post: Post, secrets: SecretValues | None = None) -> SubagentView:
    """The visualizer of a session's SDK conversation (call after the SDK import)."""
    from trio_acp.openhands.sdk.delegation import subagent_view as view

    return view(Hub(post, secrets))


# --- the turn's side ---------------------------------------------------------------------------


@attrs.frozen
class Nesting:
    """Where a sub-agent's action shows: under the delegating call's label, with its `_meta`."""

    label: str
    meta: dict[str, object]  # the tool call's `_meta`


class _Nested:
    """A sub-agent's pending action under the tool call id the client knows it by, with
    the label and `_meta` its tool call has (`confirm.ask` reads `nesting`)."""

    def __init__(self, action: ActionEvent, d: Delegation) -> None:
        self._action = action
        self.tool_call_id = nested_id(d.parent_tool_call_id, str(action.tool_call_id))
        self.nesting = Nesting(
            label=d.label,
            meta={META_KEY: {"parentToolCallId": d.parent_tool_call_id, "subagent": d.label}},
        )

    @property
    def tool_name(self) -> str:
        return self._action.tool_name

    def __getattr__(self, name: str) -> object:  # the rest of the ActionEvent, read duck-typed
        return getattr(self._action, name)


class _Batch:
    """A sub-agent's waiting actions, shaped as `confirm.confirm_pending` asks about a
    conversation's: it lists them and records a rejection."""

    def __init__(self, ask: Ask) -> None:
        self._ask = ask
        self.rejected: str | None = None

    async def pending_actions(self) -> list[_Nested]:
        return [_Nested(a, self._ask.delegation) for a in self._ask.actions]

    async def reject_pending(self, reason: str) -> None:
        self.rejected = reason


async def wait_for_subagents(conversation: object) -> None:
    """Before a turn answers: until its sub-agents are done, so their last events (the
    action a cancel cut short, the command it killed) are shown in the turn (bounded)."""
    hub = hub_of(conversation)
    if hub is not None:
        await hub.wait_ended()


class ConfirmHost(Protocol):
    """What serving sub-agents needs of the turn's host (a `TurnHost`, sessions/turn.py):
    to put a batch of waiting actions to the user as it puts the conversation's."""

    async def confirm_pending(self, conv: PendingBatch, cancel_event: trio.Event) -> str: ...


async def serve_subagents(
    host: ConfirmHost,
    conversation: object,
    cancel_event: trio.Event,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """While a turn runs: put the sub-agents' waiting actions to the user, as the turn puts
    the conversation's (`host.confirm_pending`); returns at once without sub-agents."""
    hub = hub_of(conversation)
    if hub is None:
        task_status.started()
        return

    async def decide(ask: Ask) -> tuple[str, str]:
        batch = _Batch(ask)
        decision = await host.confirm_pending(batch, cancel_event)
        if decision == CANCELLED or cancel_event.is_set():
            return STOP, "The user cancelled before approving this action."
        if batch.rejected is not None:
            return REJECT, batch.rejected
        return RUN, ""

    await hub.serve(decide, task_status=task_status)
