"""JSON-RPC error values.  Pure data: no I/O, no trio."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

__all__ = ["ErrorCode", "PeerClosed", "RequestError"]


class ErrorCode(IntEnum):
    """The error codes ACP v1 uses (JSON-RPC 2.0's standard ones plus ACP's own)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    REQUEST_CANCELLED = -32800
    AUTH_REQUIRED = -32000
    RESOURCE_NOT_FOUND = -32002


class RequestError(Exception):
    """A JSON-RPC error response, in both directions.

    A request handler raises it to answer with an error; `Peer.request` raises it when the
    other side answered with an error.  ``data`` of ``None`` means "no data member".
    """

    code: int
    message: str
    data: Any

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        # Passing all three to Exception keeps the error picklable and copyable.
        super().__init__(code, message, data)
        self.code = int(code)
        self.message = message
        self.data = data

    def __str__(self) -> str:
        text = f"{self.message} ({self.code})"
        if self.data is not None:
            text += f": {self.data!r}"
        return text

    def __repr__(self) -> str:
        return f"RequestError({self.code!r}, {self.message!r}, {self.data!r})"

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` object: ``{"code", "message"[, "data"]}``."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    # -- constructors for the standard codes ------------------------------------------

    @classmethod
    def parse_error(cls, data: Any = None, *, message: str = "Parse error") -> RequestError:
        return cls(ErrorCode.PARSE_ERROR, message, data)

    @classmethod
    def invalid_request(cls, data: Any = None, *, message: str = "Invalid request") -> RequestError:
        return cls(ErrorCode.INVALID_REQUEST, message, data)

    @classmethod
    def method_not_found(cls, method: str) -> RequestError:
        return cls(ErrorCode.METHOD_NOT_FOUND, "Method not found", {"method": method})

    @classmethod
    def invalid_params(cls, data: Any = None) -> RequestError:
        return cls(ErrorCode.INVALID_PARAMS, "Invalid params", data)

    @classmethod
    def internal_error(cls, data: Any = None) -> RequestError:
        return cls(ErrorCode.INTERNAL_ERROR, "Internal error", data)

    @classmethod
    def request_cancelled(cls) -> RequestError:
        return cls(ErrorCode.REQUEST_CANCELLED, "Request cancelled")

    @classmethod
    def auth_required(cls, message: str = "Authentication required") -> RequestError:
        return cls(ErrorCode.AUTH_REQUIRED, message)

    @classmethod
    def resource_not_found(cls, what: str | None = None) -> RequestError:
        # Same data shape as the official SDKs' resourceNotFound(uri).
        return cls(
            ErrorCode.RESOURCE_NOT_FOUND,
            "Resource not found",
            {"uri": what} if what is not None else None,
        )


class PeerClosed(Exception):
    """The connection closed (EOF, a broken pipe or a local close) before a request to
    the other side could complete, or an outbound message could not be queued.

    Not a `RequestError`: nobody answered; the other side is gone.
    """

    def __init__(self, message: str = "the JSON-RPC connection is closed") -> None:
        super().__init__(message)
