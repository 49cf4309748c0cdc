"""A conversation on an OpenHands agent-server, driven from Trio (docs/agent-server.md).

The engine is the SDK's own: `RemoteWorkspace` (HTTP, `X-Session-API-Key`) and
`RemoteConversation` (REST for commands, a WebSocket for the event stream, with its own
reconnect-and-replay). This module adds what a Trio session needs on top:

- **Events without blocking.** The SDK calls our callback on its WebSocket thread; the
  callback only hands the event on (`on_event` / `on_token`, which must not block: the
  session's `ThreadBridge.post`). The server streams token deltas over the socket
  (`StreamingDeltaEvent`, when the agent's LLM has `stream=True`); they are handed on as the
  same `ModelResponseStream` chunks a local conversation's token callback gets.
- **Exactly once.** Every event is handed on at most once (by id), across the SDK's own
  replay after a socket reconnect and ours after re-attaching; an event the server recorded
  while we were away is handed on when we re-attach.
- **A run that ends.** `run()` triggers the server's run and waits, in Trio, for the server's
  post-run state snapshot on the socket, with a REST poll as fallback and health check. A
  server that refuses connections for `unreachable_grace` seconds, or gives no sign of life
  for the target's `stall_timeout`, ends the turn with `RemoteError` naming it instead of
  the SDK's one-hour poll; the next call re-attaches.
- **Cancel reaches the server.** `interrupt()` asks the server to interrupt the run and
  stops what its terminal started: the server only sends SIGINT to the terminal's process
  group, and an interactive shell runs each command in a group of its own (as locally,
  tool_processes.py). Our terminal carries a marker variable (`remote_terminal.py`); a
  command run through the server's bash API stops what carries it, but the shell.

The session API key is given to the SDK and nowhere else: not logged, not in `repr`, not in
an error message (`RemoteError` texts are scrubbed of it), not written to a file.
"""

from __future__ import annotations

import functools
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

import trio

from trio_acp.openhands.backends.agent_server_api import (
    REQUEST_TIMEOUT,
    ConversationInfo,
    RemoteError,
    _describe,
    _is_transport_error,
    _redactor,
    _scrub,
    delete_conversation,
    get_conversation,
    list_conversations,
)
from trio_acp.openhands.backends.agent_server_config import AgentServerTarget
from trio_acp.openhands.backends.remote_inbox import Inbox
from trio_acp.openhands.backends.remote_lost_run import settle_lost_run
from trio_acp.openhands.backends.remote_terminal import (
    MARKER_VAR,
    stop_marked_command,
    tag_terminal,
    terminal_marker,
)
from trio_acp.openhands.translate.interruptions import CANCEL_NOTE

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import (
        ActionEvent,
        AgentBase,
        ConfirmationPolicyBase,
        Event,
        HookConfig,
        Message,
        ObservedConversation,
        RemoteConversation,
        RemoteWorkspace,
        SecurityAnalyzerBase,
    )
    from trio_acp.openhands.sdk.loaded import Sdk

__all__ = [
    "INTERRUPTION_NOTE",
    "MARKER_VAR",
    "RemoteConversationDriver",
    "RemoteError",
    "delete_conversation",
    "get_conversation",
    "list_conversations",
]

log = logging.getLogger(__name__)

T = TypeVar("T")


# How often the run's REST health check polls the server while a run is under way.
POLL_INTERVAL = 1.0
# A REST status that says the run is over is believed after this many polls in a row
# without the socket's post-run snapshot (the socket may have dropped it).
TERMINAL_POLLS = 3
# How long a server may stop answering during a run before the turn ends with an error.
UNREACHABLE_GRACE = 5.0
# How long closing a conversation (its socket, its HTTP client) may take before we let it
# finish on its own: milliseconds with a server that answers.
CLOSE_TIMEOUT = 1.0
# Budget for asking the server to interrupt a run (the server itself waits up to 5 s for
# the run task to end before it answers).
INTERRUPT_TIMEOUT = 10.0
# A cancelled turn leaves the server's conversation with the user's message and no answer,
# and the SDK merges consecutive user messages: the model would take the cancelled request
# and the next one for one message and answer both. Locally the session appends an
# assistant note (sdk.interruption_event); the server accepts only user messages, so the
# note opens the next one instead.
# (session/load shows it as what it is, never as the user's words: translate/interruptions.py)
INTERRUPTION_NOTE = CANCEL_NOTE


class RemoteConversationDriver:
    """One conversation on an agent-server.

    Blocking SDK calls run in worker threads; nothing here blocks the Trio thread. Create
    with `open()` (a new conversation, or an existing one by id).
    """

    def __init__(
        self,
        sdk: Sdk,
        target: AgentServerTarget,
        *,
        working_dir: str,
        on_event: Callable[[Event], None],
        on_token: Callable[[object], None],
        unreachable_grace: float = UNREACHABLE_GRACE,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        self.sdk = sdk
        self.target = target
        if target.api_key:
            _redactor.keys.add(target.api_key)
        self.working_dir = working_dir
        self.unreachable_grace = unreachable_grace
        self.poll_interval = poll_interval
        self._inbox = Inbox(trio.lowlevel.current_trio_token(), on_event, on_token)
        self._limiter = trio.CapacityLimiter(1)
        # Cancelling must not queue behind a slow call on the main limiter.
        self._interrupt_limiter = trio.CapacityLimiter(1)
        self.conversation: RemoteConversation | None = None
        self.workspace: RemoteWorkspace | None = None
        self.id: uuid.UUID | None = None
        self.marker: str | None = None
        self._stale = False
        self._tools_stopped = False
        # The last run was cut short: the next message opens with this note
        # (INTERRUPTION_NOTE after a cancel, LOST_NOTE after the server was lost).
        self._note: str | None = None
        # The last run stopped for approval: the next run approves what it holds.
        self._awaiting_approval = False
        # A run lost with the server: (whether it ran approved actions, when it began).
        self._lost_run: tuple[bool, float] | None = None
        self.round_trip: float | None = None
        self.hook_config: HookConfig | None = None
        # Set by the health check when the server stopped answering during a run.
        self._unreachable_message = f"lost the agent-server at {target.url} during the turn"

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        sdk: Sdk,
        target: AgentServerTarget,
        agent: AgentBase,
        *,
        working_dir: str,
        on_event: Callable[[Event], None],
        on_token: Callable[[object], None],
        conversation_id: uuid.UUID | None = None,
        create: bool = True,
        confirmation_policy: ConfirmationPolicyBase | None = None,
        security_analyzer: SecurityAnalyzerBase | None = None,
        max_iterations: int = 500,
        hook_config: HookConfig | None = None,
        **kwargs: float,
    ) -> RemoteConversationDriver:
        """A new conversation with `agent`, or the server's conversation `conversation_id`.

        With `create=False` the conversation must exist (session/load, resume): it keeps the
        agent it was started with on the server. With `create=True` and an id, the
        conversation is created under that id (session/new chooses the id).

        `hook_config` (the user's OpenHands hooks) goes with the creation request: the
        server runs the hooks, on its machine. An existing conversation keeps the hooks it
        was created with.
        """
        self = cls(
            sdk, target, working_dir=working_dir, on_event=on_event, on_token=on_token, **kwargs
        )
        if conversation_id is not None and not create:
            await self._require_exists(conversation_id)
        marker = terminal_marker(agent) or secrets.token_hex(8)
        agent = agent if terminal_marker(agent) else tag_terminal(agent, marker)
        self.hook_config = hook_config
        await self._call(lambda: self._connect(agent, conversation_id, max_iterations))
        if conversation_id is not None and not create:
            # The server goes on with the agent the conversation was created with, and its
            # terminal's processes carry the marker of that creation; `conversation.agent`
            # is only the spec we passed. Without a marker (a conversation not started by
            # trio-acp) a cancel interrupts the run but cannot stop its command.
            self.marker = await self._call(lambda: terminal_marker(self.live()[0].state.agent))
        else:
            self.marker = marker
        if confirmation_policy is not None:
            await self.set_confirmation(confirmation_policy, security_analyzer)
        return self

    def _connect(
        self, agent: AgentBase, conversation_id: uuid.UUID | None, max_iterations: int
    ) -> None:
        from trio_acp.openhands.sdk.remote_client import connect

        conversation, workspace = connect(
            url=self.target.url,
            api_key=self.target.api_key,
            working_dir=self.working_dir,
            agent=agent,
            conversation_id=conversation_id,
            callback=self._inbox,
            max_iterations=max_iterations,
            hook_config=self.hook_config,
        )
        # History is history: only what the server records from now on is handed on, plus
        # (on re-attach) what it recorded while we were not listening.
        for event in conversation.state.events:
            if event.id not in self._inbox.seen:
                if self.conversation is None:
                    self._inbox.seen.add(event.id)
                else:
                    self._inbox.deliver(event)
        self.conversation, self.workspace, self.id = conversation, workspace, conversation.id

    def live(self) -> tuple[RemoteConversation, RemoteWorkspace]:
        """The SDK's conversation and workspace from `open` on; a `RemoteError` after `close`."""
        if self.conversation is None or self.workspace is None:
            raise RemoteError(f"agent-server {self.target.url}: the conversation is closed")
        return self.conversation, self.workspace

    async def _require_exists(self, conversation_id: uuid.UUID) -> None:
        info = await self.get_info(conversation_id)
        if info is None:
            raise RemoteError(
                f"conversation {conversation_id} does not exist on the agent-server at {self.target.url}"
            )

    async def _reattach(self) -> None:
        """After the server or the socket went away: a fresh connection, missed events once."""
        old, workspace = self.live()  # `_connect` set `self.id` to `old.id`
        await self._require_exists(old.id)
        await self._call(lambda: self._close_sync(old, workspace))
        # `self.conversation` stays set: `_connect` then hands on the events we missed.
        await self._call(lambda: self._connect(old.agent, old.id, old.max_iteration_per_run))
        self._stale = False

    async def _ready(self) -> RemoteConversation:
        if self._stale:
            await self._reattach()
        return self.live()[0]

    # -- calls -----------------------------------------------------------------------------

    async def _call(self, fn: Callable[[], T], *, limiter: trio.CapacityLimiter | None = None) -> T:
        """`fn()` in a worker thread; failures become one `RemoteError` without the key."""
        try:
            return await trio.to_thread.run_sync(
                fn, limiter=limiter or self._limiter, abandon_on_cancel=True
            )
        except RemoteError:
            raise
        except Exception as exc:
            if _is_transport_error(exc):
                # The connection is gone: the next call re-attaches rather than wait for the
                # SDK's socket to come back on its own back-off (up to 30 s).
                self._stale = self.conversation is not None
            raise RemoteError(
                _scrub(f"agent-server {self.target.url}: {_describe(exc)}", self.target.api_key),
                unreachable=_is_transport_error(exc),
            ) from None

    async def call(self, fn: Callable[[], T]) -> T:
        """A blocking call on the SDK's conversation, as the driver makes its own (`_call`)."""
        await self._ready()
        return await self._call(fn)

    def mark_interrupted(self) -> None:
        """The last message was cut short: the next one opens with `INTERRUPTION_NOTE`."""
        self._note = INTERRUPTION_NOTE

    async def send_message(self, message: Message, sender: str | None = None) -> None:
        conv = await self._ready()
        if self._lost_run is not None:
            await self._settle_lost_run(conv)
        if self._note is not None:
            message = message.model_copy(
                update={"content": [self.sdk.TextContent(text=self._note), *message.content]}
            )
        observed = cast("ObservedConversation", conv)
        args = (message,) if sender is None else (message, sender)  # the server drops it
        await self._call(lambda: observed.send_message(*args))
        self._note = None

    async def _settle_lost_run(self, conv: RemoteConversation) -> None:
        """Before the first message after a run lost with the server (remote_lost_run.py)."""
        approving, began = self._lost_run or (False, 0.0)
        note = await settle_lost_run(self, conv, approving=approving, began=began)
        if note is not None:
            self._note = self._note or note
        self._lost_run = None

    async def set_confirmation(
        self, policy: ConfirmationPolicyBase, analyzer: SecurityAnalyzerBase | None = None
    ) -> None:
        conv = await self._ready()

        def apply() -> None:
            conv.set_confirmation_policy(policy)
            conv.set_security_analyzer(analyzer)

        await self._call(apply)

    async def events(self) -> list[Event]:
        conv = await self._ready()
        return await self._call(lambda: list(conv.state.events))

    async def pending_actions(self) -> list[ActionEvent]:
        """Actions the server holds for approval (an approval is another `run()`)."""
        events = await self.events()
        return self.sdk.ConversationState.get_unmatched_actions(events)

    async def reject_pending_actions(self, reason: str) -> None:
        conv = await self._ready()
        await self._call(lambda: conv.reject_pending_actions(reason))
        self._awaiting_approval = False

    @property
    def execution_status(self) -> str | None:
        """The last status the server reported (a string: "idle", "running", "finished", ...)."""
        return self._inbox.status

    # -- running ---------------------------------------------------------------------------

    async def run(self, cancel_event: trio.Event | None = None) -> str:
        """Run until the server's run is over; returns its final execution status.

        "waiting_for_confirmation" means actions wait for `run()` again (approve) or
        `reject_pending_actions`. With `cancel_event` set, the server's run is interrupted
        and "cancelled" returned. If this task is cancelled, the server's run is interrupted
        too before the cancellation goes on. Raises `RemoteError` when the server fails or
        stops answering.
        """
        conv = await self._ready()
        # A run after one that stopped for approval runs the actions it holds (the SDK's
        # implicit approval): if the server is lost during it, they may be cut short.
        approving, began = self._awaiting_approval, time.monotonic()
        self._awaiting_approval = False
        inbox = self._inbox
        inbox.over, inbox.over_status, inbox.running, inbox.armed = trio.Event(), None, False, True
        inbox.quiet = False
        self._tools_stopped = False
        try:
            try:
                await self._call(lambda: cast("ObservedConversation", conv).run(blocking=False))
            except RemoteError as exc:
                if not exc.unreachable:
                    raise
                # The server went away while starting the run: it may well have started
                # it (under load its answer comes after the run's first command), so this
                # is the server lost during the turn, as the health check reports it.
                self._stale = True
                self._lost_run = (approving, began)
                detail = str(exc).removeprefix(f"agent-server {self.target.url}: ")
                raise RemoteError(self._lost(detail), unreachable=True) from None
            async with trio.open_nursery() as nursery:
                if cancel_event is not None:
                    nursery.start_soon(self._interrupt_when, cancel_event)
                nursery.start_soon(self._watch, conv)
                await inbox.over.wait()
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            if isinstance(exc, RemoteError):
                raise
            # Cancelled from outside (connection closing, $/cancel_request): the server's
            # run must stop before we let go of it.
            with trio.move_on_after(INTERRUPT_TIMEOUT, shield=True):
                await self.interrupt()
            raise
        finally:
            inbox.armed = False
        if cancel_event is not None and cancel_event.is_set():
            self._note = INTERRUPTION_NOTE if self._inbox.status != "finished" else None
            return "cancelled"
        status = inbox.over_status or "finished"
        if status == "unreachable":
            self._stale = True
            self._lost_run = (approving, began)
            raise RemoteError(self._unreachable_message, unreachable=True)
        if status == "gone":
            raise RemoteError(
                f"conversation {self.id} no longer exists on the agent-server at {self.target.url}"
            )
        self._awaiting_approval = status == "waiting_for_confirmation"
        return status

    async def _interrupt_when(self, cancel_event: trio.Event) -> None:
        await cancel_event.wait()
        # Shielded: the run may report itself over (the interrupt's own state update) while
        # the terminal's processes are still being stopped; that must finish first.
        with trio.move_on_after(INTERRUPT_TIMEOUT, shield=True):
            try:
                await self.interrupt()
            except RemoteError as exc:
                # The user asked to stop: the turn ends cancelled either way.
                log.warning("interrupting the remote run failed: %s", exc)
        self._inbox.finish("paused")

    def _lost(self, detail: str) -> str:
        return _scrub(
            f"lost the agent-server at {self.target.url} during the turn ({detail}); the turn "
            "was ended. The conversation stays on the server; the next prompt reconnects to it.",
            self.target.api_key,
        )

    async def _watch(self, conv: RemoteConversation) -> None:
        """REST fallback and health check while the socket carries the run."""
        import httpx

        terminal_polls = 0
        rest_saw_running = False
        path = f"/api/conversations/{conv.id}"
        stall = self.target.stall_timeout
        # Lost: refused (gone: down, restarted, unreachable) for `unreachable_grace`
        # seconds in a row; or silent (stalled, SIGSTOPped, a dead link) for the target's
        # `stall_timeout` since its last sign of life, an answer here or a message on its
        # socket. A poll waits for its answer only until that bound, so the error comes
        # within it, not a request timeout or two later.
        heard = time.monotonic()
        down_since: float | None = None
        while True:
            await trio.sleep(self.poll_interval)
            heard = max(heard, self._inbox.heard)
            wait = max(0.5, min(REQUEST_TIMEOUT, stall - (time.monotonic() - heard)))
            try:
                response = await trio.to_thread.run_sync(
                    functools.partial(self.live()[1].client.get, path, timeout=wait),
                    abandon_on_cancel=True,
                )
            except httpx.HTTPError as exc:
                now = time.monotonic()
                heard = max(heard, self._inbox.heard)
                if isinstance(exc, httpx.TimeoutException):
                    down_since = None
                    if now - heard < stall:
                        continue
                    detail = f"it did not answer for {stall:g} s: {_describe(exc)}"
                else:
                    down_since = down_since or now
                    if now - down_since < self.unreachable_grace:
                        continue
                    detail = f"{_describe(exc)} for {now - down_since:.0f} s"
                self._unreachable_message = self._lost(detail)
                self._inbox.finish("unreachable")
                return
            heard, down_since = time.monotonic(), None
            if response.status_code == 404:
                self._inbox.finish("gone")
                return
            if response.status_code != 200:
                continue
            status = response.json().get("execution_status")
            if status == "running":
                self._inbox.running = rest_saw_running = True
                terminal_polls = 0
            elif (
                status == "waiting_for_confirmation"
                and not rest_saw_running
                and self._inbox.status == "running"
            ):
                # Stale: the server's conversation info is its saved `base_state.json`, and
                # the SDK saves it only when a step lets go of the state's lock. The step that
                # runs an approved action keeps the status it started with until the action
                # is done (minutes, for a long command), while the socket already said
                # "running". A real new wait for confirmation comes after a step, so the
                # watch would have seen "running" first, or the socket says so itself.
                terminal_polls = 0
            elif self._inbox.running or status in ("error", "stuck", "waiting_for_confirmation"):
                terminal_polls += 1
                if terminal_polls >= TERMINAL_POLLS or status in ("error", "stuck"):
                    # The socket did not bring the post-run snapshot (dropped, reconnecting):
                    # take the server's word, and hand on what the socket missed.
                    try:
                        await self._catch_up(conv)
                    except RemoteError as exc:
                        log.warning("catching up with the agent-server's events failed: %s", exc)
                    self._inbox.finish(status)
                    return

    async def catch_up(self) -> None:
        """Hand on what the server recorded and the socket did not bring (once, by id)."""
        await self._catch_up(await self._ready())

    async def _catch_up(self, conv: RemoteConversation) -> None:
        def sync() -> None:
            conv.state.events.reconcile()
            for event in conv.state.events:
                self._inbox.deliver(event)

        await self._call(sync)

    async def interrupt(self) -> None:
        """Stop the server's run now (LLM stream or tool), and the terminal's command.

        Both at once: the server answers the interrupt once its run has ended (≤ 5 s),
        which can wait on that very command. The command is stopped only while a terminal
        call is under way (a cancel mid-stream need not wait for one more request); one
        announced before the interrupt is answered counts (it may reach us late).
        """
        conv = self.conversation
        if conv is None:
            return
        failed: RemoteError | None = None
        async with trio.open_nursery() as nursery:
            watch = trio.CancelScope()
            if self.marker and not self._tools_stopped:
                nursery.start_soon(self._stop_command, watch)
            try:
                await self._call(conv.interrupt, limiter=self._interrupt_limiter)
            except RemoteError as exc:  # raised once the stop is over too, not as a group
                failed = exc
            watch.cancel()
        if failed is not None:
            raise failed

    async def _stop_command(self, watch: trio.CancelScope) -> None:
        # Once a terminal call is announced (or was, as the interrupt was answered): stop
        # what the terminal runs, on the server, via its bash API.
        with watch:
            await self._inbox.wait_terminal_call()
        if (watch.cancelled_caught and not self._inbox.terminal_calls) or self._tools_stopped:
            return
        self._tools_stopped = True
        command = stop_marked_command(cast("str", self.marker))
        try:
            workspace = self.live()[1]
            stop = functools.partial(workspace.execute_command, command, timeout=10.0)
            result = await self._call(stop, limiter=trio.CapacityLimiter(1))
        except RemoteError:
            log.warning("could not stop the terminal's processes on the server", exc_info=True)
            return
        stopped = (result.stdout or "").strip()
        log.info("terminal processes stopped on the agent-server: %s", stopped or "none")

    async def measure_round_trip(self) -> float:
        """Seconds for one small authenticated request to the server and back."""
        path = f"/api/conversations/{self.id}"
        start = time.perf_counter()
        await self._call(
            lambda: self.live()[1].client.get(path, timeout=REQUEST_TIMEOUT).raise_for_status()
        )
        self.round_trip = time.perf_counter() - start
        return self.round_trip

    # -- catalogue -------------------------------------------------------------------------

    async def get_info(self, conversation_id: uuid.UUID) -> ConversationInfo | None:
        return await get_conversation(self.target, conversation_id)

    async def close(self) -> None:
        """Stop listening; the conversation stays on the server.

        Bounded (`CLOSE_TIMEOUT`): a server that stopped answering must not hold up a
        session's close or the process's exit; the socket's thread then ends on its own.
        """
        conv, self.conversation = self.conversation, None
        workspace, self.workspace = self.workspace, None
        with trio.move_on_after(CLOSE_TIMEOUT, shield=True):
            await trio.to_thread.run_sync(
                lambda: self._close_sync(conv, workspace), abandon_on_cancel=True
            )

    @staticmethod
    def _close_sync(
        conv: RemoteConversation | None, workspace: RemoteWorkspace | None = None
    ) -> None:
        if conv is not None:
            try:
                conv.close()
            except Exception:
                log.debug("closing the remote conversation failed", exc_info=True)
        if workspace is not None:
            try:
                workspace.client.close()
            except Exception:
                pass
