"""JSON-RPC 2.0 messages, sans-io: classify one decoded line, encode outgoing frames.

Knows the envelope only (``jsonrpc``/``id``/``method``/``params``/``result``/``error``),
never any method: params and results are plain JSON values.

Encoding uses orjson: UTF-8 output (non-ASCII is not escaped) and never a raw newline
inside a frame, since JSON strings escape control characters.  Frames end with ``\\n``.
"""

from __future__ import annotations

import json
from typing import Any, TypeGuard

import attrs
import orjson

from ._errors import ErrorCode, RequestError

__all__ = [
    "ErrorResponse",
    "InvalidMessage",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Result",
    "dumps",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "is_request_id",
    "parse_message",
]

type RequestId = int | str


@attrs.frozen
class Request:
    id: RequestId
    method: str
    params: Any = None  # dict, list, or None when absent


@attrs.frozen
class Notification:
    method: str
    params: Any = None


@attrs.frozen
class Result:
    id: RequestId
    result: Any


@attrs.frozen
class ErrorResponse:
    id: RequestId | None  # None: the other side could not tell which request failed
    error: RequestError = attrs.field(eq=False)


@attrs.frozen
class InvalidMessage:
    """A line that is not a valid JSON-RPC message.  Answer ``error`` with ``id``
    (``None`` when no usable id could be read from the line)."""

    id: RequestId | None
    error: RequestError = attrs.field(eq=False)


type Message = Request | Notification | Result | ErrorResponse | InvalidMessage

_MISSING: Any = object()


def is_request_id(value: object) -> TypeGuard[RequestId]:
    """A valid id is an int (not a bool) or a str.  Floats, null and objects are not."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _exact_id(line: bytes, value: Any) -> Any:
    """orjson decodes integers beyond 64 bits as floats.  An id must be echoed exactly,
    so re-read a float id with the stdlib decoder, which keeps big ints exact.  (Big
    integers inside params/results stay floats: an orjson limit, documented.)"""

    def reject(constant: str) -> Any:
        raise ValueError(constant)

    try:
        exact = json.loads(line, parse_constant=reject)
    except (ValueError, RecursionError):
        return value
    if isinstance(exact, dict) and type(exact.get("id")) is int:
        return exact["id"]
    return value


def _invalid(id: RequestId | None, why: str) -> InvalidMessage:
    return InvalidMessage(id, RequestError.invalid_request(message=f"Invalid request: {why}"))


def parse_message(line: bytes) -> Message:
    """Classify one line.  Never raises: anything unusable becomes `InvalidMessage`."""
    try:
        msg = orjson.loads(line)
    except orjson.JSONDecodeError:
        return InvalidMessage(None, RequestError.parse_error())
    if type(msg) is not dict:
        if type(msg) is list:
            # ACP does not use batches; answer the whole array once, like the TS SDK.
            return _invalid(None, "batches are not supported")
        return _invalid(None, "not a JSON object")

    raw_id = msg.get("id", _MISSING)
    if type(raw_id) is float:
        raw_id = _exact_id(line, raw_id)
    echo_id: RequestId | None = raw_id if is_request_id(raw_id) else None

    if msg.get("jsonrpc") != "2.0":
        return _invalid(echo_id, '"jsonrpc" must be "2.0"')

    method = msg.get("method", _MISSING)
    if method is not _MISSING:
        if type(method) is not str:
            return _invalid(echo_id, '"method" must be a string')
        params = msg.get("params")
        # An absent or null "params" both mean "no params" (lenient on null, which some
        # peers send); anything else must be structured, as JSON-RPC 2.0 requires.
        if params is not None and type(params) is not dict and type(params) is not list:
            return _invalid(echo_id, '"params" must be an object or an array')
        if raw_id is _MISSING:
            return Notification(method, params)
        if echo_id is None:
            return _invalid(None, '"id" must be an integer or a string')
        return Request(echo_id, method, params)

    has_result = "result" in msg
    has_error = "error" in msg
    if has_result and has_error:
        return _invalid(echo_id, 'a response has "result" or "error", not both')
    if not has_result and not has_error:
        return _invalid(echo_id, 'no "method", "result" or "error"')
    if raw_id is _MISSING or (raw_id is not None and echo_id is None):
        return _invalid(None, '"id" must be an integer or a string')
    if has_result:
        if echo_id is None:
            return _invalid(None, 'a result needs a non-null "id"')
        return Result(echo_id, msg["result"])
    return ErrorResponse(echo_id, _error_from_wire(msg["error"]))


def _error_from_wire(error: Any) -> RequestError:
    if (
        isinstance(error, dict)
        and type(error.get("code")) is int
        and isinstance(error.get("message"), str)
    ):
        return RequestError(error["code"], error["message"], error.get("data"))
    # Be lenient: a caller waiting on this response must still be woken with an error.
    return RequestError(ErrorCode.INTERNAL_ERROR, "Malformed error response", error)


# -- encoding ---------------------------------------------------------------------------


def dumps(obj: Any) -> bytes:
    """Serialize one message as a frame (UTF-8 JSON + ``\\n``).

    Raises TypeError (or ValueError) if ``obj`` is not JSON-serializable.
    """
    try:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError as exc:
        # orjson refuses integers beyond 64 bits (e.g. an echoed big request id); the
        # stdlib encoder handles those.  Anything it also rejects is the caller's error.
        try:
            text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            return text.encode("utf-8") + b"\n"
        except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
            raise exc from None


def _check_params(params: Any) -> None:
    if params is not None and not isinstance(params, (dict, list, tuple)):
        raise TypeError(
            f"JSON-RPC params must be an object or an array, not {type(params).__name__}"
        )


def encode_request(id: RequestId, method: str, params: Any = None) -> bytes:
    """Raises TypeError for params that are not None, a dict, a list or a tuple, or
    that do not serialize."""
    _check_params(params)
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return dumps(msg)


def encode_notification(method: str, params: Any = None) -> bytes:
    _check_params(params)
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return dumps(msg)


def encode_result(id: RequestId, result: Any) -> bytes:
    return dumps({"jsonrpc": "2.0", "id": id, "result": result})


def encode_error(id: RequestId | None, error: RequestError) -> bytes:
    """Encode an error response.  If ``error.data`` will not serialize, it is dropped
    rather than losing the response."""
    try:
        return dumps({"jsonrpc": "2.0", "id": id, "error": error.to_dict()})
    except (TypeError, ValueError):
        return dumps(
            {"jsonrpc": "2.0", "id": id, "error": {"code": error.code, "message": error.message}}
        )
