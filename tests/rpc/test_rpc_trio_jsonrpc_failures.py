"""One test per trio-jsonrpc 0.4.0 failure named in docs/ARCHITECTURE.md#d1-our-own-json-rpc-layer.

trio-jsonrpc hung on ``"result": null``, wedged its reader after a cancelled outbound
request, deadlocked when ``session/cancel`` arrived while a handler awaited
``session/request_permission``, handled requests one at a time, and printed to stdout.
(Its missing stdio transport is covered by test_rpc_stdio.py.)
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from _rpc_helpers import RawSide, RecordingHandler

from trio_acp.rpc import Peer, open_peer


async def test_result_null(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()) as peer:

        async def answer_null() -> None:
            msg = await raw.receive()
            await raw.send_raw(b'{"jsonrpc":"2.0","id":%d,"result":null}\n' % msg["id"])

        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer_null)
            with trio.fail_after(5):
                assert await peer.request("fs/write_text_file", {"path": "/x"}) is None


async def test_cancelled_outbound_request_then_late_response(
    autojump_clock: trio.abc.Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """The other side answers after we gave up: the answer is dropped, the reader keeps
    working, and the next request gets its own answer."""
    late_release = trio.Event()

    class Slow(RecordingHandler):
        async def handle_request(self, method: str, params: Any) -> Any:
            if method == "slow":
                # Ignores $/cancel_request and answers late, as peers may.
                with trio.CancelScope(shield=True):
                    await late_release.wait()
                return "late"
            return await super().handle_request(method, params)

    a, b = trio.testing.memory_stream_pair()
    ha = RecordingHandler()
    async with open_peer(a, ha) as pa, open_peer(b, Slow()) as pb:
        with trio.move_on_after(1) as scope:
            await pa.request("slow")
        assert scope.cancelled_caught
        late_release.set()
        caplog.set_level(logging.DEBUG, logger="trio_acp.rpc")
        await trio.sleep(1)  # the late response has arrived and been dropped
        assert "dropping a response to unknown request 1" in caplog.text
        await pb.notify("still-reading", [1])
        assert await pa.request("echo", ["next"]) == ["next"]
        assert ha.notifications == [("still-reading", [1])]
        assert not pa._pending


async def test_notification_while_handler_awaits_outbound_request(
    autojump_clock: trio.abc.Clock,
) -> None:
    """ACP: the agent's session/prompt handler awaits session/request_permission; the
    client sends session/cancel meanwhile.  The agent must see it (no deadlock), stop
    waiting and answer the prompt with stopReason "cancelled"."""
    peers: dict[str, Peer] = {}
    permission_asked = trio.Event()

    class Agent:
        def __init__(self) -> None:
            self.turn_scope: trio.CancelScope | None = None

        async def handle_request(self, method: str, params: Any) -> Any:
            assert method == "session/prompt"
            with trio.CancelScope() as self.turn_scope:
                outcome = await peers["agent"].request(
                    "session/request_permission", {"sessionId": "s", "options": []}
                )
                return {"stopReason": "end_turn", "outcome": outcome}
            return {"stopReason": "cancelled"}

        async def handle_notification(self, method: str, params: Any) -> None:
            if method == "session/cancel":
                assert self.turn_scope is not None
                self.turn_scope.cancel()

    class Client(RecordingHandler):
        async def handle_request(self, method: str, params: Any) -> Any:
            assert method == "session/request_permission"
            permission_asked.set()
            await trio.sleep_forever()  # the user never answers

    client_stream, agent_stream = trio.testing.memory_stream_pair()
    client_handler = Client()
    async with (
        open_peer(agent_stream, Agent()) as agent,
        open_peer(client_stream, client_handler) as client,
    ):
        peers["agent"] = agent
        response: dict[str, Any] = {}

        async def prompt() -> None:
            response.update(await client.request("session/prompt", {"sessionId": "s"}))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt)
                await permission_asked.wait()
                await client.notify("session/cancel", {"sessionId": "s"})
        assert response == {"stopReason": "cancelled"}
        # The agent withdrew its permission request: the client got $/cancel_request and
        # its handler was cancelled (no stuck task on either side).
        await trio.sleep(0.1)
        assert not client._inbound and not agent._pending


async def test_many_concurrent_requests(autojump_clock: trio.abc.Clock) -> None:
    """Requests are handled concurrently and answered out of order, each correctly."""

    class H(RecordingHandler):
        async def handle_request(self, method: str, params: Any) -> Any:
            await trio.sleep(params["delay"])
            return {"n": params["n"]}

    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    n = 200
    async with open_peer(peer_stream, H()):
        for i in range(n):
            # Later requests finish first.
            await raw.send(
                {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "work",
                    "params": {"n": i, "delay": (n - i) / 100},
                }
            )
        answers = [await raw.receive() for _ in range(n)]
    assert [m["id"] for m in answers] == list(reversed(range(n)))
    assert all(m["result"] == {"n": m["id"]} for m in answers)

    # And two peers: many concurrent callers of one Peer each get their own answer.
    a, b = trio.testing.memory_stream_pair()
    async with open_peer(a, RecordingHandler()) as pa, open_peer(b, H()):
        got: dict[int, Any] = {}

        async def call(i: int) -> None:
            got[i] = await pa.request("work", {"n": i, "delay": (i * 7919 % 100) / 100})

        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(call, i)
        assert got == {i: {"n": i} for i in range(n)}


MALFORMED: list[tuple[bytes, int, Any]] = [
    (b"this is not json", -32700, None),
    (b'{"jsonrpc":"2.0","id":1,"method":"echo"', -32700, None),
    (
        b'[{"jsonrpc":"2.0","id":1,"method":"echo"},{"jsonrpc":"2.0","id":2,"method":"echo"}]',
        -32600,
        None,
    ),
    (b'{"jsonrpc":"1.0","id":3,"method":"echo"}', -32600, 3),
    (b'{"id":4,"method":"echo"}', -32600, 4),
    (b'{"jsonrpc":"2.0","id":5,"method":42}', -32600, 5),
    (b'{"jsonrpc":"2.0","id":true,"method":"echo"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"echo"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"echo"}', -32600, None),
    (b'{"jsonrpc":"2.0","id":"s","method":"echo","params":"str"}', -32600, "s"),
    (b'{"jsonrpc":"2.0","id":9,"result":1,"error":{"code":1,"message":"x"}}', -32600, 9),
    (b"42", -32600, None),
    (b"\xff\xfe\x00garbage", -32700, None),
]


async def test_malformed_envelopes(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, RecordingHandler()):
        for line, code, id in MALFORMED:
            await raw.send_raw(line + b"\n")
            msg = await raw.receive()
            assert msg["id"] == id and type(msg["id"]) is type(id), line
            assert msg["error"]["code"] == code, line
            assert msg["error"]["message"]
            # Still usable after each one.
            await raw.send({"jsonrpc": "2.0", "id": "ok", "method": "echo", "params": [1]})
            assert await raw.receive() == {"jsonrpc": "2.0", "id": "ok", "result": [1]}
        # A batch gets exactly one answer.
        await raw.send_raw(b"[1,2,3]\n")
        await raw.send({"jsonrpc": "2.0", "id": "last", "method": "null"})
        assert (await raw.receive())["id"] is None
        assert (await raw.receive())["id"] == "last"


async def test_nothing_printed_to_stdout(
    autojump_clock: trio.abc.Clock,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)

    class Noisy(RecordingHandler):
        async def handle_notification(self, method: str, params: Any) -> None:
            raise ValueError("notification failure")

    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    async with open_peer(peer_stream, Noisy()) as peer:
        await raw.send_raw(b"junk\n" + b"x" * 100 + b"\n")
        await raw.send({"jsonrpc": "2.0", "method": "n"})
        await raw.send({"jsonrpc": "2.0", "id": 1, "method": "fail"})
        await raw.send({"jsonrpc": "2.0", "id": 2, "method": "nope"})
        await raw.send({"jsonrpc": "2.0", "id": 3, "method": "forever"})
        await raw.send({"jsonrpc": "2.0", "id": 99, "result": "unknown id"})
        with trio.move_on_after(1):
            await peer.request("never answered")
        for _ in range(4):
            await raw.receive()
        await raw.send_eof()
        await peer.wait_closed()
    captured = capfd.readouterr()
    assert captured.out == ""
    assert orjson.loads(raw.raw_lines[0])["error"]["code"] == -32700
