"""JSON-RPC 2.0 for ACP, the h11 way: a sans-io core and one Trio driver.

Works on plain JSON values and knows no ACP method.  The sans-io core (`LineBuffer`,
`parse_message`, the ``encode_*`` functions) does no I/O and imports no trio; `open_peer`
drives it over any `trio.abc.Stream` (stdio, a socket, an in-memory pair)::

    async with open_peer(stream, handler) as peer:
        await peer.wait_closed()

See `trio_acp.rpc._peer` for the task layout, ordering, cancellation and shutdown rules.
"""

from ._direct import direct_sender
from ._errors import ErrorCode, PeerClosed, RequestError
from ._framing import DEFAULT_MAX_FRAME_SIZE, FrameTooLarge, LineBuffer
from ._messages import (
    ErrorResponse,
    InvalidMessage,
    Message,
    Notification,
    Request,
    RequestId,
    Result,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
    parse_message,
)
from ._peer import (
    CANCEL_REQUEST_METHOD,
    FrameMask,
    Handler,
    Peer,
    RequestReceived,
    after_response,
    current_request_id,
    open_peer,
)

__all__ = [
    "CANCEL_REQUEST_METHOD",
    "DEFAULT_MAX_FRAME_SIZE",
    "ErrorCode",
    "ErrorResponse",
    "FrameMask",
    "FrameTooLarge",
    "Handler",
    "after_response",
    "InvalidMessage",
    "LineBuffer",
    "Message",
    "Notification",
    "Peer",
    "PeerClosed",
    "Request",
    "RequestError",
    "RequestId",
    "RequestReceived",
    "Result",
    "current_request_id",
    "direct_sender",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "open_peer",
    "parse_message",
]
