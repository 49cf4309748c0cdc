"""Hypothesis: whatever bytes arrive, the core never raises and a peer never crashes,
hangs or leaks a task."""

from __future__ import annotations

import json
from typing import Any

import orjson
import trio
import trio.testing
from _rpc_helpers import RecordingHandler
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_acp.rpc import (
    ErrorResponse,
    FrameTooLarge,
    InvalidMessage,
    LineBuffer,
    Notification,
    PeerClosed,
    Request,
    RequestError,
    Result,
    encode_error,
    open_peer,
    parse_message,
)

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- the sans-io core ---------------------------------------------------------------------

chunk_pieces = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"\n", b"\r\n", b"\r", b" ", b"{}", b'{"a":1}\n']),
    st.integers(0, 200).map(lambda n: b"x" * n),
)


def model(data: bytes, limit: int) -> list[bytes | FrameTooLarge]:
    out: list[bytes | FrameTooLarge] = []
    for line in data.split(b"\n"):
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > limit:
            out.append(FrameTooLarge(limit))
        elif line.strip():
            out.append(line)
    return out


@FUZZ
@given(chunks=st.lists(chunk_pieces, max_size=40), limit=st.integers(1, 64))
def test_line_buffer_matches_a_model(chunks: list[bytes], limit: int) -> None:
    buf = LineBuffer(max_frame_size=limit)
    events: list[bytes | FrameTooLarge] = []
    for chunk in chunks:
        events += buf.feed(chunk)
        assert buf.buffered <= limit + 1
    events += buf.feed_eof()
    assert events == model(b"".join(chunks), limit)
    for event in events:
        if isinstance(event, bytes):
            assert b"\n" not in event and len(event) <= limit


@FUZZ
@given(data=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=8))
def test_line_buffer_split_anywhere(data: bytes, cuts: list[int]) -> None:
    whole = LineBuffer(max_frame_size=32)
    expected = whole.feed(data) + whole.feed_eof()
    pieces, start = [], 0
    for cut in sorted(cuts):
        pieces.append(data[start:cut])
        start = max(start, cut)
    pieces.append(data[start:])
    split = LineBuffer(max_frame_size=32)
    got: list[bytes | FrameTooLarge] = []
    for piece in pieces:
        got += split.feed(piece)
    assert got + split.feed_eof() == expected


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5)
)
envelope_keys = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"])
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(envelope_keys, st.text(max_size=3)), inner, max_size=5),
        st.dictionaries(st.sampled_from(["code", "message", "data"]), inner, max_size=3),
    ),
    max_leaves=12,
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.one_of(st.just("2.0"), json_scalars),
        "id": json_values,
        "method": st.one_of(st.text(max_size=5), json_scalars),
        "params": json_values,
        "result": json_values,
        "error": json_values,
    },
)


def check_classified(msg: Any) -> None:
    assert isinstance(msg, (Request, Notification, Result, ErrorResponse, InvalidMessage))
    if isinstance(msg, InvalidMessage):
        frame = encode_error(msg.id, msg.error)
        assert orjson.loads(frame)["error"]["code"] in (-32700, -32600)
    if isinstance(msg, ErrorResponse):
        assert isinstance(msg.error, RequestError)


@FUZZ
@given(line=st.binary(max_size=200))
def test_parse_arbitrary_bytes(line: bytes) -> None:
    check_classified(parse_message(line))


@FUZZ
@given(value=st.one_of(envelopes, json_values))
def test_parse_arbitrary_json(value: Any) -> None:
    line = json.dumps(value).encode()
    msg = parse_message(line)
    check_classified(msg)
    if isinstance(msg, (Request, Result)):
        assert type(msg.id) in (int, str)


# -- a driven peer ------------------------------------------------------------------------

ids = st.one_of(st.integers(-2, 6), st.sampled_from(["a", "", "é", 2**70]))
methods = st.sampled_from(["echo", "null", "fail", "forever", "nope", "sleep", "$/x"])


def request(id: Any, method: str) -> dict[str, Any]:
    params: Any = {"seconds": 0.3} if method == "sleep" else [1]
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


messages = st.one_of(
    st.builds(request, ids, methods),
    st.builds(lambda m: {"jsonrpc": "2.0", "method": m, "params": {}}, methods),
    st.builds(
        lambda i: {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": i}}, ids
    ),
    st.builds(lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r}, ids, json_scalars),
    st.builds(lambda i: {"jsonrpc": "2.0", "id": i, "error": {"code": -1, "message": "m"}}, ids),
    envelopes,
)
pieces = st.one_of(
    messages.map(lambda m: json.dumps(m).encode() + b"\n"),
    st.binary(max_size=30),
    st.integers(150, 3000).map(lambda n: b"h" * n),  # huge, maybe without a newline
    st.just(b"\n"),
)


async def drive(data: bytes, cuts: list[int]) -> None:
    raw, stream = trio.testing.memory_stream_pair()
    out = bytearray()
    with trio.fail_after(300):  # virtual time: fails only on a real hang
        async with open_peer(stream, RecordingHandler(), max_frame_size=128) as peer:

            async def feed() -> None:
                start = 0
                for cut in [*sorted(cuts), len(data)]:
                    if cut > start:
                        await raw.send_all(data[start:cut])
                        await trio.sleep(0.01)
                        start = cut
                await raw.send_eof()  # type: ignore[attr-defined]

            async def read() -> None:
                while chunk := await raw.receive_some():
                    out.extend(chunk)

            async def call() -> None:
                try:
                    await peer.request("ask", [1])
                except (PeerClosed, RequestError):
                    pass

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read)
                nursery.start_soon(call)
                await feed()
                await peer.wait_closed()
        assert peer.closed and not peer._inbound and not peer._pending
        await raw.aclose()
    for line in bytes(out).splitlines():
        msg = orjson.loads(line)
        assert msg["jsonrpc"] == "2.0"
        if "method" in msg:
            assert msg["method"] in ("ask", "$/cancel_request")
        else:
            assert ("result" in msg) != ("error" in msg)


@settings(FUZZ, max_examples=150)
@given(chunks=st.lists(pieces, max_size=25), cuts=st.lists(st.integers(0, 20000), max_size=6))
def test_peer_survives_arbitrary_input(chunks: list[bytes], cuts: list[int]) -> None:
    data = b"".join(chunks)
    # trio.run returning at all shows that no task outlived the peer.
    trio.run(
        drive,
        data,
        [c for c in cuts if c < len(data)],
        clock=trio.testing.MockClock(autojump_threshold=0),
    )
