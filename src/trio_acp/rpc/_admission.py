"""How many inbound requests a connection serves at once, and how many wait: sans-io.

A request costs a task (and its answer, until the other side reads it) from the moment it
is read. A client that pipelines requests without reading the answers would make a reader
that reads on grow without bound (200,000 requests: 1.6 GiB here, bench/README.md
"Flood"). So at most ``max_running`` requests run; the next ones wait here, as the raw
lines they came in (cheaper than their parsed form), in arrival order, up to
``max_waiting`` of them and ``max_waiting_bytes`` of their lines; once that is full the
reader stops reading, so the client's writes block, as on a socket.

Waiting lines are kept rather than the reader stopping at once because frames behind them
may be the ones the running requests wait for: a ``session/cancel``, the answer to a
``session/request_permission`` (`trio_acp.rpc._peer` decides what to do when even the
waiting room is full).
"""

from __future__ import annotations

from collections import deque
from typing import Literal

__all__ = ["Admission"]


class Admission:
    """Counts running requests and keeps the waiting ones' lines, first in first out."""

    def __init__(self, *, max_running: int, max_waiting: int, max_waiting_bytes: int) -> None:
        if max_running < 1 or max_waiting < 0 or max_waiting_bytes < 0:
            raise ValueError("max_running must be positive, the waiting limits not negative")
        self.max_running = max_running
        self.max_waiting = max_waiting
        self.max_waiting_bytes = max_waiting_bytes
        self.running = 0
        self._waiting: deque[bytes] = deque()
        self._waiting_bytes = 0

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def offer(self, line: bytes) -> Literal["run", "wait", "full"]:
        """A request was read. ``run``: start it now (counted as running); ``wait``: its
        line is kept until `finished` hands it out; ``full``: neither, nothing kept."""
        if self.running < self.max_running and not self._waiting:
            self.running += 1
            return "run"
        if not self.has_room(len(line)):
            return "full"
        self._waiting.append(line)
        self._waiting_bytes += len(line)
        return "wait"

    def has_room(self, size: int = 0) -> bool:
        """Whether a request of `size` bytes could be run or kept now. An empty waiting
        room always takes one line, however long (a frame is at most the framing's
        maximum), so no single request is refused for its size alone."""
        if self.running < self.max_running and not self._waiting:
            return True
        if not self._waiting:
            return self.max_waiting > 0
        return (
            len(self._waiting) < self.max_waiting
            and self._waiting_bytes + size <= self.max_waiting_bytes
        )

    def finished(self) -> bytes | None:
        """A running request finished: the line of the waiting request that runs in its
        place (counted as running), or None."""
        if self._waiting:
            line = self._waiting.popleft()
            self._waiting_bytes -= len(line)
            return line
        self.running -= 1
        return None

    def take_all(self) -> list[bytes]:
        """Every waiting line, now counted as running (the connection is closing: each is
        answered at once, ``-32800``)."""
        lines = list(self._waiting)
        self._waiting.clear()
        self._waiting_bytes = 0
        self.running += len(lines)
        return lines
