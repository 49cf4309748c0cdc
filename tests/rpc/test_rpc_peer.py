"""The Trio driver: dispatch, error boundary, cancellation, shutdown, transports."""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from _rpc_helpers import RawSide, RecordingHandler, strip_error

from trio_acp.rpc import (
    ErrorCode,
    Peer,
    PeerClosed,
    RequestError,
    current_request_id,
    open_peer,
)


def req(id: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notif(method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result(id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "result": value}


def error(id: Any, code: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "error": {"code": code}}


# -- two peers talking --------------------------------------------------------------------


async def test_request_both_ways(autojump_clock: trio.abc.Clock) -> None:
    a, b = trio.testing.memory_stream_pair()
    ha, hb = RecordingHandler(), RecordingHandler()
    async with open_peer(a, ha) as pa, open_peer(b, hb) as pb:
        assert await pa.request("echo", {"x": [1, "é"]}) == {"x": [1, "é"]}
        assert await pb.request("echo", [1, 2]) == [1, 2]
        assert await pa.request("null") is None
        await pb.notify("note", {"n": 1})
        await pa.request("null")  # round trip: the notification is handled by now
        assert ha.notifications == [("note", {"n": 1})]
    assert pa.closed and pb.closed


async def test_error_response_raises_request_error(autojump_clock: trio.abc.Clock) -> None:
    a, b = trio.testing.memory_stream_pair()
    async with open_peer(a, RecordingHandler()) as pa, open_peer(b, RecordingHandler()):
        with pytest.raises(RequestError) as info:
            await pa.request("no/such/method", {})
        assert info.value.code == ErrorCode.METHOD_NOT_FOUND
        assert info.value.data == {"method": "no/such/method"}
        with pytest.raises(RequestError) as info:
            await pa.request("fail")
        assert info.value.code == ErrorCode.INTERNAL_ERROR


async def test_current_request_id(autojump_clock: trio.abc.Clock) -> None:
    seen = []

    class H(RecordingHandler):
        async def handle_request(self, method: str, params: Any) -> Any:
            seen.append(current_request_id.get())
            await trio.sleep(0.1)
            return current_request_id.get()

    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, H()):
        await raw.send(req("a", "m"))
        await raw.send(req(2, "m"))
        answers = [await raw.receive(), await raw.receive()]
        assert sorted(map(str, (m["result"] for m in answers))) == ["2", "a"]
        assert {m["id"] for m in answers} == {"a", 2}
        assert all(m["id"] == m["result"] for m in answers)
        assert sorted(map(str, seen)) == ["2", "a"]
    assert current_request_id.get() is None


async def test_request_params_must_serialize(autojump_clock: trio.abc.Clock) -> None:
    a, b = trio.testing.memory_stream_pair()
    async with open_peer(a, RecordingHandler()) as pa, open_peer(b, RecordingHandler()):
        with pytest.raises(TypeError):
            await pa.request("echo", {"x": object()})
        with pytest.raises(TypeError):
            await pa.notify("n", {"x": object()})
        with pytest.raises(TypeError):  # params must be structured
            await pa.request("echo", "scalar")
        assert await pa.request("echo", [1]) == [1]


# -- the per-request error boundary ---------------------------------------------------------


class BoundaryHandler(RecordingHandler):
    async def handle_request(self, method: str, params: Any) -> Any:
        if method == "value-error":
            raise ValueError("secret detail")
        if method == "group-with-request-error":
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.sleep_forever)

                async def fail() -> None:
                    raise RequestError.invalid_params({"why": "bad"})

                nursery.start_soon(fail)
        if method == "group-of-errors":
            async with trio.open_nursery() as nursery:

                async def fail() -> None:
                    raise KeyError("k")

                nursery.start_soon(fail)
                nursery.start_soon(fail)
        if method == "unserializable":
            return {"x": {1, 2}}
        if method == "auth":
            raise RequestError.auth_required()
        return await super().handle_request(method, params)


async def test_error_boundary(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    caplog.set_level(logging.DEBUG, logger="trio_acp.rpc")
    async with open_peer(peer_stream, BoundaryHandler()):
        for id, method in enumerate(
            [
                "value-error",
                "group-with-request-error",
                "group-of-errors",
                "unserializable",
                "auth",
                "nope",
            ]
        ):
            await raw.send(req(id, method))
            msg = await raw.receive()
            assert msg["id"] == id
            if method == "value-error":
                assert msg["error"] == {"code": -32603, "message": "Internal error"}
            elif method == "group-with-request-error":
                assert msg["error"] == {
                    "code": -32602,
                    "message": "Invalid params",
                    "data": {"why": "bad"},
                }
            elif method in ("group-of-errors", "unserializable"):
                assert msg["error"]["code"] == -32603
            elif method == "auth":
                assert msg["error"]["code"] == -32000
            else:
                assert msg["error"]["code"] == -32601
        # The connection is still fine.
        await raw.send(req(99, "echo", [99]))
        assert await raw.receive() == result(99, [99])
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(r.exc_info and isinstance(r.exc_info[1], ValueError) for r in failures)
    assert "secret detail" not in "".join(
        raw.raw_lines[i].decode() for i in range(len(raw.raw_lines))
    )


async def test_cancelled_not_swallowed_by_boundary(autojump_clock: trio.abc.Clock) -> None:
    # An outer cancellation goes through the handlers and out of open_peer, unwrapped.
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    with trio.move_on_after(5) as scope:
        async with open_peer(peer_stream, RecordingHandler()):
            await raw.send(req(1, "forever"))
            await trio.sleep_forever()
    assert scope.cancelled_caught


# -- notifications ------------------------------------------------------------------------


async def test_notifications_inline_in_order_before_the_response(
    autojump_clock: trio.abc.Clock,
) -> None:
    """All notifications sent before a response are handled before the awaiting task
    wakes (ACP: session/update before the session/prompt result)."""
    a, b = trio.testing.memory_stream_pair()
    ha = RecordingHandler()
    peers: dict[str, Peer] = {}

    class Agent(RecordingHandler):
        async def handle_request(self, method: str, params: Any) -> Any:
            for i in range(50):
                await peers["b"].notify("session/update", {"i": i})
            return "done"

    async with open_peer(a, ha) as pa, open_peer(b, Agent()) as pb:
        peers["b"] = pb
        assert await pa.request("session/prompt") == "done"
        assert [p["i"] for _, p in ha.notifications] == list(range(50))


async def test_notification_errors_never_answered(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    class H(RecordingHandler):
        async def handle_notification(self, method: str, params: Any) -> None:
            if method == "boom":
                raise ValueError("notification failure")
            if method == "unknown":
                raise RequestError.method_not_found(method)
            if method == "group":
                async with trio.open_nursery() as n:

                    async def fail() -> None:
                        raise KeyError("x")

                    n.start_soon(fail)
            await super().handle_notification(method, params)

    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    handler = H()
    async with open_peer(peer_stream, handler):
        for method in ["boom", "unknown", "group", "$/progress", "ok"]:
            await raw.send(notif(method, {}))
        await raw.send(req(1, "echo", ["after"]))
        # The only answer is the request's: notifications are never answered.
        assert await raw.receive() == result(1, ["after"])
    assert handler.notifications == [("$/progress", {}), ("ok", {})]
    assert any(r.exc_info and isinstance(r.exc_info[1], ValueError) for r in caplog.records)
    assert raw.raw_lines == [b'{"jsonrpc":"2.0","id":1,"result":["after"]}']


# -- inbound $/cancel_request -----------------------------------------------------------


async def test_inbound_cancel_request(autojump_clock: trio.abc.Clock) -> None:
    class H(RecordingHandler):
        async def handle_request(self, method: str, params: Any) -> Any:
            if method == "stubborn":
                # Finishes anyway: the result is sent, not -32800.
                try:
                    await trio.sleep_forever()
                finally:
                    return "finished anyway"  # noqa: B012
            if method == "raises-on-cancel":
                try:
                    await trio.sleep_forever()
                except trio.Cancelled:
                    raise RequestError(-32001, "custom") from None
            return await super().handle_request(method, params)

    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, H()) as peer:
        await raw.send(req(1, "forever"))
        await raw.send(req("s", "stubborn"))
        await raw.send(req(3, "raises-on-cancel"))
        await raw.send(req(4, "sleep", {"seconds": 1}))
        await trio.sleep(0.5)
        for id in [1, "s", 3, "unknown", 12345]:
            await raw.send(notif("$/cancel_request", {"requestId": id}))
        await raw.send(notif("$/cancel_request", {"bogus": True}))
        await raw.send(notif("$/cancel_request"))
        answers = {}
        for _ in range(4):
            msg = await raw.receive()
            answers[msg["id"]] = strip_error(msg)
        assert answers == {
            1: error(1, -32800),
            "s": result("s", "finished anyway"),
            3: error(3, -32001),
            4: result(4, "slept"),  # not cancelled
        }
        # A cancel for a finished request is ignored.
        await raw.send(notif("$/cancel_request", {"requestId": 4}))
        await raw.send(req(5, "echo", [5]))
        assert await raw.receive() == result(5, [5])
        assert not peer._inbound


async def test_cancel_request_right_behind_the_request(autojump_clock: trio.abc.Clock) -> None:
    # Both lines in one chunk: the handler task has not even started when the cancel is
    # read, and it is still cancelled and answered.
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()):
        await raw.send_raw(
            orjson.dumps(req(7, "forever"))
            + b"\n"
            + orjson.dumps(notif("$/cancel_request", {"requestId": 7}))
            + b"\n"
        )
        assert strip_error(await raw.receive()) == error(7, -32800)


async def test_cancel_request_not_passed_to_handler_other_dollar_notifications_are(
    autojump_clock: trio.abc.Clock,
) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    handler = RecordingHandler()
    async with open_peer(peer_stream, handler):
        await raw.send(notif("$/cancel_request", {"requestId": 1}))
        await raw.send(notif("$/something", {"a": 1}))
        await raw.send(req(1, "null"))
        await raw.receive()
    assert handler.notifications == [("$/something", {"a": 1})]


# -- outbound requests ------------------------------------------------------------------


async def test_cancelled_outbound_request_sends_cancel_request(
    autojump_clock: trio.abc.Clock,
) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()) as peer:
        with trio.move_on_after(1):
            await peer.request("slow", {"x": 1})
        sent = await raw.receive()
        assert sent == req(1, "slow", {"x": 1})
        assert await raw.receive() == notif("$/cancel_request", {"requestId": 1})
        assert not peer._pending
        # The late answer is dropped; the next request gets its own.
        await raw.send(result(1, "late"))

        async def answer() -> None:
            msg = await raw.receive()
            await raw.send(result(msg["id"], "fresh"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer)
            assert await peer.request("next") == "fresh"


async def test_a_late_answer_to_a_cancelled_request_reaches_on_late(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A request that creates something (a terminal) may be answered after its caller
    gave up (a client that ignores `$/cancel_request`): `on_late` gets that answer, so
    the caller can undo it. A late error, a second answer or the end of the connection
    call nothing."""
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    late: list[Any] = []
    async with open_peer(peer_stream, RecordingHandler()) as peer:
        with trio.move_on_after(1):
            await peer.request("create", None, on_late=late.append)
        with trio.move_on_after(1):
            await peer.request("create", None, on_late=late.append)
        with trio.move_on_after(1):
            await peer.request("create", None, on_late=late.append)
        assert [(await raw.receive())["method"] for _ in range(6)] == [
            "create",
            "$/cancel_request",
        ] * 3
        await raw.send(result(1, {"terminalId": "t1"}))
        await raw.send(error(2, -32800))
        await raw.send(result(1, {"terminalId": "again"}))  # answered twice: dropped

        async def answer() -> None:
            msg = await raw.receive()
            await raw.send(result(msg["id"], "fresh"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer)
            assert await peer.request("next") == "fresh"
        assert late == [{"terminalId": "t1"}]
        assert list(peer._pending) == [3]  # still listening for the third
    assert late == [{"terminalId": "t1"}]  # the connection's end is no answer


async def test_cancel_request_never_blocks_the_cancelled_task(
    autojump_clock: trio.abc.Clock,
) -> None:
    # The other side is not reading and the outgoing queue is full when a request is
    # cancelled: the cancelled task still returns at once, and the $/cancel_request goes
    # out later, once there is room.
    raw_stream, peer_stream = trio.testing.lockstep_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler(), max_queued_frames=1) as peer:
        await peer.notify("a")  # the writer takes it and blocks in send_all
        await trio.sleep(0.1)
        request_scope = trio.CancelScope()
        request_done = trio.Event()

        async def call() -> None:
            with request_scope:
                await peer.request("never")
            request_done.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.sleep(0.1)  # "never" is queued: the queue is now full
            nursery.start_soon(peer.notify, "b")  # blocks: no room
            await trio.sleep(0.1)
            request_scope.cancel()
            with trio.fail_after(0.1):
                await request_done.wait()
            methods = []
            while "$/cancel_request" not in methods:
                methods.append((await raw.receive())["method"])
        assert methods[:2] == ["a", "never"]
        assert methods.index("never") < methods.index("$/cancel_request")
        assert not peer._pending


async def test_response_with_unknown_or_odd_ids_ignored(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()) as peer:

        async def other_side() -> None:
            msg = await raw.receive()
            assert msg["id"] == 1
            await raw.send(result(999, "nobody asked"))
            await raw.send(result("1", "string id is a different id"))
            await raw.send(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "x"}}
            )
            await raw.send(result(1, "right"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_side)
            assert await peer.request("q") == "right"
        await raw.send(req(2, "echo", ["still fine"]))
        assert await raw.receive() == result(2, ["still fine"])


async def test_malformed_error_response_wakes_the_caller(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()) as peer:

        async def other_side() -> None:
            msg = await raw.receive()
            await raw.send({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": "x"}})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_side)
            with pytest.raises(RequestError) as info:
                await peer.request("q")
        assert info.value.code == ErrorCode.INTERNAL_ERROR


# -- shutdown -----------------------------------------------------------------------------


async def test_eof_fails_pending_and_cancels_handlers(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    outcomes: list[Any] = []
    async with open_peer(peer_stream, RecordingHandler()) as peer:

        async def call() -> None:
            try:
                await peer.request("unanswered")
            except PeerClosed as exc:
                outcomes.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await raw.send(req(1, "forever"))
            await raw.send(req(2, "sleep", {"seconds": 0.5}))
            assert (await raw.receive())["method"] == "unanswered"
            await trio.sleep(0.1)
            await raw.send_eof()
            await peer.wait_closed()
            assert peer.closed
        assert len(outcomes) == 1 and isinstance(outcomes[0], PeerClosed)
        with pytest.raises(PeerClosed):
            await peer.request("after")
        # Still flushing? notify may work; after the block it cannot.
    rest = [strip_error(m) for m in await raw.receive_all()]
    assert sorted(rest, key=lambda m: m["id"]) == [error(1, -32800), error(2, -32800)]
    with pytest.raises(PeerClosed):
        await peer.notify("gone")
    assert not peer._pending and not peer._inbound


async def test_eof_gives_handlers_a_grace_period(autojump_clock: trio.abc.Clock) -> None:
    class H(RecordingHandler):
        async def handle_request(self, method: str, params: Any) -> Any:
            try:
                await trio.sleep_forever()
            finally:
                with trio.move_on_after(10, shield=True):
                    await trio.sleep(params["cleanup"])
                return "cleaned up"  # noqa: B012

    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, H(), shutdown_grace=1.5) as peer:
        await raw.send(req("quick", "x", {"cleanup": 0.5}))
        await raw.send(req("slow", "x", {"cleanup": 30}))
        await trio.sleep(0.1)
        await raw.send_eof()
        await peer.wait_closed()
    # The quick cleanup answered; the slow one ran past the grace and was cut off (its
    # shielded cleanup still ran to its own deadline: Trio cannot abandon a task).
    assert await raw.receive_all() == [result("quick", "cleaned up")]


async def test_leaving_the_block_closes_gracefully(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()) as peer:
        await raw.send(req(1, "forever"))
        await peer.notify("last words")
        await trio.sleep(0.1)
    assert peer.closed
    frames = await raw.receive_all()  # ends: the peer closed its side
    assert frames[0] == notif("last words")
    assert strip_error(frames[1]) == error(1, -32800)


async def test_aclose_twice_and_wait_closed(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    async with open_peer(peer_stream, RecordingHandler()) as peer:
        assert not peer.closed
        await peer.aclose()
        await peer.aclose()
        await peer.wait_closed()
        assert peer.closed
    assert await raw_stream.receive_some() == b""


async def test_aclose_from_a_handler(autojump_clock: trio.abc.Clock) -> None:
    peers: list[Peer] = []

    class H(RecordingHandler):
        async def handle_request(self, method: str, params: Any) -> Any:
            await peers[0].aclose()

    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, H()) as peer:
        peers.append(peer)
        await raw.send(req(1, "close"))
        await peer.wait_closed()
    assert [strip_error(m) for m in await raw.receive_all()] == [error(1, -32800)]


async def test_body_exception_propagates_unwrapped(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    with pytest.raises(KeyError) as info:
        async with open_peer(peer_stream, RecordingHandler()) as peer:
            await RawSide(raw_stream).send(req(1, "forever"))
            await trio.sleep(0.1)
            raise KeyError("mine")
    assert type(info.value) is KeyError
    assert info.value.__context__ is None
    assert peer.closed


async def test_body_exception_group_propagates_as_is(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    _, peer_stream = trio.testing.memory_stream_pair()
    mine = ExceptionGroup("mine", [ValueError("a"), KeyError("b")])
    with pytest.raises(ExceptionGroup) as info:
        async with open_peer(peer_stream, RecordingHandler()):
            raise mine
    assert info.value is mine
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_body_exception_with_cause_keeps_it(autojump_clock: trio.abc.Clock) -> None:
    _, peer_stream = trio.testing.memory_stream_pair()
    with pytest.raises(RuntimeError) as info:
        async with open_peer(peer_stream, RecordingHandler()):
            try:
                raise ValueError("root")
            except ValueError as exc:
                raise RuntimeError("outer") from exc
    assert isinstance(info.value.__cause__, ValueError)


class FailingReceiveStream(trio.abc.Stream):
    def __init__(self, exc: BaseException | None, send_exc: BaseException | None = None) -> None:
        self.exc = exc
        self.send_exc = send_exc
        self.sent = b""
        self.closed = False
        self.receive_event = trio.Event()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await self.receive_event.wait()
        assert self.exc is not None
        raise self.exc

    async def send_all(self, data: Any) -> None:
        await trio.lowlevel.checkpoint()
        if self.send_exc is not None:
            raise self.send_exc
        self.sent += bytes(data)

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        self.closed = True
        await trio.lowlevel.checkpoint()


async def test_internal_error_surfaces_as_itself(autojump_clock: trio.abc.Clock) -> None:
    stream = FailingReceiveStream(OSError(5, "EIO"))
    caught: list[BaseException] = []
    with pytest.raises(OSError) as info:
        async with open_peer(stream, RecordingHandler()) as peer:

            async def call() -> None:
                try:
                    await peer.request("x")
                except PeerClosed as exc:
                    caught.append(exc)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(call)
                await trio.sleep(0.1)
                stream.receive_event.set()
            await peer.wait_closed()
    assert type(info.value) is OSError and info.value.errno == 5
    assert isinstance(caught[0].__cause__, OSError)
    assert stream.closed


@pytest.mark.parametrize("exc", [trio.BrokenResourceError, trio.ClosedResourceError])
async def test_broken_receive_is_eof(autojump_clock: trio.abc.Clock, exc: type[Exception]) -> None:
    stream = FailingReceiveStream(exc())
    async with open_peer(stream, RecordingHandler()) as peer:
        stream.receive_event.set()
        await peer.wait_closed()


async def test_broken_pipe_on_write_closes_quietly(autojump_clock: trio.abc.Clock) -> None:
    stream = FailingReceiveStream(None, send_exc=trio.BrokenResourceError("EPIPE"))
    async with open_peer(stream, RecordingHandler()) as peer:
        await peer.notify("a")  # queued: the writer then hits the broken pipe
        await peer.wait_closed()
        with pytest.raises(PeerClosed):
            await peer.notify("b")
        with pytest.raises(PeerClosed):
            await peer.request("c")
    assert stream.closed


# -- the writer ---------------------------------------------------------------------------


class GatedStream(trio.abc.Stream):
    """Records each send_all; the first one waits for a gate.  Never reads anything."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.gate = trio.Event()
        self.first_entered = trio.Event()
        self.in_send = False

    async def send_all(self, data: Any) -> None:
        assert not self.in_send, "concurrent send_all"
        self.in_send = True
        try:
            if not self.writes:
                self.first_entered.set()
                await self.gate.wait()
            await trio.lowlevel.checkpoint()
            self.writes.append(bytes(data))
        finally:
            self.in_send = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_writer_drains_queue_into_one_send_all(autojump_clock: trio.abc.Clock) -> None:
    stream = GatedStream()
    async with open_peer(stream, RecordingHandler(), max_queued_frames=100) as peer:
        await peer.notify("first")
        await stream.first_entered.wait()
        for i in range(20):
            await peer.notify("n", [i])
        stream.gate.set()
        await trio.sleep(0.1)
        assert len(stream.writes) == 2
        lines = stream.writes[1].splitlines()
        assert [orjson.loads(line)["params"] for line in lines] == [[i] for i in range(20)]
    assert all(w.endswith(b"\n") for w in stream.writes)


async def test_burst_of_notifications_leaves_in_few_writes(autojump_clock: trio.abc.Clock) -> None:
    stream = GatedStream()
    stream.gate.set()
    async with open_peer(stream, RecordingHandler(), max_queued_frames=64) as peer:
        for i in range(200):
            await peer.notify("n", [i])
        await trio.sleep(0.1)
    lines = b"".join(stream.writes).splitlines()
    assert [orjson.loads(line)["params"] for line in lines] == [[i] for i in range(200)]
    assert len(stream.writes) <= 10


async def test_one_reader_one_writer_one_task_per_request(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()) as peer:
        for i in range(3):
            await raw.send(req(i, "forever"))
        await raw.send(notif("n"))
        await trio.sleep(0.1)
        assert peer._system_nursery is not None and peer._handler_nursery is not None
        # The writer is the system nursery's only task; the reader is the body of the
        # handlers nursery; each in-flight request has one task; notifications none.
        assert len(peer._system_nursery.child_tasks) == 1
        assert len(peer._handler_nursery.child_tasks) == 3


async def test_current_request_id_not_inherited_by_a_nested_peer(
    autojump_clock: trio.abc.Clock,
) -> None:
    seen: list[Any] = []

    class Inner(RecordingHandler):
        async def handle_notification(self, method: str, params: Any) -> None:
            seen.append(current_request_id.get())

    class Outer(RecordingHandler):
        async def handle_request(self, method: str, params: Any) -> Any:
            a, b = trio.testing.memory_stream_pair()
            async with open_peer(a, RecordingHandler()) as pa, open_peer(b, Inner()):
                await pa.notify("x")
                await trio.sleep(0.1)
            return current_request_id.get()

    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, Outer()):
        await raw.send(req("outer", "go"))
        assert await raw.receive() == result("outer", "outer")
    assert seen == [None]


async def test_cancelled_sender_never_leaves_half_a_frame(autojump_clock: trio.abc.Clock) -> None:
    # A big frame on a lockstep stream: the sender is cancelled while the writer is mid
    # send_all; the frame still arrives whole.
    raw_stream, peer_stream = trio.testing.lockstep_stream_pair()
    raw = RawSide(raw_stream)
    big = "x" * 300_000
    async with open_peer(peer_stream, RecordingHandler()) as peer:
        with trio.move_on_after(0.1):
            await peer.notify("big", [big])
            await trio.sleep_forever()
        await peer.notify("small")
        assert await raw.receive() == notif("big", [big])
        assert await raw.receive() == notif("small")


# -- malformed input through the driver -----------------------------------------------------


async def test_frame_too_large_answered_then_connection_works(
    autojump_clock: trio.abc.Clock,
) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler(), max_frame_size=1000):
        await raw.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":["' + b"a" * 5000)
        msg = await raw.receive()
        assert msg["id"] is None and msg["error"]["code"] == -32600
        assert "too large" in msg["error"]["message"]
        await raw.send_raw(b"a" * 5000 + b'"]}\n')  # the rest of it is skipped
        await raw.send(req(2, "echo", ["ok"]))
        assert await raw.receive() == result(2, ["ok"])


async def test_duplicate_in_flight_id_rejected(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()):
        await raw.send(req(1, "sleep", {"seconds": 1}))
        await raw.send(req(1, "echo", ["dup"]))
        assert strip_error(await raw.receive()) == error(1, -32600)
        assert await raw.receive() == result(1, "slept")


async def test_big_and_unicode_ids_echoed(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()):
        big = 2**80 + 1
        await raw.send_raw(b'{"jsonrpc":"2.0","id":%d,"method":"null"}\n' % big)
        line = await raw.receive_line()
        assert line == b'{"jsonrpc":"2.0","id":%d,"result":null}' % big
        await raw.send(req("ид-☃-😀", "null"))
        assert await raw.receive_line() == '{"jsonrpc":"2.0","id":"ид-☃-😀","result":null}'.encode()


async def test_final_line_without_newline_handled_at_eof(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()) as peer:
        await raw.send_raw(orjson.dumps(req(1, "echo", [1])))
        await raw.send_eof()
        await peer.wait_closed()
    assert await raw.receive_all() == [result(1, [1])]


# -- transports -----------------------------------------------------------------------------


async def exchange(stream_a: trio.abc.Stream, stream_b: trio.abc.Stream) -> None:
    ha = RecordingHandler()
    async with open_peer(stream_a, ha) as pa, open_peer(stream_b, RecordingHandler()) as pb:
        payload = {"text": "é" * 100_000}
        assert await pa.request("echo", payload) == payload
        await pb.notify("n", [1])
        assert await pb.request("null") is None
        results: list[Any] = [None] * 20

        async def one(i: int) -> None:
            results[i] = await pa.request("echo", [i])

        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(one, i)
        assert results == [[i] for i in range(20)]
        assert ha.notifications == [("n", [1])]


async def test_lockstep_stream_pair(autojump_clock: trio.abc.Clock) -> None:
    await exchange(*trio.testing.lockstep_stream_pair())


async def test_real_socketpair() -> None:
    a, b = socket.socketpair()
    await exchange(
        trio.SocketStream(trio.socket.from_stdlib_socket(a)),
        trio.SocketStream(trio.socket.from_stdlib_socket(b)),
    )


async def test_real_pipes() -> None:
    a_to_b = os.pipe()
    b_to_a = os.pipe()
    stream_a = trio.StapledStream(
        trio.lowlevel.FdStream(a_to_b[1]), trio.lowlevel.FdStream(b_to_a[0])
    )
    stream_b = trio.StapledStream(
        trio.lowlevel.FdStream(b_to_a[1]), trio.lowlevel.FdStream(a_to_b[0])
    )
    await exchange(stream_a, stream_b)


async def test_pipe_eof_ends_the_peer() -> None:
    to_peer = os.pipe()
    from_peer = os.pipe()
    stream = trio.StapledStream(
        trio.lowlevel.FdStream(from_peer[1]), trio.lowlevel.FdStream(to_peer[0])
    )
    writer = trio.lowlevel.FdStream(to_peer[1])
    reader = trio.lowlevel.FdStream(from_peer[0])
    with trio.fail_after(10):
        async with open_peer(stream, RecordingHandler()) as peer:
            await writer.send_all(orjson.dumps(req(1, "echo", ["x"])) + b"\n")
            await writer.aclose()
            await peer.wait_closed()
        raw = RawSide(reader)
        assert await raw.receive_all() == [result(1, ["x"])]
    await reader.aclose()


# -- request_received: wire-order bookkeeping ----------------------------------------------


async def test_request_received_runs_in_wire_order_before_tasks_and_notifications() -> None:
    # Requests and a notification in ONE write: the hook sees each request, with its id,
    # before the notification behind it is handled — whatever order the tasks run in.
    log: list[Any] = []

    class H(RecordingHandler):
        def request_received(self, request_id: Any, method: str, params: Any) -> None:
            log.append(("received", request_id, method))
            if method == "boom":
                raise RuntimeError("bookkeeping failed")

        async def handle_request(self, method: str, params: Any) -> Any:
            log.append(("task", current_request_id.get(), method))
            return None

        async def handle_notification(self, method: str, params: Any) -> None:
            log.append(("notification", None, method))

    a, b = trio.testing.memory_stream_pair()
    raw = RawSide(b)
    handler = H()
    async with open_peer(a, handler, request_received=handler.request_received):
        frames = [req(1, "first"), req("two", "boom"), notif("cancel"), req(3, "third")]
        await raw.send_raw(b"".join(orjson.dumps(f) + b"\n" for f in frames))
        answers = {(await raw.receive())["id"] for _ in range(3)}
        assert answers == {1, "two", 3}  # a failing hook costs nothing but a log line
    received = [entry for entry in log if entry[0] != "task"]
    assert received == [
        ("received", 1, "first"),
        ("received", "two", "boom"),
        ("notification", None, "cancel"),
        ("received", 3, "third"),
    ]
    assert sorted(str(e[1]) for e in log if e[0] == "task") == ["1", "3", "two"]


async def test_request_received_not_called_for_a_duplicate_in_flight_id() -> None:
    seen: list[Any] = []
    release = trio.Event()

    class H(RecordingHandler):
        def request_received(self, request_id: Any, method: str, params: Any) -> None:
            seen.append(request_id)

        async def handle_request(self, method: str, params: Any) -> Any:
            await release.wait()
            return None

    a, b = trio.testing.memory_stream_pair()
    raw = RawSide(b)
    handler = H()
    async with open_peer(a, handler, request_received=handler.request_received):
        await raw.send_raw(
            orjson.dumps(req(7, "slow")) + b"\n" + orjson.dumps(req(7, "again")) + b"\n"
        )
        duplicate = await raw.receive()
        assert duplicate["id"] == 7 and duplicate["error"]["code"] == -32600
        release.set()
        assert (await raw.receive())["result"] is None
    assert seen == [7]


async def test_request_received_is_only_the_hook_passed_to_open_peer() -> None:
    # A handler's method of that name is not looked up: only the explicit hook is called.
    by_name: list[Any] = []
    passed: list[Any] = []

    class H(RecordingHandler):
        def request_received(self, request_id: Any, method: str, params: Any) -> None:
            by_name.append(request_id)

    a, b = trio.testing.memory_stream_pair()
    raw = RawSide(b)
    with trio.fail_after(10):
        async with open_peer(a, H()):
            await raw.send_raw(orjson.dumps(req(1, "first")) + b"\n")
            assert (await raw.receive())["id"] == 1
        a, b = trio.testing.memory_stream_pair()
        raw = RawSide(b)
        async with open_peer(
            a, H(), request_received=lambda request_id, method, params: passed.append(request_id)
        ):
            await raw.send_raw(orjson.dumps(req(2, "second")) + b"\n")
            assert (await raw.receive())["id"] == 2
    assert by_name == [] and passed == [2]
