"""`session/archive` and `session/unarchive` (unstable ACP; schema/unstable.py).

An archived session keeps its id and its whole conversation on disk; only our index says
it is archived (`"archived": true` in `trio_acp_session.json`, store.py), so the mark
survives a restart and an OpenHands CLI still sees the conversation. `session/list` leaves
archived sessions out unless its `archived` filter asks for them (`include`, `only`); a
value we do not know is refused with -32602, as the schema asks, not read as `exclude`.

- **archive**: a live session is closed first, exactly as `session/close` closes it (its
  running turn cancelled, its conversation and tools freed), then marked. Archiving an
  archived session succeeds; an id that names no session gets -32002.
- **unarchive**: the mark goes; nothing is loaded or resumed. Unarchiving a session that
  is not archived succeeds.

Neither touches `updatedAt`: archiving is not activity of the session's, and an
unarchived session goes back to its place in the list.

`SessionInfo.archived` is an unknown field to a tool holding answers to the stable schema
(as `PromptResponse.usage` is, sessions/turn_usage.py), so a list reports it to a client
that opted into the unstable schema (a `plan` or `subagents` capability) or that sent
the `archived` filter itself (`reports_archived`). The schema asks an agent advertising
the capability to report it on every listed session; a client that never says it knows of
archiving lists only sessions that are not archived, so it loses nothing by the omission.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping

import trio

from trio_acp import schema
from trio_acp.openhands.sessions.session import Session
from trio_acp.openhands.sessions.session_meta import not_found
from trio_acp.openhands.sessions.store import ARCHIVE_FILTERS, SessionStore, parse_session_id
from trio_acp.rpc import RequestError
from trio_acp.schema import unstable

__all__ = ["archive", "archive_filter", "reports_archived", "unarchive"]


def archive_filter(params: schema.ListSessionsRequest) -> str:
    """The list's archive filter (omitted or null: `exclude`); -32602 for an unknown one."""
    value = getattr(params, "archived", None)
    if value is None:
        return "exclude"
    if value not in ARCHIVE_FILTERS:
        raise RequestError.invalid_params(
            f"unsupported archived filter {value!r} (supported: {', '.join(ARCHIVE_FILTERS)})"
        )
    return str(value)


def reports_archived(params: schema.ListSessionsRequest, caps: object) -> bool:
    """Whether a list's entries carry `archived` (see the module's docstring)."""
    return (
        getattr(params, "archived", None) is not None
        or getattr(caps, "plan", None) is not None
        or getattr(caps, "subagents", None) is not None
    )


def _stored_id(
    session_id: str, sessions: Mapping[uuid.UUID, Session], store: SessionStore
) -> uuid.UUID:
    sid = parse_session_id(session_id)
    if sid is None or (sid not in sessions and not store.exists(sid)):
        raise not_found(session_id)
    return sid


async def archive(
    params: unstable.ArchiveSessionRequest,
    sessions: Mapping[uuid.UUID, Session],
    store: SessionStore,
    close: Callable[[uuid.UUID], Awaitable[None]],
) -> unstable.ArchiveSessionResponse:
    """`close(sid)` closes the live session as `session/close` does (the agent's, under its
    lock for that session); it is called only when the session is live."""
    sid = _stored_id(params.session_id, sessions, store)
    if sid in sessions:
        await close(sid)
    await trio.to_thread.run_sync(store.write_archived, sid, True)
    return unstable.ArchiveSessionResponse()


async def unarchive(
    params: unstable.UnarchiveSessionRequest,
    sessions: Mapping[uuid.UUID, Session],
    store: SessionStore,
) -> unstable.UnarchiveSessionResponse:
    sid = _stored_id(params.session_id, sessions, store)
    await trio.to_thread.run_sync(store.write_archived, sid, False)
    return unstable.UnarchiveSessionResponse()
