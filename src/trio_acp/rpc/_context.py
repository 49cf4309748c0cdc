"""Which inbound request the current task serves (set by the Trio driver, `_peer.py`).

Kept apart from the driver so the typed layer above (`trio_acp.connection._dispatch`, a
pure module) can read it without importing Trio.
"""

from __future__ import annotations

from contextvars import ContextVar

from ._messages import RequestId

#: Inside a task handling an inbound request: that request's id (``None`` elsewhere).
current_request_id: ContextVar[RequestId | None] = ContextVar(
    "trio_acp.rpc.current_request_id", default=None
)
