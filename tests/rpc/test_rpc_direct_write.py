"""Requests and responses written at once (trio_acp/rpc/_direct.py), over real pipes.

The peer writes a frame the other side waits for synchronously when its writer is idle,
and leaves everything else to the writer task. These tests pin what that must never
change: frames stay whole and in order, a cancelled caller sends nothing, a broken pipe
closes the connection, and masking still applies.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from _rpc_helpers import RawSide, RecordingHandler

from trio_acp.credentials import MASK, SecretValues
from trio_acp.rpc import PeerClosed, direct_sender, open_peer

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FdStream is Unix-only")

BIG = 1 << 20  # far more than a pipe holds (64 KiB on Linux): the write is partial


def pipe_pair() -> tuple[trio.StapledStream[Any, Any], trio.StapledStream[Any, Any]]:
    """Two ends of a full-duplex byte channel made of two OS pipes."""
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    a = trio.StapledStream(trio.lowlevel.FdStream(w1), trio.lowlevel.FdStream(r2))
    b = trio.StapledStream(trio.lowlevel.FdStream(w2), trio.lowlevel.FdStream(r1))
    return a, b


def _in_writer() -> bool:
    return "_write_loop" in trio.lowlevel.current_task().name


class Recording(trio.abc.Stream):
    """Delegates to a stream and records which frames went out through which path:
    `now` written at once by the task that made them, `queued` by the writer task."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.now: list[bytes] = []
        self.queued: list[bytes] = []
        self._send_now = direct_sender(inner)

    def try_send_now(self, data: bytes | memoryview) -> bytes | memoryview:
        assert self._send_now is not None
        (self.queued if _in_writer() else self.now).append(bytes(data))
        return self._send_now(data)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        assert _in_writer()
        self.queued.append(bytes(data))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


def methods(frames: list[bytes]) -> list[Any]:
    """Per recorded write: the method (or id, for responses) of each frame in it."""
    out = []
    for data in frames:
        for line in data.splitlines():
            msg = orjson.loads(line)
            out.append(msg.get("method", ("response", msg.get("id"))))
    return out


async def test_requests_and_responses_go_out_at_once_notifications_queue() -> None:
    a, b = pipe_pair()
    ra, rb = Recording(a), Recording(b)
    with trio.fail_after(10):
        async with open_peer(ra, RecordingHandler()) as pa, open_peer(rb, RecordingHandler()):
            await trio.testing.wait_all_tasks_blocked()  # both peers' writers are idle
            assert await pa.request("echo", {"x": 1}) == {"x": 1}
            await pa.notify("note", {"n": 1})
            # The writer has the notification and has not run yet: this request queues
            # behind it (both leave in one write).
            assert await pa.request("echo", {"x": 2}) == {"x": 2}
            assert await pa.request("echo", {"x": 3}) == {"x": 3}
    assert methods(ra.now) == ["echo", "echo"]
    assert methods(ra.queued) == ["note", "echo"]
    assert methods(rb.now) == [("response", 1), ("response", 2), ("response", 3)]
    assert rb.queued == []


async def test_a_response_behind_queued_notifications_stays_behind_them() -> None:
    class Chatty(RecordingHandler):
        async def handle_request(self, method: str, params: Any) -> Any:
            for i in range(params["n"]):
                await peer.notify("note", {"i": i})
            return "done"

    a, b = pipe_pair()
    raw = RawSide(b)
    with trio.fail_after(10):
        async with open_peer(a, Chatty()) as peer:
            for n in (1, 3, 200):
                await raw.send({"jsonrpc": "2.0", "id": n, "method": "chat", "params": {"n": n}})
                frames = [await raw.receive() for _ in range(n + 1)]
                assert [f.get("params", {}).get("i") for f in frames[:n]] == list(range(n))
                assert frames[n] == {"jsonrpc": "2.0", "id": n, "result": "done"}


async def test_frames_bigger_than_the_pipe_arrive_whole_and_in_order() -> None:
    a, b = pipe_pair()
    c, d = pipe_pair()
    text = "é" * BIG
    with trio.fail_after(30):
        async with open_peer(a, RecordingHandler()) as pa, open_peer(b, RecordingHandler()):
            # A big request (pa's write is partial) and its big echo (so is pb's), then
            # small ones right behind: each must follow the rest of the big frame.
            for _ in range(3):
                assert await pa.request("echo", {"t": text}) == {"t": text}
                assert await pa.request("echo", [1]) == [1]
        raw = RawSide(d)
        async with open_peer(c, RecordingHandler()):
            await raw.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [text]})
            await raw.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": [2]})
            got = sorted([await raw.receive(), await raw.receive()], key=lambda m: m["id"])
            assert got == [
                {"jsonrpc": "2.0", "id": 1, "result": [text]},
                {"jsonrpc": "2.0", "id": 2, "result": [2]},
            ]


async def test_no_direct_write_while_the_writer_holds_a_half_written_frame() -> None:
    """The writer is inside send_all (the pipe took part of a big notification): a
    response must wait its turn, or its bytes would land inside the other frame."""
    inner, other = trio.testing.memory_stream_pair()
    release = trio.Event()

    class Stuck(Recording):
        async def send_all(self, data: bytes | bytearray | memoryview) -> None:
            self.queued.append(bytes(data))
            if b'"big"' in data:
                await release.wait()  # half of it is "on the wire"; the rest waits
            await self.inner.send_all(data)

        def try_send_now(self, data: bytes | memoryview) -> bytes | memoryview:
            if not _in_writer():
                self.now.append(bytes(data))
            return data  # writes nothing: the writer sends it with send_all

    stream = Stuck(inner)
    raw = RawSide(other)
    with trio.fail_after(10):
        async with open_peer(stream, RecordingHandler()) as peer:
            await peer.notify("big", {"x": "y" * 1000})
            await trio.testing.wait_all_tasks_blocked()  # the writer is stuck in send_all
            await raw.send({"jsonrpc": "2.0", "id": 7, "method": "echo", "params": [7]})
            await trio.testing.wait_all_tasks_blocked()
            assert stream.now == []  # the response did not bypass the writer
            release.set()
            assert (await raw.receive())["method"] == "big"
            assert await raw.receive() == {"jsonrpc": "2.0", "id": 7, "result": [7]}


async def test_a_cancelled_request_sends_nothing() -> None:
    a, b = pipe_pair()
    raw = RawSide(b)
    with trio.fail_after(10):
        async with open_peer(a, RecordingHandler()) as peer:
            await trio.testing.wait_all_tasks_blocked()  # the writer is idle
            with trio.CancelScope() as scope:
                scope.cancel()
                await peer.request("echo", ["never"])
            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer.request, "echo", ["second"])
                first = await raw.receive()
                assert first["params"] == ["second"]
                await raw.send({"jsonrpc": "2.0", "id": first["id"], "result": None})


async def test_a_broken_pipe_closes_the_connection() -> None:
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    os.close(r1)  # nobody will ever read what the peer writes: EPIPE
    stream = trio.StapledStream(trio.lowlevel.FdStream(w1), trio.lowlevel.FdStream(r2))
    with trio.fail_after(10):
        async with open_peer(stream, RecordingHandler(), shutdown_grace=0.5) as peer:
            with pytest.raises(PeerClosed):
                await peer.request("echo", [1])
            await peer.wait_closed()
    os.close(w2)


async def test_masking_applies_to_frames_written_at_once() -> None:
    secret = "sk-canary-0123456789abcdef"
    secrets = SecretValues([secret])
    a, b = pipe_pair()
    raw = RawSide(b)
    # Big enough that the direct write is partial, with the secret all along it (so one
    # copy straddles the point where the pipe stopped taking bytes).
    text = ("x" * 37 + secret) * (BIG // 60)
    with trio.fail_after(30):
        async with open_peer(a, RecordingHandler(), mask=secrets.mask_bytes):
            await raw.send({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [text]})
            await raw.send({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": [secret]})
            got = {m["id"]: m["result"] for m in [await raw.receive(), await raw.receive()]}
    assert got[1] == [text.replace(secret, MASK)]
    assert got[2] == [MASK]
    assert all(secret.encode() not in line for line in raw.raw_lines)


async def test_the_mask_covers_every_frame_through_the_writer_on_any_stream() -> None:
    # An in-memory pair has no direct write: every frame goes through the writer's batch.
    # Notifications (a burst, in one write), a request to the other side, and an error
    # answer quoting the client's input all pass the mask, including a secret learnt after
    # the connection opened.
    secrets = SecretValues()
    a, b = trio.testing.memory_stream_pair()
    raw = RawSide(b)
    secret = "sk-later-0123456789abcdef"
    with trio.fail_after(10):
        async with open_peer(a, RecordingHandler(), mask=secrets.mask_bytes) as peer:
            secrets.add([secret])
            for i in range(5):
                await peer.notify("note", {"text": f"{i}: {secret}"})
            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer.request, "ask", {"quote": secret})
                got = [await raw.receive() for _ in range(6)]
                await raw.send({"jsonrpc": "2.0", "id": got[-1]["id"], "result": None})
            await raw.send({"jsonrpc": "2.0", "id": 7, "method": secret})
            got.append(await raw.receive())
    assert [m["params"]["text"] for m in got[:5]] == [f"{i}: {MASK}" for i in range(5)]
    assert got[5]["params"] == {"quote": MASK}
    assert got[6]["id"] == 7 and got[6]["error"]["data"] == {"method": MASK}
    assert all(secret.encode() not in line for line in raw.raw_lines)


async def test_a_notification_marked_at_once_skips_the_writer_only_when_it_is_idle() -> None:
    a, b = pipe_pair()
    ra = Recording(a)
    raw = RawSide(b)
    with trio.fail_after(10):
        async with open_peer(ra, RecordingHandler()) as peer:
            await trio.testing.wait_all_tasks_blocked()  # the writer is idle
            await peer.notify("first", at_once=True)  # written at once
            await peer.notify("second", at_once=True)  # the writer is idle still: at once too
            await peer.notify("third")  # unmarked: queued (handed to the writer)
            await peer.notify("fourth", at_once=True)  # the writer holds "third": behind it
            assert [(await raw.receive())["method"] for _ in range(4)] == [
                "first",
                "second",
                "third",
                "fourth",
            ]
    assert methods(ra.now) == ["first", "second"]
    assert methods(ra.queued) == ["third", "fourth"]
