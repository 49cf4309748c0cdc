"""`session/set_title` and `session/status` (unstable ACP; schema/unstable.py).

- **set_title**: the client names a session. The title is cleaned as every title we show
  is (`clean_title`: one line, no control characters, at most 80 characters) and the
  answer carries the stored form, which the schema tells clients to display. It replaces
  the one the first prompt gave (or will give: a live session stops titling itself), is
  what `session/list` shows, and a live session tells its client with a
  `session_info_update`, as it does for the title it finds itself.
- **status**: `open` while the session is live in this process, `saved` when only its
  conversation is stored; an id that names neither gets -32002 with the `sessionId` in
  `data`, as the schema asks. No side effect: nothing is opened or attached.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

import trio

from trio_acp import schema
from trio_acp.openhands.sessions.session import Session
from trio_acp.openhands.sessions.store import SessionStore, parse_session_id
from trio_acp.openhands.translate.text import clean_title
from trio_acp.rpc import ErrorCode, RequestError, after_response
from trio_acp.schema import unstable


def not_found(session_id: str) -> RequestError:
    """-32002 naming the session in `data` (`SessionStatusRequest`'s rule)."""
    return RequestError(
        ErrorCode.RESOURCE_NOT_FOUND,
        f"unknown session: {session_id!r}",
        {"sessionId": session_id},
    )


def _find(
    session_id: str, sessions: Mapping[uuid.UUID, Session], store: SessionStore
) -> tuple[uuid.UUID, Session | None]:
    """The session's id and its live session (None: stored only); -32002 otherwise."""
    sid = parse_session_id(session_id)
    if sid is None:
        raise not_found(session_id)
    live = sessions.get(sid)
    if live is None and not store.exists(sid):
        raise not_found(session_id)
    return sid, live


def status(
    params: unstable.SessionStatusRequest,
    sessions: Mapping[uuid.UUID, Session],
    store: SessionStore,
) -> unstable.SessionStatusResponse:
    _, live = _find(params.session_id, sessions, store)
    return unstable.SessionStatusResponse(status="open" if live is not None else "saved")


async def set_title(
    params: unstable.SetSessionTitleRequest,
    sessions: Mapping[uuid.UUID, Session],
    store: SessionStore,
) -> unstable.SetSessionTitleResponse:
    title = clean_title(params.title)
    if title is None:
        raise RequestError.invalid_params("the title is empty once cleaned")
    sid, live = _find(params.session_id, sessions, store)
    if live is not None:
        live.keep_title()  # the first prompt does not rename it any more
    await trio.to_thread.run_sync(store.write_title, sid, title)
    if live is not None:
        # After the response, as every session-level update (agent.py).
        after_response(lambda: live.send_update(schema.SessionInfoUpdate(title=title)))
    return unstable.SetSessionTitleResponse(title=title)
