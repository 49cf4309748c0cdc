"""Failures as the user reads them: what failed, in one line, and never Trio's wrapping.

A failure inside a nursery reaches its caller wrapped in an `ExceptionGroup`, whose text
("Exceptions from Trio nursery (1 sub-exception)") says nothing; and any exception a
request handler does not turn into a `RequestError` itself is answered by the rpc layer
with a bare `-32603 Internal error`. `sole_error` unwraps the first where a nursery
ends, `describe` words any failure for a message, and `explained` is the OpenHands
agent's last line of defence for the second.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol

from trio_acp.exception_groups import leaves as leaves
from trio_acp.exception_groups import reraise as reraise
from trio_acp.openhands.translate.shapes import JsonValue
from trio_acp.rpc import ErrorCode, RequestError

log = logging.getLogger(__name__)

# Where the full traceback of an unexpected failure goes (see README, TRIO_ACP_LOG_*).
SEE_LOG = "the agent's log (stderr, or TRIO_ACP_LOG_FILE) has the details"


def internal(message: str, data: JsonValue = None) -> RequestError:
    """`-32603` with a message that says what failed (not the bare "Internal error")."""
    return RequestError(ErrorCode.INTERNAL_ERROR, message, data)


def not_configured(message: str) -> RequestError:
    """`-32000`: no usable model until the user configures or authenticates."""
    return RequestError.auth_required(message)


def busy(message: str) -> RequestError:
    """`-32600`: the request cannot be served in the session's current state."""
    return RequestError(ErrorCode.INVALID_REQUEST, message)


def unknown_session(session_id: str | uuid.UUID) -> RequestError:
    """`-32002` for an id that names no session here (malformed ones included)."""
    return RequestError(ErrorCode.RESOURCE_NOT_FOUND, f"unknown session: {str(session_id)!r}")


def closed_session(session_id: uuid.UUID) -> RequestError:
    return RequestError(ErrorCode.RESOURCE_NOT_FOUND, f"session {session_id} is closed")


def sole_error(exc: BaseException) -> BaseException:
    """The one failure inside (nested) single-member exception groups, else `exc` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """One line naming what went wrong: the failures inside any group, not the group."""
    # Cancelled and the like are how a failure's siblings stopped, not what failed.
    failures = [leaf for leaf in leaves(exc) if isinstance(leaf, Exception)] or leaves(exc)
    text = "; ".join(_one(leaf) for leaf in failures[:3])
    if len(failures) > 3:
        text += f"; and {len(failures) - 3} more"
    return text


def _one(exc: BaseException) -> str:
    if isinstance(exc, RequestError):
        return exc.message
    if isinstance(exc, OSError) and exc.strerror:
        # "Permission denied: /path" reads better than "[Errno 13] Permission denied: '/path'".
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    text = " ".join(str(exc).split())
    if len(text) > 500:
        text = text[:499] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Explained(Protocol):
    def __call__[**P, R](
        self, handler: Callable[P, Awaitable[R]], /
    ) -> Callable[P, Awaitable[R]]: ...


def explained(action: str) -> _Explained:
    """Decorate a request handler: an unexpected failure answers `-32603 <action> failed: <what>`.

    A `RequestError` (also alone in a group) goes out as it is; cancellation passes through.
    """

    def wrap[**P, R](handler: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(handler)
        async def explaining(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return await handler(*args, **kwargs)
            except RequestError:
                raise
            except Exception as exc:
                leaf = sole_error(exc)
                if isinstance(leaf, RequestError):
                    raise leaf from None
                log.error("%s failed", action, exc_info=exc)
                raise internal(f"{action} failed: {describe(exc)} ({SEE_LOG})") from None

        return explaining

    return wrap
