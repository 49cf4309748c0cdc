"""A session's prompt turns, in the order the client sent them; one runs at a time.

Two rules clients rely on, and neither may depend on how Trio happens to schedule the
request tasks (it deliberately shuffles them):

- `session/cancel` ends every turn the client sent *before* it — running or still
  queued — and none sent after it. A prompt and its cancel often arrive in one read (a
  user pressing Esc at once, a client pipelining), before the prompt's task has even
  started. So prompts are registered (`received`) by the connection's reader, in wire
  order, synchronously; the cancel notification, handled by the same reader in wire
  order, then finds every prompt that preceded it.
- A prompt sent while a turn runs is queued, not refused, and turns run in the order they
  were received (FIFO), each answered with its own response.

Each prompt's ticket carries its own cancel event; the running turn watches its ticket's
event, so "cancel everything received so far" is simply: set every ticket's event.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

import trio


class Ticket:
    """One prompt's place in the queue."""

    __slots__ = ("cancelled", "key")

    def __init__(self, key: Hashable | None) -> None:
        # The JSON-RPC request id of the prompt (in-flight ids are unique per connection),
        # or None for a prompt that was not registered by the reader.
        self.key = key
        self.cancelled = trio.Event()


class TurnQueue:
    def __init__(self) -> None:
        self._waiting: deque[Ticket] = deque()
        self._running: Ticket | None = None
        self._lot = trio.lowlevel.ParkingLot()
        self._idle = trio.Event()
        self._idle.set()

    @property
    def busy(self) -> bool:
        """A turn runs, or a prompt waits for its turn."""
        return self._running is not None or bool(self._waiting)

    @property
    def running(self) -> Ticket | None:
        return self._running

    @property
    def waiting(self) -> int:
        """Prompts received and not yet running."""
        return len(self._waiting)

    def received(self, key: Hashable | None) -> Ticket:
        """Register a prompt the moment it is read (synchronous; wire order)."""
        ticket = Ticket(key)
        self._waiting.append(ticket)
        self._changed()
        return ticket

    def claim(self, key: Hashable | None) -> Ticket:
        """The ticket the reader registered for this prompt, or a new one at the end."""
        if key is not None:
            for ticket in self._waiting:
                if ticket.key == key:
                    return ticket
        return self.received(key)

    def forget(self, key: Hashable | None) -> None:
        """Drop a registered prompt that will never be served (its request failed early)."""
        for ticket in list(self._waiting):
            if key is not None and ticket.key == key:
                self.release(ticket)

    def cancel_all(self) -> None:
        """session/cancel: every turn received so far ends `cancelled` (synchronous)."""
        for ticket in self._waiting:
            ticket.cancelled.set()
        if self._running is not None:
            self._running.cancelled.set()
        self._lot.unpark_all()

    def cancel(self, ticket: Ticket) -> None:
        """This prompt alone ends `cancelled` (its request was cancelled); synchronous."""
        ticket.cancelled.set()
        self._lot.unpark_all()

    async def wait_turn(self, ticket: Ticket) -> bool:
        """Wait until `ticket` may run: True, or False if it was cancelled first.

        A cancelled ticket stays in the queue until `release`; tickets ahead of us that
        were cancelled do not hold us up.
        """
        while True:
            if ticket.cancelled.is_set():
                return False
            if self._running is None and self._first_live() is ticket:
                self._waiting.remove(ticket)
                self._running = ticket
                return True
            await self._lot.park()

    def release(self, ticket: Ticket) -> None:
        """The prompt is answered (or will be at once): let the next one run.

        Synchronous on purpose: called last, right before the response is queued, so no
        update of the next turn can reach the wire ahead of this turn's response.
        """
        if self._running is ticket:
            self._running = None
        else:
            try:
                self._waiting.remove(ticket)
            except ValueError:
                pass
        self._changed()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def _first_live(self) -> Ticket | None:
        for ticket in self._waiting:
            if not ticket.cancelled.is_set():
                return ticket
        return None

    def _changed(self) -> None:
        if self.busy:
            if self._idle.is_set():
                self._idle = trio.Event()
        else:
            self._idle.set()
        self._lot.unpark_all()
