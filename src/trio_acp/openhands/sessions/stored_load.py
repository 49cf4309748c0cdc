"""`session/load` of a conversation in this process: answered from its stored events, its
SDK conversation opened after the answer (docs/ARCHITECTURE.md, "session/load").

Opening a stored conversation, the SDK reads and validates every event; for a long
history that was over half of a load, before the replay could start (bench/README.md,
"Big histories"). A load now builds its session as a deferred one (deferred_build.py:
`Session.until_open`, which a prompt, a mode or option change, a fork waits for), reads
the events itself (`sdk/stored_events.py`: views of their JSON, no validation), replays
them, answers, and only then opens the SDK's conversation (`StoredLoad.replayed`), whose
parse no longer delays the answer nor competes with the replay for the interpreter.

The history is read this way only when the replay needs nothing the open would add
first: no turn cut by a stopped process to close (its journal is empty and every action
of the last turn has its result: recovery.py), no critic (its verdicts replay with the
critic the open sets up), and files the reader takes (else the SDK's open reports the
damage, as before). Otherwise the replay waits for the open and replays the SDK's events,
as before. The answer's modes and options are the saved ones (`answer`); should the open
settle on others (a saved model no longer configured), a `config_option_update` follows,
as for a deferred new session. Should the SDK's open fail after all (a file damaged in a
way only its validation sees), the session answers its first prompt with the error the
load would have given (`StoredLoad.explain`).
"""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import attrs
import orjson
import trio

from trio_acp import schema
from trio_acp.openhands.permissions import turn_points
from trio_acp.openhands.permissions.policy import MODE_IDS
from trio_acp.openhands.sdk import REASONING_EFFORTS
from trio_acp.openhands.sessions.damage import BASE_STATE, base_damage
from trio_acp.openhands.sessions.journal import JOURNAL_FILE, TurnJournal
from trio_acp.openhands.sessions.recovery import turn_tail
from trio_acp.openhands.sessions.small_files import read_bytes
from trio_acp.openhands.sessions.store import SessionStore
from trio_acp.openhands.translate.shapes import SdkObject
from trio_acp.rpc import RequestError, after_response

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.loaded import Sdk
    from trio_acp.openhands.sessions.session import Session

log = logging.getLogger(__name__)

__all__ = ["StoredLoad", "answer", "read_history", "replay_history"]


@attrs.define
class StoredLoad:
    """A load's part of its session: the history read for its replay, until taken; what
    makes the SDK's open wait; what to tell when that open fails."""

    # The events to replay (views), None once taken or when not read.
    history: list[SdkObject] | None
    # The load's own error for a failed open (the damage, named: build.open_failure).
    explain: Callable[[Exception], Awaitable[RequestError]]
    # Set once the replay is over (or was never to come): the SDK's open starts then.
    replayed: trio.Event = attrs.Factory(trio.Event)
    # The session's saved option values (store.py), and what the load answered with them.
    saved: dict[str, str | bool] = attrs.Factory(dict)
    answered: list[schema.SessionConfigOption] | None = None

    async def release(self) -> None:
        self.replayed.set()

    def take(self) -> list[SdkObject] | None:
        history, self.history = self.history, None
        return history


async def read_history(sdk: Sdk, store: SessionStore, sid: uuid.UUID) -> list[SdkObject] | None:
    """The conversation's events for its replay, or None: replay the SDK's events once
    it is open (a turn to recover first, files the reader does not take)."""
    directory = store.dir_for(sid)

    def read() -> list[SdkObject] | None:
        from trio_acp.openhands.sdk.stored_events import StoredEventsError, read_events

        if TurnJournal(directory / JOURNAL_FILE).read():
            return None  # the journal's text is shown after recovery
        if base_damage(directory, check_state=sdk.ConversationState.model_validate):
            return None  # the SDK's open names it
        leaf = None
        try:
            base = orjson.loads(read_bytes(directory / BASE_STATE))
        except FileNotFoundError:
            base = {}  # opened from its events with default settings, as the SDK does
        except (OSError, orjson.JSONDecodeError):
            return None
        if base:
            # The SDK's open refuses a base state of another conversation (one copied).
            if not isinstance(base, dict) or _uuid(base.get("id")) != sid:
                return None
            leaf = base.get("leaf_event_id")
            if leaf is not None and not isinstance(leaf, str):
                return None
        try:
            events = read_events(directory, leaf)
        except StoredEventsError as exc:
            log.info("session %s: replaying after the SDK's open (%s)", sid, exc)
            return None
        # Views pass the SDK's isinstance checks (stored_events.StoredEvent.__class__).
        if sdk.ConversationState.get_unmatched_actions(turn_tail(events)):  # type: ignore[arg-type]
            return None  # recovery closes them first (recovery.py)
        return events

    turn_points.reached("load", "read")
    return await trio.to_thread.run_sync(read)


def _uuid(value: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if isinstance(value, str) else None
    except ValueError:
        return None


def answer(session: Session) -> tuple[schema.SessionModeState, list[schema.SessionConfigOption]]:
    """The modes and options a load answers with. Before its conversation is open: the
    saved values, where they are still ones the session offers (`SessionOptions.restore`
    applies them once it is open), remembered to tell what the open changes."""
    options, load = session.options, session.stored_load
    if load is None or session.conversation is not None:
        return options.mode_state(), options.config_options()
    view = copy.copy(options)
    saved = load.saved
    mode = saved.get("mode")
    if isinstance(mode, str) and mode in MODE_IDS:
        view.mode = mode
    model = saved.get("model")
    if isinstance(model, str) and any(c.id == model for c in view.models):
        view.model = model
    effort = saved.get("thought_level")
    if isinstance(effort, str) and effort in REASONING_EFFORTS:
        view.reasoning_effort = effort
    stream = saved.get("stream")
    if isinstance(stream, bool):
        view.stream = stream
    load.answered = view.config_options()
    return view.mode_state(), load.answered


async def replay_history(session: Session) -> None:
    """The session's history as updates: the one its load read, else (none read, or not
    a load) the open conversation's, once it is open."""
    load = session.stored_load
    history = load.take() if load is not None else None
    try:
        if history is None:
            if load is not None:
                load.replayed.set()  # nothing read: the open goes first
            await session.until_open()
            assert session.conversation is not None
            history = await session.conversation.history()
        await session.outbox.replay(history, session.critic)
    except BaseException:
        if load is not None:
            load.replayed.set()
        raise
    if load is not None:
        # The open starts once the load's answer is out (its thread would share the
        # interpreter with the replay's last updates and the answer).
        after_response(load.release)
