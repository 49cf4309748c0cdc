"""The sans-io message layer: classify a line, encode frames, error values."""

from __future__ import annotations

import pickle
from typing import Any

import orjson
import pytest

from trio_acp.rpc import (
    ErrorCode,
    ErrorResponse,
    InvalidMessage,
    Notification,
    PeerClosed,
    Request,
    RequestError,
    Result,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
    parse_message,
)


def parse(obj: Any) -> Any:
    return parse_message(orjson.dumps(obj))


def test_request() -> None:
    assert parse({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"a": 1}}) == Request(
        1, "m", {"a": 1}
    )
    assert parse({"jsonrpc": "2.0", "id": "x", "method": "m", "params": [1]}) == Request(
        "x", "m", [1]
    )
    assert parse({"jsonrpc": "2.0", "id": 0, "method": "m"}) == Request(0, "m", None)


def test_notification() -> None:
    assert parse({"jsonrpc": "2.0", "method": "n", "params": {}}) == Notification("n", {})
    assert parse({"jsonrpc": "2.0", "method": "n"}) == Notification("n", None)


def test_params_null_means_no_params() -> None:
    # Lenient: some peers send "params": null.
    assert parse({"jsonrpc": "2.0", "id": 1, "method": "m", "params": None}) == Request(1, "m")


def test_result_null_is_a_result() -> None:
    msg = parse({"jsonrpc": "2.0", "id": 7, "result": None})
    assert msg == Result(7, None)


def test_error_response() -> None:
    msg = parse(
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "nope", "data": [1]}}
    )
    assert isinstance(msg, ErrorResponse)
    assert msg.id == 3
    assert (msg.error.code, msg.error.message, msg.error.data) == (-32601, "nope", [1])


def test_error_response_with_null_id() -> None:
    msg = parse({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    assert isinstance(msg, ErrorResponse) and msg.id is None


def test_malformed_error_object_still_completes_as_an_error() -> None:
    msg = parse({"jsonrpc": "2.0", "id": 3, "error": "bad"})
    assert isinstance(msg, ErrorResponse)
    assert msg.error.code == ErrorCode.INTERNAL_ERROR
    assert msg.error.data == "bad"


@pytest.mark.parametrize(
    "id",
    [
        0,
        -1,
        2**63 - 1,
        2**64,  # beyond 64 bits: orjson would make it a float
        -(2**70),
        10**40,
        "",
        "1",
        "é☃😀 日本",
        "with\nnewline",
    ],
)
def test_ids_echoed_exactly(id: Any) -> None:
    line = (
        '{"jsonrpc":"2.0","id":%s,"method":"m"}'
        % (str(id) if isinstance(id, int) else orjson.dumps(id).decode())
    ).encode()
    msg = parse_message(line)
    assert isinstance(msg, Request)
    assert msg.id == id and type(msg.id) is type(id)
    frame = encode_result(msg.id, None)
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    import json

    assert json.loads(frame)["id"] == id


INVALID: list[tuple[str, bytes, int, Any]] = [
    ("not json", b"{nope", ErrorCode.PARSE_ERROR, None),
    ("truncated", b'{"jsonrpc":"2.0","id":1,"method":"m"', ErrorCode.PARSE_ERROR, None),
    ("invalid utf-8", b'{"jsonrpc":"2.0","id":1,"method":"\xff"}', ErrorCode.PARSE_ERROR, None),
    (
        "lone surrogate",
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"m"}',
        ErrorCode.PARSE_ERROR,
        None,
    ),
    ("NaN", b'{"jsonrpc":"2.0","id":1,"method":"m","params":[NaN]}', ErrorCode.PARSE_ERROR, None),
    ("batch", b'[{"jsonrpc":"2.0","id":1,"method":"m"}]', ErrorCode.INVALID_REQUEST, None),
    ("empty batch", b"[]", ErrorCode.INVALID_REQUEST, None),
    ("number", b"5", ErrorCode.INVALID_REQUEST, None),
    ("string", b'"hi"', ErrorCode.INVALID_REQUEST, None),
    ("null", b"null", ErrorCode.INVALID_REQUEST, None),
    ("no jsonrpc", b'{"id":1,"method":"m"}', ErrorCode.INVALID_REQUEST, 1),
    ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":"a","method":"m"}', ErrorCode.INVALID_REQUEST, "a"),
    ("jsonrpc number", b'{"jsonrpc":2.0,"id":1,"method":"m"}', ErrorCode.INVALID_REQUEST, 1),
    ("method number", b'{"jsonrpc":"2.0","id":1,"method":5}', ErrorCode.INVALID_REQUEST, 1),
    ("method null", b'{"jsonrpc":"2.0","id":1,"method":null}', ErrorCode.INVALID_REQUEST, 1),
    ("id bool", b'{"jsonrpc":"2.0","id":true,"method":"m"}', ErrorCode.INVALID_REQUEST, None),
    ("id float", b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', ErrorCode.INVALID_REQUEST, None),
    ("id 1.0", b'{"jsonrpc":"2.0","id":1.0,"method":"m"}', ErrorCode.INVALID_REQUEST, None),
    ("id object", b'{"jsonrpc":"2.0","id":{},"method":"m"}', ErrorCode.INVALID_REQUEST, None),
    ("id array", b'{"jsonrpc":"2.0","id":[1],"method":"m"}', ErrorCode.INVALID_REQUEST, None),
    (
        "id null request",
        b'{"jsonrpc":"2.0","id":null,"method":"m"}',
        ErrorCode.INVALID_REQUEST,
        None,
    ),
    (
        "params string",
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}',
        ErrorCode.INVALID_REQUEST,
        1,
    ),
    (
        "params number",
        b'{"jsonrpc":"2.0","id":2,"method":"m","params":3}',
        ErrorCode.INVALID_REQUEST,
        2,
    ),
    (
        "notif params",
        b'{"jsonrpc":"2.0","method":"m","params":true}',
        ErrorCode.INVALID_REQUEST,
        None,
    ),
    (
        "result and error",
        b'{"jsonrpc":"2.0","id":4,"result":1,"error":{"code":1,"message":"x"}}',
        ErrorCode.INVALID_REQUEST,
        4,
    ),
    ("neither", b'{"jsonrpc":"2.0","id":5}', ErrorCode.INVALID_REQUEST, 5),
    ("empty object", b"{}", ErrorCode.INVALID_REQUEST, None),
    ("result without id", b'{"jsonrpc":"2.0","result":1}', ErrorCode.INVALID_REQUEST, None),
    ("result null id", b'{"jsonrpc":"2.0","id":null,"result":1}', ErrorCode.INVALID_REQUEST, None),
    ("result bool id", b'{"jsonrpc":"2.0","id":false,"result":1}', ErrorCode.INVALID_REQUEST, None),
    ("deep nesting", b"[" * 5000 + b"]" * 5000, ErrorCode.PARSE_ERROR, None),
]


@pytest.mark.parametrize(("name", "line", "code", "id"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid(name: str, line: bytes, code: int, id: Any) -> None:
    msg = parse_message(line)
    assert isinstance(msg, InvalidMessage), msg
    assert msg.error.code == code
    assert msg.id == id and type(msg.id) is type(id)
    frame = encode_error(msg.id, msg.error)
    decoded = orjson.loads(frame)
    assert decoded["id"] == id
    assert decoded["error"]["code"] == code
    assert "\n" not in decoded["error"]["message"]


def test_encode_request_and_notification() -> None:
    assert orjson.loads(encode_request(1, "m", {"a": 1})) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "m",
        "params": {"a": 1},
    }
    assert orjson.loads(encode_request(2, "m")) == {"jsonrpc": "2.0", "id": 2, "method": "m"}
    assert orjson.loads(encode_notification("n")) == {"jsonrpc": "2.0", "method": "n"}
    assert orjson.loads(encode_notification("n", [1])) == {
        "jsonrpc": "2.0",
        "method": "n",
        "params": [1],
    }


def test_encode_result_null_kept() -> None:
    assert orjson.loads(encode_result(1, None)) == {"jsonrpc": "2.0", "id": 1, "result": None}


def test_frames_are_single_utf8_lines() -> None:
    frame = encode_result("é", {"text": "line1\nline2\r\u2028 é 😀"})
    assert frame.endswith(b"\n")
    assert b"\n" not in frame[:-1] and b"\r" not in frame
    assert "é 😀".encode() in frame  # UTF-8, not \\u escapes
    assert orjson.loads(frame)["result"]["text"] == "line1\nline2\r\u2028 é 😀"


def test_unserializable_raises_type_error() -> None:
    with pytest.raises(TypeError):
        encode_request(1, "m", {"x": object()})
    with pytest.raises(TypeError):
        encode_result(1, {"s": "\ud800"})


def test_error_with_unserializable_data_still_encodes() -> None:
    frame = encode_error(1, RequestError(-1, "m", data=object()))
    assert orjson.loads(frame) == {"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "m"}}


def test_request_error_constructors() -> None:
    cases = {
        RequestError.parse_error(): -32700,
        RequestError.invalid_request(): -32600,
        RequestError.method_not_found("x"): -32601,
        RequestError.invalid_params({"f": 1}): -32602,
        RequestError.internal_error(): -32603,
        RequestError.request_cancelled(): -32800,
        RequestError.auth_required(): -32000,
        RequestError.resource_not_found("file:///x"): -32002,
    }
    for err, code in cases.items():
        assert err.code == code
        assert err.message and "\n" not in err.message
        assert err.to_dict()["code"] == code
    assert RequestError.method_not_found("x").to_dict() == {
        "code": -32601,
        "message": "Method not found",
        "data": {"method": "x"},
    }
    assert RequestError.internal_error().to_dict() == {"code": -32603, "message": "Internal error"}
    assert RequestError.auth_required(message="log in").message == "log in"
    assert RequestError.resource_not_found().data is None
    assert ErrorCode.REQUEST_CANCELLED == -32800
    assert not issubclass(PeerClosed, RequestError)


def test_request_error_pickles_and_prints() -> None:
    err = RequestError(-32602, "Invalid params", {"field": "x"})
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.code, copy.message, copy.data) == (err.code, err.message, err.data)
    assert "Invalid params" in str(err) and "-32602" in str(err)
