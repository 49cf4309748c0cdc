"""A session's outbox: bridge items → translation → coalescing → the client, in order.

What the SDK's threads post (`bridge_items.py`) is tagged with the turn it belongs to.
The pump is the only sender of a turn's updates, and it closes turns: a turn's response
is sent only after `end_turn` returns, by which time every update of the turn has been
queued on the connection's writer (docs/ARCHITECTURE.md, "the end-of-turn rule"); from
then on whatever a finished turn's stragglers still post (a tool thread outliving an
interrupt, a late token) is dropped.
"""

from __future__ import annotations

import collections
import functools
import logging
from typing import TYPE_CHECKING, Protocol

import trio

from trio_acp.credentials import UpdateMask
from trio_acp.openhands.sessions.bridge import Flush, ThreadBridge
from trio_acp.openhands.sessions.bridge_items import (
    BridgeItem,
    EndTurn,
    ModelRetry,
    SdkEvent,
    SessionNote,
    TokenChunk,
)
from trio_acp.openhands.sessions.journal import TurnJournal
from trio_acp.openhands.sessions.token_backlog import BACKLOG, merge_text
from trio_acp.openhands.setup.critic_review import replay_verdict
from trio_acp.openhands.translate import Translator, coalesce
from trio_acp.openhands.translate.fields import field
from trio_acp.openhands.translate.replay import replay_windows
from trio_acp.schema import SessionUpdate

if TYPE_CHECKING:
    from collections.abc import Callable

    from trio_acp.openhands.sdk.classes import Event
    from trio_acp.openhands.setup.user_setup import CriticSettings

log = logging.getLogger(__name__)


class SendUpdate(Protocol):
    """Sends one `session/update` to the client; `at_once`: the last the sender has for
    now (`trio_acp.rpc.Peer.notify`)."""

    async def __call__(self, update: SessionUpdate, *, at_once: bool = False) -> None: ...


class Outbox:
    def __init__(
        self,
        translator: Translator,
        update_mask: UpdateMask,
        send_update: SendUpdate,
        bridge: ThreadBridge[BridgeItem] | None = None,
    ) -> None:
        self._translator = translator
        self._update_mask = update_mask
        self._send_update = send_update
        self.bridge: ThreadBridge[BridgeItem] = bridge if bridge is not None else ThreadBridge()
        # Which turn SDK callbacks belong to (None between turns), and the last turn the
        # pump has closed: anything tagged with a closed turn is dropped.
        self.turn_seq: int | None = None
        self.ended_turn = 0
        # The model's finish_reason in the turn's stream (see `finish_reason`).
        self.finish_reason: str | None = None
        # Where the text a turn shows is kept until the SDK has saved it (journal.py).
        self.journal: TurnJournal | None = None

    # --- producers (any thread; never wait) -------------------------------------------

    def post_event(self, event: Event) -> None:
        self.bridge.post(SdkEvent(event, self.turn_seq))

    def post_token(self, chunk: object) -> None:
        # Merged into the text before it while the client does not read (token_backlog.py).
        self.bridge.post(TokenChunk(chunk, self.turn_seq), merge_text, merge_after=BACKLOG)

    def post_note(self, update: SessionUpdate, seq: int | None = None) -> None:
        """An update of the session's own, sent in order with the turn `seq` (default: the current one)."""
        self.bridge.post(SessionNote(update, self.turn_seq if seq is None else seq))

    def post_retry(self, note: SessionUpdate) -> None:
        """A model call failed and is retried (the SDK's thread, after the call's last
        token): what it streamed is closed as cut off, then `note` says why and when."""
        self.bridge.post(ModelRetry(note, self.turn_seq))

    # --- turns ------------------------------------------------------------------------

    def begin_turn(self, seq: int) -> None:
        self.turn_seq = seq
        self.finish_reason = None

    async def end_turn(self, seq: int, fail_open: str | None, *, within: float) -> None:
        """Every update of turn `seq` is sent (unfinished tool calls closed as failed with
        `fail_open`, if given), waiting at most `within` s for that; nothing of it can
        follow. Shielded: a turn cut by its last-resort deadline still ends here."""
        try:
            with trio.move_on_after(within, shield=True):
                await self.bridge.flush(EndTurn(seq, fail_open))
        finally:
            # Closed here too in case the flush timed out (a client that stopped reading):
            # whatever of this turn the pump still holds is then dropped, not sent late.
            self.close_turn(seq)

    def close_turn(self, seq: int) -> None:
        self.ended_turn = max(self.ended_turn, seq)
        self.turn_seq = None

    async def flush(self) -> None:
        """Wait until everything posted so far has been sent to the client."""
        await self.bridge.flush()

    def actions_run_unasked(self, unasked: bool) -> None:
        """The approval mode changed: new tool calls are shown running, or pending."""
        self._translator.action_status = "in_progress" if unasked else "pending"

    def end_compaction(self, status: str, reason: str) -> list[SessionUpdate]:
        return self._translator.end_compaction(status, reason)

    async def replay(self, events: list[Event], critic: CriticSettings | None = None) -> None:
        """session/load: the whole conversation as updates, sent as they become final
        (translate/replay.py: the updates and the order of translating it all first); with
        `critic` (its settings), the critic's verdicts after the answers they judged."""
        after = None
        if critic is not None:
            after = functools.partial(replay_verdict, settings=critic)
        parts = replay_windows(self._translator, events, after=after)
        while True:
            try:
                updates = next(parts, None)
            except Exception:
                # A replay bug must cost the rest of the history, never the session.
                log.exception("replaying the history failed")
                return
            if updates is None:
                return
            for update in updates:
                await self._send_update(update)

    # --- the pump ---------------------------------------------------------------------

    async def pump(self) -> None:
        """Translate and send what is posted, in order; the only sender of turn updates.

        It also closes turns (an `EndTurn` flush marker): from then on it drops whatever a
        finished turn's stragglers still post. A turn can also be closed from outside
        (`close_turn`, when its flush timed out): updates of a closed turn are dropped
        right up to the moment they would be sent.
        """
        items: collections.deque[BridgeItem | Flush] = collections.deque()
        try:
            while True:
                # A deque: a batch can hold thousands of chunks, and list.pop(0) is linear.
                items = collections.deque(await self.bridge.receive_batch())
                pending: list[SessionUpdate] = []
                pending_seq = 0
                while items:
                    item = items.popleft()
                    if isinstance(item, Flush):
                        end = item.payload
                        if isinstance(end, EndTurn) and end.fail_open is not None:
                            pending.extend(
                                _guard(self._translator.fail_open_tool_calls, end.fail_open)
                            )
                            pending_seq = pending_seq or end.seq
                        # Nothing more can come before the client acts or the turn ends: text
                        # held back as a possible credential goes now, as part of this turn.
                        seq_now = pending_seq or getattr(end, "seq", 0)
                        await self._send(pending, seq_now, release=True)
                        pending, pending_seq = [], 0
                        if isinstance(end, EndTurn):
                            self.ended_turn = max(self.ended_turn, end.seq)
                            if self.journal is not None:
                                # The run is over: its events are saved (journal.py).
                                self.journal.clear()
                        item.done.set()
                        continue
                    seq = item.seq
                    if seq is None or seq <= self.ended_turn:
                        log.debug("dropping %s posted outside its turn", type(item).__name__)
                        continue
                    pending_seq = seq
                    match item:
                        case SessionNote(update=update):  # already an ACP update
                            pending.append(update)
                        case ModelRetry(note=note):
                            pending.extend(_guard(self._cut_attempt, None))
                            pending.append(note)
                        case TokenChunk(chunk=chunk):
                            self._note_finish_reason(chunk)
                            pending.extend(_guard(self._translator.token, chunk))
                        case SdkEvent(event=event):
                            pending.extend(_guard(self._translator.event, event))
                await self._send(pending, pending_seq)
        finally:
            # A cancelled pump must not leave anyone waiting on a flush it held.
            for item in items:
                if isinstance(item, Flush):
                    item.done.set()

    def _cut_attempt(self, _: None) -> list[SessionUpdate]:
        self.finish_reason = None  # the failed attempt's, if it got that far
        return self._translator.attempt_failed()

    def _note_finish_reason(self, chunk: object) -> None:
        # The SDK drops the model's finish_reason; the stream still carries it, and it is
        # how `max_tokens` and `refusal` stop reasons are told apart from `end_turn`.
        for choice in field(chunk, "choices") or ():
            reason = field(choice, "finish_reason")
            if reason:
                self.finish_reason = reason

    async def _send(self, updates: list[SessionUpdate], seq: int, *, release: bool = False) -> None:
        try:
            merged = coalesce(updates)
        except Exception:
            log.exception("coalescing updates failed; sending them as they are")
            merged = updates
        merged = self._update_mask.apply(merged, release=release)
        if self.journal is not None and seq and seq > self.ended_turn:
            # Before it is sent: what the user may have read is on disk if we stop now.
            self.journal.shown(merged)
        last = len(merged) - 1
        for i, update in enumerate(merged):
            if seq and seq <= self.ended_turn:
                return  # the turn was closed while we waited to send: never after its response
            if i < last:
                await self._send_update(update)
                continue
            # The batch's last update: the pump waits for the next batch after it, so the
            # connection may write it at once rather than wake its writer for it (with
            # the SDK's thread busy in litellm, every scheduler pass is a GIL hand-off).
            await self._send_update(update, at_once=True)

    def close(self) -> None:
        self.bridge.close()


def _guard[T](fn: Callable[[T], list[SessionUpdate]], arg: T) -> list[SessionUpdate]:
    # A translation bug must cost one update, never the session (or the agent: an
    # exception here would leave the session's nursery and take the others down).
    try:
        return fn(arg)
    except Exception:
        log.exception("translating %r failed", type(arg).__name__)
        return []
