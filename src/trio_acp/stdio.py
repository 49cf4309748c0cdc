"""The stdio transport, with the hygiene ACP needs (docs/ARCHITECTURE.md#d2-stdio-hygiene).

ACP's stdio rule: stdout carries protocol frames and nothing else.  Libraries print,
SDKs show banners, child processes inherit fd 1.  So `open_stdio_stream` takes the real
stdin/stdout for the protocol (duplicated file descriptors wrapped in non-blocking,
cancellable `trio.lowlevel.FdStream`\\s) and then points fd 0 at /dev/null and fd 1 (and
``sys.stdout``) at stderr: anything else that writes "to stdout" lands on stderr.  Never
``trio.wrap_file(sys.stdin)``: a read in a worker thread cannot be cancelled.

Unix only (FdStream).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
from collections.abc import Awaitable, Callable

import trio

from .exception_groups import reraise
from .rpc import direct_sender

__all__ = ["open_stdio_stream", "serve_stdio"]

logger = logging.getLogger("trio_acp.stdio")

#: The signals that end the server gracefully. SIGHUP is among them: an editor, a terminal
#: multiplexer or an SSH session that goes away hangs up on the agent, and Python's default
#: for it is to die at once, leaving the open prompt unanswered and its turn unsaved.
SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def open_stdio_stream() -> trio.StapledStream[trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
    """Take fds 0 and 1 for the protocol and return them as one `trio.abc.Stream`.

    One-way and process-wide: afterwards fd 0 reads /dev/null, fd 1 and ``sys.stdout``
    write to stderr, and children inherit those (the protocol fds are not inheritable).
    Closing the returned stream closes the protocol's stdout, which the other side sees
    as EOF.  Call it once, from the main program.
    """
    for file in (sys.stdout, sys.__stdout__):
        if file is not None:
            try:
                file.flush()
            except (OSError, ValueError):
                pass
    protocol_in = os.dup(0)  # os.dup() makes non-inheritable fds: children never get them
    protocol_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
    finally:
        os.close(devnull)
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr at all: swallow stray output
        sink = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(sink, 1)
        finally:
            os.close(sink)
    # fd 1 now is stderr, but Python-level writers may hold their own handle: repoint it.
    sys.stdout = sys.stderr
    return trio.StapledStream(
        trio.lowlevel.FdStream(protocol_out), trio.lowlevel.FdStream(protocol_in)
    )


class _EndableStream(trio.abc.Stream):
    """Delegates to a stream; `end_input` makes reads return EOF (b"") from then on,
    including a read already waiting.  That is how a signal "closes stdin"."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self._inner = inner
        self._ended = False
        self._read_scope: trio.CancelScope | None = None

    def end_input(self) -> None:
        self._ended = True
        if self._read_scope is not None:
            self._read_scope.cancel()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._ended:
            await trio.lowlevel.checkpoint()
            return b""
        with trio.CancelScope() as scope:
            self._read_scope = scope
            try:
                return await self._inner.receive_some(max_bytes)
            finally:
                self._read_scope = None
        return b""  # end_input() cancelled the read

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._inner.send_all(data)

    def try_send_now(self, data: bytes | memoryview) -> bytes | memoryview:
        # Lets the peer write a response at once (trio_acp/rpc/_direct.py).
        send_now = direct_sender(self._inner)
        return data if send_now is None else send_now(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self._inner.aclose()


async def serve_stdio(
    serve: Callable[[trio.abc.Stream], Awaitable[None]], *, grace: float = 5.0
) -> None:
    """Run ``serve(stream)`` over stdin/stdout (see `open_stdio_stream`) until it returns.

    The first SIGTERM, SIGINT or SIGHUP starts a graceful shutdown that looks like stdin EOF to
    ``serve`` (its reads return b""), so a peer winds down the usual way: in-flight
    requests cancelled and answered, frames flushed.  If ``serve`` has not returned
    ``grace`` seconds later it is cancelled.  A second signal cancels it at once.  After a
    real stdin EOF, returns as soon as ``serve`` does.  Must run in the main thread.
    """
    with trio.open_signal_receiver(*SHUTDOWN_SIGNALS) as signals:
        stream = _EndableStream(open_stdio_stream())
        async with stream:
            try:
                async with trio.open_nursery() as nursery:

                    async def watch_signals() -> None:
                        count = 0
                        async for signum in signals:
                            count += 1
                            if count == 1:
                                logger.info(
                                    "%s: shutting down (grace %ss)",
                                    signal.Signals(signum).name,
                                    grace,
                                )
                                stream.end_input()
                                if not math.isinf(grace):
                                    nursery.cancel_scope.deadline = trio.current_time() + grace
                            else:
                                logger.info("%s: stopping now", signal.Signals(signum).name)
                                nursery.cancel_scope.cancel()
                                return

                    nursery.start_soon(watch_signals)
                    try:
                        await serve(stream)
                    finally:
                        nursery.cancel_scope.cancel()
            except BaseExceptionGroup as group:
                # The signal watcher raises nothing: unwrap serve()'s own exception.
                if len(group.exceptions) == 1:
                    reraise(group.exceptions[0])
                raise
