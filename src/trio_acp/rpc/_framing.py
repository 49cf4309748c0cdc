"""Newline-delimited framing, sans-io (no trio, no sockets): bytes in, lines out.

ACP's stdio transport puts one JSON-RPC message on each line, and messages never contain
a raw newline (JSON escapes it inside strings), so a newline always ends a frame.

DoS limit, h11-style: a frame (one line, without its line ending) may be at most
``max_frame_size`` bytes, 64 MiB by default.  That is big enough for the base64 images
and embedded resources ACP prompts carry, and it bounds memory: the buffer never holds
more than ``max_frame_size`` + 1 bytes of an unfinished line plus the chunk being fed.
A longer line is *not* an exception: `LineBuffer.feed` reports it as a `FrameTooLarge`
event (so the driver can answer a JSON-RPC error and carry on), then discards bytes up to
and including the next newline without buffering them, after which framing resumes.
"""

from __future__ import annotations

import attrs

__all__ = ["DEFAULT_MAX_FRAME_SIZE", "FrameTooLarge", "LineBuffer"]

#: The default cap on one frame: 64 MiB.
DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024


@attrs.frozen
class FrameTooLarge:
    """A line exceeded ``max_frame_size``; its bytes were (or are being) discarded."""

    max_frame_size: int


class LineBuffer:
    """Splits a byte stream into lines.

    ``feed(data)`` returns the complete lines (as ``bytes``, without the ``\\n`` or
    ``\\r\\n`` ending; blank lines are skipped) and `FrameTooLarge` events, in stream
    order.  ``feed_eof()`` returns the final unterminated line, if any.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 1:
            raise ValueError("max_frame_size must be positive")
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        # ``_buf`` holds only an unfinished line, so it never contains b"\n".  Searching
        # only the newly fed bytes keeps feeding a large frame in small chunks linear.
        self._discarding = False
        self._eof = False

    @property
    def discarding(self) -> bool:
        """True while skipping the rest of an over-size line."""
        return self._discarding

    @property
    def buffered(self) -> int:
        """Bytes of an unfinished line currently held."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes | FrameTooLarge]:
        if self._eof:
            raise RuntimeError("feed() after feed_eof()")
        events: list[bytes | FrameTooLarge] = []
        chunk = data if isinstance(data, bytes) else bytes(data)
        if self._discarding:
            newline = chunk.find(b"\n")
            if newline < 0:
                return events  # drop it all: nothing is buffered while discarding
            self._discarding = False
            chunk = chunk[newline + 1 :]
        if not chunk:
            return events

        newline = chunk.find(b"\n")
        if newline < 0:
            self._buf += chunk
            self._check_partial(events)
            return events

        # The first line may continue what is buffered; the rest lie inside ``chunk``.
        limit = self.max_frame_size
        if self._buf:
            if len(self._buf) + newline > limit + 1:  # cheap pre-check before copying
                self._buf.clear()
                events.append(FrameTooLarge(limit))
            else:
                self._buf += chunk[:newline]
                self._emit(bytes(self._buf), events)
                self._buf.clear()
        else:
            self._emit(chunk[:newline], events)
        start = newline + 1
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                break
            self._emit(chunk[start:newline], events)
            start = newline + 1
        if start < len(chunk):
            self._buf += chunk[start:]
            self._check_partial(events)
        return events

    def feed_eof(self) -> list[bytes | FrameTooLarge]:
        """The stream ended: return the last line if it had no terminating newline."""
        events: list[bytes | FrameTooLarge] = []
        if not self._eof:
            self._eof = True
            if self._buf and not self._discarding:
                self._emit(bytes(self._buf), events)
            self._buf.clear()
            self._discarding = False
        return events

    def _emit(self, line: bytes, events: list[bytes | FrameTooLarge]) -> None:
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > self.max_frame_size:
            events.append(FrameTooLarge(self.max_frame_size))
        elif line and not line.isspace():
            events.append(line)

    def _check_partial(self, events: list[bytes | FrameTooLarge]) -> None:
        # An unfinished line longer than the limit + 1 (room for a "\r" before the "\n")
        # can only become an over-size frame: report it now and stop buffering.
        if len(self._buf) > self.max_frame_size + 1:
            self._buf.clear()
            self._discarding = True
            events.append(FrameTooLarge(self.max_frame_size))
