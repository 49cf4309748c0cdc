"""One ACP session: one OpenHands conversation, living in a nursery of its own.

Threads and who owns what:
- the conversation (`conversation.py`) owns the SDK, its threads and its limiters;
  the session only awaits it;
- SDK callbacks (events, tokens) only `post()` to the session's outbox (`outbox.py`),
  whose pump, in the session's nursery, translates and sends them to the client in order;
- a prompt turn (`turn.py`) runs the conversation and ends with the outbox's end-of-turn
  rule: every update of the turn has been queued on the connection's writer before the
  response (docs/ARCHITECTURE.md#d5-every-update-of-a-turn-before-its-response).
"""

from __future__ import annotations

import functools
import logging
import uuid
from typing import TYPE_CHECKING

import trio

from trio_acp import schema
from trio_acp.connection import ClientProxy
from trio_acp.credentials import UpdateMask
from trio_acp.openhands.backends.conversation import WAITING_FOR_CONFIRMATION, Conversation
from trio_acp.openhands.backends.local_conversation import LocalConversation
from trio_acp.openhands.editor import workspace as editor_workspace
from trio_acp.openhands.editor.session_roots import SessionRoots, roots_prompt
from trio_acp.openhands.editor.workspace import EditorWorkspace
from trio_acp.openhands.errors import (
    SEE_LOG,
    closed_session,
    describe,
    internal,
    leaves,
    sole_error,
)
from trio_acp.openhands.permissions import turn_points
from trio_acp.openhands.permissions.confirm import CANCELLED, PendingBatch, confirm_pending
from trio_acp.openhands.permissions.policy import (
    ALWAYS_APPROVE,
    RuleBook,
)
from trio_acp.openhands.sessions import commands, turn, turn_usage
from trio_acp.openhands.sessions.deferred_build import BuildGate
from trio_acp.openhands.sessions.journal import JOURNAL_FILE, TurnJournal, recover_cut_turn
from trio_acp.openhands.sessions.options import SessionOptions
from trio_acp.openhands.sessions.outbox import Outbox
from trio_acp.openhands.sessions.session_parts import (
    PrepareBuild,
    SessionBuild,
    SessionChoices,
    conversation_opener,
)
from trio_acp.openhands.sessions.store import RULES_FILE, SessionStore, now_iso
from trio_acp.openhands.sessions.stored_load import StoredLoad, replay_history
from trio_acp.openhands.sessions.turn_queue import Ticket, TurnQueue
from trio_acp.openhands.setup.config_options import (
    client_takes_booleans,
)
from trio_acp.openhands.translate import Translator
from trio_acp.openhands.translate.notices import (
    mcp_failure_note,
    mcp_failure_notices,
    retry_note,
    supports_compaction,
)
from trio_acp.openhands.translate.text import title_from_prompt
from trio_acp.rpc import PeerClosed, RequestError
from trio_acp.schema import SessionUpdate

if TYPE_CHECKING:
    from collections.abc import Hashable

    from trio_acp.openhands.sdk.classes import Event

log = logging.getLogger(__name__)

CANCEL_DEADLINE = turn.CANCEL_DEADLINE
# How long closing a session may take (tool executors, terminals).
CLOSE_DEADLINE = 5.0


class Session:
    def __init__(
        self,
        *,
        session_id: uuid.UUID,
        roots: SessionRoots,
        client: ClientProxy,
        build: SessionBuild,
        choices: SessionChoices | None = None,
        store: SessionStore | None = None,
        prepare: PrepareBuild | None = None,
    ) -> None:
        """`session_id`, parsed once where the request came in (agent.py; str() only on the
        wire); `roots`, the session's `cwd` and the client's additionalDirectories
        (session_roots.py); `build` and `choices` (session_parts.py); `store`, where the
        session lives on disk (None: nowhere, as in tests).

        With `prepare`, `build` is a stand-in (no SDK yet) and the session is answered
        before its conversation exists: `serve` starts at once and builds it in the
        background, and what needs the conversation waits for that (`until_open`;
        sessions/deferred_build.py)."""
        choices = choices if choices is not None else SessionChoices()
        self.id = session_id
        self.roots = roots
        self.cwd = roots.cwd
        # The model is told about the extra roots with the first prompt of this opening.
        self._roots_told = not self.roots.additional
        self.sdk = build.sdk
        self._build = build
        self.client = client
        # What the client offers of itself: its buffers (fs/*), its terminals
        # (docs/editor-workspace.md). Without either, the SDK's own tools work on disk.
        self.workspace = EditorWorkspace(client, str(session_id), post_update=self._post_editor)
        # A conversation on an agent-server runs its tools there, not through this editor.
        self._editor_routed = self.workspace.routes_tools and build.in_process
        self.critic = build.critic
        secrets = build.secrets
        self.rules = RuleBook(
            store.dir_for(session_id) / RULES_FILE if store is not None else None,
            mask=secrets.mask,
        )
        self.credential_files = build.credential_files
        self._store = store
        self._titled = False
        # Mode, model, reasoning effort, streaming: offered, switched, saved (options.py).
        self.options = SessionOptions(
            session_id,
            mode=choices.mode,
            model=choices.model,
            models=list(choices.models),
            offers_booleans=client_takes_booleans(client),
            store=store,
            send_update=self.send_update,
            on_mode=lambda mode: self.outbox.actions_run_unasked(mode == ALWAYS_APPROVE),
        )
        self.conversation: Conversation | None = None
        # The conversation being opened: what needs it waits here (deferred_build.py).
        self._prepare = prepare
        self._open = BuildGate()
        self.stored_load: StoredLoad | None = None  # a load's replay first (stored_load.py)
        # A credential split across streamed chunks is in no single frame, where the
        # connection's writer masks whole ones: the outbox holds such a start back.
        self.outbox = Outbox(
            Translator(
                self.cwd,
                compaction=supports_compaction(client),
                terminal_content=self.workspace.terminal_content,
            ),
            UpdateMask(secrets),
            self.send_update,
        )
        # What a turn showed and what was approved, until the SDK has saved it: for a
        # session reopened after this process stopped mid-turn (journal.py, recovery.py).
        # Local conversations only: an agent-server's run outlives us.
        self._journal: TurnJournal | None = None
        if store is not None and build.in_process:
            self._journal = TurnJournal(store.dir_for(session_id) / JOURNAL_FILE, build.secrets)
            self.outbox.journal = self._journal
        # Prompts in the order the client sent them; one turn at a time (turn_queue.py).
        self._queue = TurnQueue()
        self._turns = 0
        self._closed = trio.Event()
        self._stopped = trio.Event()
        # Set once the client has the session id (the response to session/new, load...):
        # nothing about the session may reach it before.
        self._published = trio.Event()
        # Set when the warm-up after session/new is over; what each step did.
        self.warmed = trio.Event()
        self.warm_up_report: dict[str, str] = {}
        # What the client should read at the start of its next turn (`record_turn`).
        self._turn_notes: list[SessionUpdate] = []
        # The session's own nursery, while it serves.
        self._nursery: trio.Nursery | None = None
        # What ended the session, if a failure did (`serve`, the session's error boundary).
        self.failure: str | None = None

    # --- lifetime -------------------------------------------------------------------

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The session's own nursery: lives until `close()`; builds the conversation.

        Once started, it is the session's error boundary (as a server's per-request one):
        a failure inside the session's tasks is logged and ends this session — its turn
        answers with the failure, later requests for it too — and never reaches the
        agent's nursery, where it would take the agent and the other sessions down.
        """
        started = False
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self.outbox.pump)
                await nursery.start(self.workspace.calls.run)
                if self._prepare is None:
                    await self._open_conversation()
                    self._open.opened()
                else:
                    # Answered now; the conversation follows (deferred_build.py).
                    nursery.start_soon(self._open_in_background)
                task_status.started()
                started = True
                await self._closed.wait()
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            if started and all(
                isinstance(leaf, (Exception, trio.Cancelled)) for leaf in leaves(group)
            ):
                self._fail(group)
                return
            # The conversation could not be built (damaged files, ...): that one failure
            # is what the caller reports, not Trio's "Exceptions from Trio nursery".
            error = sole_error(group)
            if not isinstance(error, Exception) or isinstance(error, BaseExceptionGroup):
                raise
            raise error from None
        finally:
            # Nothing waits for a conversation that will never open.
            self._open.closed()
            # Tool threads waiting on the client are released before the SDK is closed.
            self.workspace.calls.close()
            # Shielded: the session's scope is cancelled by now (closing), and the SDK's
            # conversation (its shell, its MCP servers) must still be closed, bounded.
            with trio.move_on_after(CLOSE_DEADLINE, shield=True):
                await self._shutdown_sdk()
            editor_workspace.detach(self.id)
            self._stopped.set()

    async def _open_conversation(self) -> None:
        """Open the conversation (built first, when it was deferred) and apply the
        session's options to it; then the tools warm up."""
        if self._prepare is not None:
            build = await self._prepare()
            self._build, self.sdk, self.critic = build, build.sdk, build.critic
        if self._editor_routed:
            # Before the conversation exists: its tools are built from the registry,
            # which then finds this session's workspace (editor_workspace.py).
            editor_workspace.attach(self.id, self.workspace)
        turn_points.reached("build", "open")
        self.conversation = await conversation_opener(self._build, self.cwd)(
            on_event=self._on_sdk_event,
            on_token=self._on_sdk_token,
            name=f"trio-acp-session-{self.id.hex[:8]}",
        )
        await self._recover()
        options = self.options
        options.conversation = self.conversation
        await options.apply_mode(options.mode)
        llm = self.conversation.llm_options()
        options.reasoning_effort, options.stream = llm.reasoning_effort, llm.stream
        await options.restore()
        assert self._nursery is not None
        self._nursery.start_soon(self._warm_up)

    async def _open_in_background(self) -> None:
        """The deferred build: its failure is this session's answer to whatever needs
        the conversation (the first prompt, a set_config_option, a fork), as the same
        error `session/new` would have given; it never ends the session's nursery."""
        if (load := self.stored_load) is not None:
            await load.replayed.wait()  # the open's parse would take the interpreter from it
        answered = (load and load.answered) or self.options.config_options()
        try:
            await self._open_conversation()
        except Exception as exc:
            error = sole_error(exc)
            if not isinstance(error, RequestError):
                log.error("opening session %s failed", self.id, exc_info=exc)
                error = internal(f"could not start the session: {describe(exc)} ({SEE_LOG})")
                if load is not None:  # the damage, named (build.open_failure)
                    error = await load.explain(exc)
            self._open.failed(error)
            return
        self._open.opened()
        # What only the built model tells (its reasoning effort, whether it streams):
        # the client learns it once it knows the session, never before (D5).
        await self._published.wait()
        if (options := self.options.config_options()) != answered:
            await self.send_update(schema.ConfigOptionUpdate(config_options=options))

    async def until_open(self, cancel: trio.Event | None = None) -> bool:
        """Wait until the conversation is open: True; False if `cancel` was set first.
        Raises the build's failure, or `closed_session` for a session closed meanwhile."""
        if not await self._open.wait(cancel):
            return False
        if self.conversation is None:
            raise closed_session(self.id)
        return True

    async def _recover(self) -> None:
        """Close what a process that stopped mid-turn left of this conversation (journal.py)."""
        conv = self.conversation
        if self._journal is not None and isinstance(conv, LocalConversation):
            await recover_cut_turn(self._journal, conv, self.cwd, self.id)

    def _on_sdk_event(self, event: Event) -> None:
        # The SDK's thread: the workspace learns which tool call an action is (before its
        # tool runs), then the event goes to the client like any other.
        turn_points.reached("event", event)
        self.workspace.note_event(event)
        self.outbox.post_event(event)

    def _on_sdk_token(self, chunk: object) -> None:
        # The SDK's thread, once per streamed chunk.
        turn_points.reached("token", chunk)
        self.outbox.post_token(chunk)

    def _post_editor(self, update: SessionUpdate) -> None:
        # Any thread, never waits (editor_workspace.py): a client terminal embedded in its
        # tool call, or a command's live output, in order with the turn's other updates.
        self.outbox.post_note(update)

    def _fail(self, group: BaseExceptionGroup) -> None:
        self.failure = describe(group)
        log.error("session %s failed; it is closed", self.id, exc_info=group)
        # The running turn and the queued ones end now, answered with the failure.
        self._queue.cancel_all()

    def check_alive(self) -> None:
        """Raise the session's failure, if it failed (see `serve`)."""
        if self.failure is not None:
            raise internal(f"session {self.id} failed: {self.failure} ({SEE_LOG})")

    async def _warm_up(self) -> None:
        """Start the tools while the user types (`Conversation.warm_up`); say which MCP
        servers failed, once the client knows the session."""
        assert self.conversation is not None
        # Not before the response: session/load's replay of a long history is CPU-bound
        # on the Trio thread, and the warm-up's imports and tool start-up would take the
        # GIL from it (bench/README.md, "Big histories").
        await self._published.wait()
        mcp_failures = await self.conversation.warm_up(self.warm_up_report)
        self.warmed.set()
        notices = mcp_failure_notices(self.client, mcp_failures)
        for notice in notices:
            await self.send_update(notice)
        if mcp_failures and not notices:
            # A client without notices reads it in a turn: the one under way, else the next.
            note = mcp_failure_note(mcp_failures)
            if self.outbox.turn_seq is not None:
                self.outbox.post_note(note)
            else:
                self._turn_notes.append(note)

    async def published(self) -> None:
        """The client has been told the session id (run after the response)."""
        self._published.set()

    async def _shutdown_sdk(self) -> None:
        if self.conversation is not None:
            try:
                await self.conversation.close()
            except Exception:
                log.exception("closing the conversation of session %s failed", self.id)
        self.outbox.close()
        if self._journal is not None:
            await self._journal.aclose()

    async def close(self) -> None:
        """Cancel any turn as if by session/cancel, let it answer, then free everything."""
        self.request_cancel()
        # The turn needs the pump and the loop thread to finish properly (its last
        # updates, then its `cancelled` response): only then does the nursery go.
        with trio.move_on_after(CANCEL_DEADLINE):
            await self._queue.wait_idle()
        self._closed.set()
        await self._stopped.wait()

    async def fork_conversation(self, fork_id: uuid.UUID) -> None:
        """session/fork: copy this conversation, history and all, to `fork_id` on disk."""
        await self.until_open()
        assert self.conversation is not None
        await self.conversation.fork(fork_id)

    def keep_title(self) -> None:
        """The session already has its title (a fork's): the first prompt does not rename it."""
        self._titled = True

    async def flush_turn_updates(self) -> None:
        """Wait until everything the SDK posted so far has been sent to the client."""
        await self.outbox.flush()

    def note_retry(self, attempt: int, total: int, error: BaseException | None) -> None:
        """SDK thread: a model call failed and will be retried — say so, it can take a while.

        What the failed call streamed is closed as cut off first: the retried call's
        reply starts over in a message of its own (translate/streams.py).
        """
        self.outbox.post_retry(retry_note(self.client, attempt, total, error))

    async def send_update(self, update: SessionUpdate, *, at_once: bool = False) -> None:
        try:
            await self.client.session_update(
                session_id=str(self.id), update=update, at_once=at_once
            )
        except PeerClosed:
            pass  # the client is gone; keep draining so flushes still complete
        except Exception:
            log.exception("sending a session/update failed")

    @property
    def model(self) -> str:
        """The id of the session's current model (`options`)."""
        return self.options.model

    @property
    def mode(self) -> str:
        """The session's approval mode (`options`)."""
        return self.options.mode

    # --- turns ----------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A turn runs or a prompt is queued."""
        return self._queue.busy

    @property
    def queued(self) -> int:
        """Prompts waiting behind the running turn."""
        return self._queue.waiting

    async def replay_history(self) -> None:
        """session/load: the whole conversation as updates, user messages included: the
        history the load read, else the open conversation's (stored_load.py)."""
        await replay_history(self)
        self._titled = True  # a loaded session keeps the title it had

    def record_turn(self, blocks: list[schema.ContentBlock], seq: int) -> None:
        """Keep `session/list` current; the first prompt also names the session. (And
        the notes kept for the next turn go out first.)"""
        for note in self._turn_notes:
            self.outbox.post_note(note, seq)
        self._turn_notes.clear()
        if self._store is None:
            return
        title = None
        if not self._titled:
            text = next((b.text for b in blocks if isinstance(b, schema.TextContent)), "")
            title = title_from_prompt(text)
            self._titled = True
        try:
            self._store.write_index(self.id, cwd=self.cwd, title=title, roots=self.roots)
        except OSError:
            log.warning("could not update the session index of %s", self.id, exc_info=True)
            return
        if title:
            update = schema.SessionInfoUpdate(title=title, updated_at=now_iso())
            self.outbox.post_note(update, seq)

    def prompt_received(self, key: Hashable) -> None:
        """The connection's reader read a prompt for this session (wire order, synchronous)."""
        self._queue.received(key)

    def forget_prompt(self, key: Hashable) -> None:
        """A prompt registered by `prompt_received` failed before reaching `prompt`."""
        self._queue.forget(key)

    def request_cancel(self) -> None:
        """session/cancel: every prompt received before it ends `cancelled`, the running
        turn and the queued ones alike. Prompts received later run. A no-op while idle."""
        self._queue.cancel_all()

    async def prompt(
        self,
        blocks: list[schema.ContentBlock],
        *,
        key: Hashable | None = None,
        message_id: str | None = None,
    ) -> schema.PromptResponse:
        """Queue the prompt behind the turns received before it, then run it.

        `key` is the request id the reader registered it under (`prompt_received`). The
        turn's one cancel is its ticket's event: session/cancel sets it, and so does this
        request's own cancel (`turn.with_one_cancel`). `message_id`: `turn.play_prompt`.
        """
        ticket = self._queue.claim(key)
        try:
            return await turn.with_one_cancel(
                functools.partial(self._queue.cancel, ticket),
                functools.partial(self._serve_prompt, ticket, blocks, message_id),
            )
        finally:
            # Last, and synchronous: the next turn starts only once this response is
            # about to be queued, so none of its updates can precede it on the wire.
            self._queue.release(ticket)

    async def _serve_prompt(
        self, ticket: Ticket, blocks: list[schema.ContentBlock], message_id: str | None
    ) -> schema.PromptResponse:
        may_run = await self._queue.wait_turn(ticket)
        self.check_alive()
        if not may_run:
            return schema.PromptResponse(stop_reason="cancelled")
        # A session answered before its conversation was built: the first prompt waits
        # for it, a cancel still answers at once (deferred_build.py).
        if not await self.until_open(ticket.cancelled):
            return schema.PromptResponse(stop_reason="cancelled")
        if self._closed.is_set():
            raise closed_session(self.id)
        self._turns += 1
        command = commands.parse(blocks)  # once: the turn takes it as parsed here
        if not self._roots_told and command is None:
            blocks = [*blocks, schema.TextContent(text=roots_prompt(self.roots) or "")]
            self._roots_told = True
        start = turn_usage.totals(self.conversation)
        try:
            response = await self._play_with_editor(blocks, command, ticket.cancelled, message_id)
        finally:
            self.check_alive()  # the session failed during the turn: that is the answer
        return turn_usage.with_usage(response, start, self.conversation)

    async def _play_with_editor(
        self,
        blocks: list[schema.ContentBlock],
        command: tuple[str, str] | None,
        cancel_event: trio.Event,
        message_id: str | None,
    ) -> schema.PromptResponse:
        """The turn, with the tool threads' waits on the client tied to its cancel.

        On cancel (session/cancel, `$/cancel_request`, closing) every pending client call
        fails at once — so the SDK's interrupt is never held up by a client that does not
        answer — and the response waits (within the cleanup budget) until the cancelled
        requests' cleanup (`terminal/kill` + `terminal/release`) is sent.
        """
        calls = self.workspace.calls
        calls.begin_turn()
        # The watcher lives in the session's nursery: it only waits for the turn's event.
        watch = trio.CancelScope()

        async def fail_waits_on_cancel() -> None:
            with watch:
                await cancel_event.wait()
                calls.cancel_turn()

        if self._nursery is not None:
            self._nursery.start_soon(fail_waits_on_cancel)
        over = False
        try:
            response = await turn.play_prompt(
                self, blocks, cancel_event, self._turns, command=command, message_id=message_id
            )
            over = response.stop_reason != "cancelled"
        finally:
            watch.cancel()
            if not over:
                await calls.cancel_turn_and_wait()  # shielded, bounded
        return response

    async def execute_command(self, name: str, arg: str) -> str:
        return await commands.execute(self, name, arg)

    async def confirm_pending(self, conv: PendingBatch, cancel_event: trio.Event) -> str:
        decision = await confirm_pending(self, conv, cancel_event)
        own = self.conversation
        if (
            decision != CANCELLED
            and self._journal is not None
            # The session's own actions; a sub-agent's batch (subagents.py) runs inside
            # its delegating call, which the journal already covers.
            and own is not None
            and conv is own
            and own.status() == WAITING_FOR_CONFIRMATION  # not rejected: they run next
        ):
            # On disk before they can run: a session reopened after this process stopped
            # tells "approved, may have run" from "never approved" (recovery.py).
            pending = await own.pending_actions()
            await self._journal.approved([str(a.tool_call_id) for a in pending])
        return decision

    async def note_cut_short(self, since: int, *, cancelled: bool) -> None:
        """The turn that began at event `since` was cancelled, or failed: record it in the
        conversation, keeping what it streamed that no event holds (journal.py): the SDK
        saves no event for a reply cut short, and a reload would lose what the user read."""
        conv = self.conversation
        shown = self._journal.current() if self._journal is not None else None
        try:
            if isinstance(conv, LocalConversation):
                if cancelled:
                    await conv.note_interruption(shown, since)
                elif shown:
                    await conv.keep_shown(shown, since)
            elif conv is not None and cancelled:
                await conv.note_interruption()
        except Exception:
            log.warning("could not record the interruption of a turn", exc_info=True)

    def post_usage(self, seq: int) -> None:
        assert self.conversation is not None
        usage = self.conversation.usage()
        if usage is None or usage.context_window <= 0:
            return
        cost = usage.cost
        update = schema.UsageUpdate(
            used=usage.last_used,
            size=usage.context_window,
            cost=schema.Cost(amount=cost, currency="USD") if cost else None,
        )
        self.outbox.post_note(update, seq)
