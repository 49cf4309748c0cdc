"""The Trio driver: which protocol a connection speaks, and a v2 connection's translation.

`negotiated_stream(stream)` reads the client's first line.  Unless it is an `initialize`
asking for protocol version 2 or later, the connection is v1 and the agent gets the very
stream it would have got (those bytes put back in front, direct writes kept: nothing
changes for a v1 client).  For v2 it gets one end of an in-memory pipe instead, and four
tasks run the `Gateway` between the pipe and the client: each frame read from either side
goes through the gateway synchronously and what it produces is queued at once, so the
order the gateway decided is the order on both wires.

Bounded, as the v1 connection is (docs/ARCHITECTURE.md#d1-our-own-json-rpc-layer): the
queues (`_Backlog`) take what the gateway decides without waiting, and the reader that
feeds one reads no further while it is full.  A client that reads slowly leaves the
agent's output unread in the pipe, so the agent's writes wait, as they wait on a full
stdout: its writer, then its turn's updates, slow down, and the SDK's threads, which
never wait on Trio (D4), are unaffected.  The client's own frames are read on while the
client reads slowly (a `session/cancel` still gets through), up to a larger bound for a
client that sends requests and reads no answers.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

from ..rpc import FrameMask, FrameTooLarge, LineBuffer, direct_sender
from .frames import Json, obj, wants_v2
from .frames import available_commands as available_commands_v2
from .gateway import Gateway, Out

__all__ = ["negotiated_stream"]

logger = logging.getLogger("trio_acp.v2")

_READ_SIZE = 64 * 1024
#: The most read while looking for the client's first frame (see `_read_first_frame`).
_FIRST_FRAME_LIMIT = 1024 * 1024
#: How long the end of a v2 connection waits for the client to take the last frames.
_FLUSH_SECONDS = 5.0
#: Frames queued for the client at most before the agent's output is read no further.
CLIENT_BACKLOG = 64
#: Frames queued for the client at most before the client's own frames are read no
#: further (the gateway answers some itself: a client that reads none of them).
CLIENT_BACKLOG_HARD = 1024
#: Frames queued for the agent at most before the client's frames are read no further.
AGENT_BACKLOG = 64


class _Backlog:
    """Frames the gateway decided, in its order, waiting for their writer.

    `put` never waits, so nothing comes between the gateway's decision and the queueing
    (the order it chose is the order on the wire); the reader that feeds the backlog
    waits for `room` before it reads more, which bounds it.  Once its writer cannot
    write (the client hung up), it drops what it is given and waits for nothing."""

    def __init__(self) -> None:
        self._frames: deque[bytes] = deque()
        self._closed = False
        self._dropping = False
        self._waiting_frames = trio.lowlevel.ParkingLot()
        self._waiting_room = trio.lowlevel.ParkingLot()

    def __len__(self) -> int:
        return len(self._frames)

    def put(self, frame: bytes) -> None:
        if self._closed:
            raise trio.ClosedResourceError("the v2 gateway's queue is closed")
        if not self._dropping:
            self._frames.append(frame)
            self._waiting_frames.unpark_all()

    def close(self) -> None:
        """No more frames: the writer ends once it has written the queued ones."""
        self._closed = True
        self._waiting_frames.unpark_all()

    def drop(self) -> None:
        """The writer is gone: drop the queue and whatever comes, wait for nothing."""
        self._dropping = True
        self._frames.clear()
        self._waiting_room.unpark_all()

    async def take(self) -> list[bytes] | None:
        """Every queued frame (waiting for one); None once closed and empty."""
        while not self._frames:
            if self._closed:
                return None
            await self._waiting_frames.park()
        await trio.lowlevel.checkpoint()
        taken = list(self._frames)
        self._frames.clear()
        self._waiting_room.unpark_all()
        return taken

    async def room(self, most: int) -> None:
        """Wait until fewer than `most` frames are queued."""
        while len(self._frames) >= most and not self._dropping:
            await self._waiting_room.park()


class _Prefixed(trio.abc.Stream):
    """`inner`, with bytes already read from it served first (a v1 connection)."""

    def __init__(self, inner: trio.abc.Stream, prefix: bytes) -> None:
        self._inner = inner
        self._prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._prefix:
            await trio.lowlevel.checkpoint()
            n = len(self._prefix) if max_bytes is None else max_bytes
            data, self._prefix = self._prefix[:n], self._prefix[n:]
            return data
        return await self._inner.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._inner.send_all(data)

    def try_send_now(self, data: bytes | memoryview) -> bytes | memoryview:
        # Keeps the peer's direct writes (trio_acp/rpc/_direct.py) for v1 clients.
        send_now = direct_sender(self._inner)
        return data if send_now is None else send_now(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._inner.aclose()


class _PipeEnd(trio.abc.Stream):
    """The agent's end of the in-memory pipe to the gateway (whole writes as chunks)."""

    def __init__(
        self, send: trio.MemorySendChannel[bytes], receive: _Backlog, to_client: _Backlog
    ) -> None:
        self._send = send
        self._receive = receive
        self._to_client = to_client
        self._left = b""

    def queued(self) -> tuple[int, int]:
        """(frames queued for the client, frames queued for the agent): bounded
        (`CLIENT_BACKLOG`, `AGENT_BACKLOG`); for tests and diagnostics."""
        return len(self._to_client), len(self._receive)

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if not self._left:
            frames = await self._receive.take()
            if frames is None:
                return b""
            self._left = b"".join(frames)
        else:
            await trio.lowlevel.checkpoint()
        n = len(self._left) if max_bytes is None else max_bytes
        data, self._left = self._left[:n], self._left[n:]
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            await self._send.send(bytes(data))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise trio.BrokenResourceError("the v2 gateway is gone") from exc

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        self._send.close()
        self._receive.close()
        await trio.lowlevel.checkpoint()


def _encode(frame: Json) -> bytes:
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _parse(line: bytes) -> Json | None:
    try:
        return obj(json.loads(line))
    except (ValueError, UnicodeDecodeError):
        return None


def _first_frame(data: bytes) -> bytes | None:
    """The first line of `data` that is not blank, or None while there is none."""
    for line in data.split(b"\n")[:-1]:
        if line.strip():
            return line
    return None


async def _read_first_frame(stream: trio.abc.Stream) -> tuple[bytes, bytes]:
    """(the client's first frame, everything read): read until a line that is not blank
    has arrived, EOF, or `_FIRST_FRAME_LIMIT` bytes without one (no `initialize` is that
    big: the connection is then left to the v1 path and its own frame limits)."""
    data = bytearray()
    while (first := _first_frame(bytes(data))) is None and len(data) < _FIRST_FRAME_LIMIT:
        chunk = await stream.receive_some(_READ_SIZE)
        if not chunk:
            break
        data += chunk
    return first or b"", bytes(data)


@asynccontextmanager
async def negotiated_stream(
    stream: trio.abc.Stream,
    *,
    mask: FrameMask | None = None,
    available_commands: list[object] | None = None,
    stoppable_tools: frozenset[str] = frozenset(),
) -> AsyncIterator[trio.abc.Stream]:
    """The stream the v1 agent serves: `stream` itself for a v1 client; for a client
    that asks for v2, the agent's end of the gateway, running while the block runs.

    ``mask``: the agent's frame mask (`AgentHooks.frame_mask`), applied to every frame
    the gateway writes to a v2 client; the gateway writes some of its own (the user
    message it echoes), which the agent's connection never sees.  ``available_commands``:
    the agent's slash commands as v1 spells them, the same for every session (`Gateway`);
    ``stoppable_tools``: the tools whose calls the agent stops one by one (`Gateway`)."""
    first, head = await _read_first_frame(stream)
    if not wants_v2(first):
        yield _Prefixed(stream, head)
        return
    logger.info("the client asked for ACP v2: speaking v2 through the gateway")
    commands = available_commands_v2(available_commands)
    gateway = Gateway(
        available_commands=commands if isinstance(commands, list) else None,
        stoppable_tools=stoppable_tools,
    )
    async with _open_gateway(stream, head, mask, gateway) as agent_end:
        yield agent_end


@asynccontextmanager
async def _open_gateway(
    stream: trio.abc.Stream, head: bytes, mask: FrameMask | None, gateway: Gateway
) -> AsyncIterator[trio.abc.Stream]:
    # What the gateway decides is queued synchronously, in its order; the readers below
    # keep the queues bounded (module doc).
    to_agent = _Backlog()
    to_client = _Backlog()
    from_agent_send, from_agent_receive = trio.open_memory_channel[bytes](16)
    agent_end = _PipeEnd(from_agent_send, to_agent, to_client)

    def to_the_agent(data: bytes) -> None:
        try:
            to_agent.put(data)
        except trio.ClosedResourceError:
            pass  # the agent is done with its end: it is winding down

    def deliver(out: Out) -> None:
        for frame in out.to_client:
            try:
                to_client.put(_encode(frame))
            except trio.ClosedResourceError:
                pass  # the agent is done: the connection is ending
        for frame in out.to_agent:
            to_the_agent(_encode(frame))

    def translated(step: Callable[[Json], Out], frame: Json, *, to_agent: bool) -> Out:
        # One frame's error boundary: a frame the gateway fails on goes on as it came
        # (logged), rather than ending the connection.
        try:
            return step(frame)
        except Exception:
            logger.exception("the v2 gateway failed on a frame; passed on as it is")
            return Out(to_agent=[frame]) if to_agent else Out(to_client=[frame])

    def from_client(line: bytes | FrameTooLarge) -> None:
        if isinstance(line, FrameTooLarge):
            return
        frame = _parse(line)
        if frame is None:
            # Not a JSON object (garbage, a batch): the agent answers it as it would.
            to_the_agent(line + b"\n")
        else:
            deliver(translated(gateway.from_client, frame, to_agent=True))

    async def client_reader() -> None:
        buffer = LineBuffer()
        try:
            for line in buffer.feed(head):
                from_client(line)
            while True:
                # Read on while the agent takes what it is given and the client reads
                # what it is answered (bounded: module doc).
                await to_agent.room(AGENT_BACKLOG)
                await to_client.room(CLIENT_BACKLOG_HARD)
                try:
                    data = await stream.receive_some(_READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    data = b""
                if not data:
                    for line in buffer.feed_eof():
                        from_client(line)
                    return
                for line in buffer.feed(data):
                    from_client(line)
        finally:
            to_agent.close()  # the agent sees EOF

    async def agent_reader() -> None:
        buffer = LineBuffer()
        try:
            while True:
                # The agent's output waits in the pipe while the client reads slowly:
                # the agent's writes then wait, as on a full stdout (module doc).
                await to_client.room(CLIENT_BACKLOG)
                try:
                    data = await from_agent_receive.receive()
                except trio.EndOfChannel:
                    return
                for line in buffer.feed(data):
                    if isinstance(line, FrameTooLarge):
                        continue
                    frame = _parse(line)
                    if frame is not None:
                        deliver(translated(gateway.from_agent, frame, to_agent=False))
        finally:
            to_client.close()

    writer_done = trio.Event()

    async def client_writer() -> None:
        try:
            while (frames := await to_client.take()) is not None:
                data = b"".join(frames)  # whole lines: the mask sees whole frames
                try:
                    await stream.send_all(data if mask is None else mask(data))
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    to_client.drop()
                    return
        finally:
            writer_done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(client_reader)
        nursery.start_soon(agent_reader)
        nursery.start_soon(client_writer)
        try:
            yield agent_end
        finally:
            # The agent is done with its end: what it wrote reaches the client (bounded,
            # for a client that reads no more), then the client's stream closes, as the
            # v1 path closes it.
            from_agent_send.close()
            with trio.CancelScope(shield=True) as flush:
                flush.deadline = trio.current_time() + _FLUSH_SECONDS
                await writer_done.wait()
            nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
