"""Writing a frame at once, without a trip through the scheduler.

A request or a response is a frame the other side waits for.  Queuing it for the writer
task costs two Trio scheduler passes before the bytes reach the pipe (the writer's wake-up,
then the checkpoint at the start of ``FdStream.send_all``): about 20 µs of a 100–150 µs
round trip between two processes (bench/README.md, "Request latency").  When nothing is
queued and the writer is idle, the peer instead writes the frame synchronously with a
non-blocking ``write()``, and hands whatever the pipe did not take to the writer.  The
writer itself writes what it drained from the queue the same way (``send_all`` would
yield once more before writing), and falls back to ``send_all`` for what does not fit.

A stream opts in with a ``try_send_now(data)`` method: write what can be written *now*,
without blocking and without yielding, and return the part not written (empty when all of
it was), which the caller then sends with ``send_all`` before anything else.  It may raise
(``OSError``, `trio.ClosedResourceError`, …) only if it wrote nothing; the caller then
sends the whole frame through ``send_all``, which meets the error the usual way.
`direct_sender` finds that method, and provides it for trio's own `FdStream` (pipes, stdio)
and `StapledStream` (a subprocess's stdin/stdout pair).  Any other stream (an in-memory
pair, a TLS stream) has none, and every frame goes through the writer task.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["SendNow", "direct_sender"]

#: ``send_now(data) -> the part of data not written`` (see the module docstring).
SendNow = Callable[[bytes | memoryview], bytes | memoryview]


def direct_sender(stream: Any) -> SendNow | None:
    """The synchronous, non-blocking writer of `stream`, or None if it has none."""
    own = getattr(stream, "try_send_now", None)
    if own is not None:
        return own  # type: ignore[no-any-return]
    if isinstance(stream, trio.StapledStream):
        return direct_sender(stream.send_stream)
    if isinstance(stream, trio.lowlevel.FdStream):
        return _fd_sender(stream)
    return None


def _fd_sender(stream: trio.lowlevel.FdStream) -> SendNow:
    # FdStream has put the fd in non-blocking mode.  The peer calls this only while its
    # writer task is idle, so it never races the stream's own send_all.
    def send_now(data: bytes | memoryview) -> bytes | memoryview:
        try:
            written = os.write(stream.fileno(), data)  # a closed stream's fd is -1: EBADF
        except BlockingIOError:
            return data
        return memoryview(data)[written:] if written < len(data) else b""

    return send_now
