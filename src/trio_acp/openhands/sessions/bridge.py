"""Handing items from the SDK's threads to a Trio task, never blocking the sender.

SDK callbacks run in the SDK's worker thread *while it holds the conversation's state
lock* (docs/ARCHITECTURE.md#d4-the-sdks-threads-never-wait-on-trio), and cancelling a
turn needs that lock. A callback that waited on
Trio while Trio waited on the lock would deadlock, so `post()` only appends to a deque
and, at most once per batch, schedules a wake-up with `TrioToken.run_sync_soon` (about
10-16 µs, never waits). `trio.from_thread.run_sync` would wait for the Trio loop on every
call (≈200 µs measured): fine per event, far too slow per token.

The Trio side drains everything queued since the last wake-up in one batch, which is
where token chunks get coalesced under load. While it cannot drain (its client reads
nothing), a post may merge into the item before it instead of adding one
(`post(item, merge=...)`, token_backlog.py): what waits stays bounded by its content.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

import trio


class Flush:
    """A marker: the Trio side sets `done` once every item posted before it is handled.

    `payload` is for the consumer (e.g. "this turn is over"): it acts on it in order,
    between the items posted before and after the marker.
    """

    __slots__ = ("done", "payload")

    def __init__(self, payload: object = None) -> None:
        self.done = trio.Event()
        self.payload = payload


class ThreadBridge[T]:
    """A many-producer (any thread), one-consumer (a Trio task) queue that never blocks:
    of `T` items (the outbox's: bridge_items.py), and its own `Flush` markers."""

    def __init__(self, token: trio.lowlevel.TrioToken | None = None) -> None:
        self._token = token or trio.lowlevel.current_trio_token()
        self._items: collections.deque[T | Flush] = collections.deque()
        self._event = trio.Event()
        # True from the post that scheduled a wake-up until the consumer next goes to
        # sleep: while it is awake (sending the last batch), what is posted gathers for
        # its next receive_batch and needs no wake-up of its own, so a busy consumer costs
        # the posting thread no run_sync_soon at all. A stale read only ever causes one
        # extra wake-up.
        self._wake_pending = False
        self._closed = False
        # Taken by a post that merges (never by a plain one) and by the consumer as it
        # takes the items, so that the item merged into is not taken meanwhile. Held for
        # microseconds: a post still never waits on Trio.
        self._merging = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def post(
        self,
        item: T | Flush,
        merge: Callable[[T | Flush, T | Flush], bool] | None = None,
        *,
        merge_after: int = 0,
    ) -> None:
        """Queue `item`. Safe from any thread, including the Trio thread; never blocks.

        With `merge`, once more than `merge_after` items wait, `merge(last, item)` may
        fold `item` into the last waiting item instead (True: folded, nothing added).
        """
        if self._closed:
            return
        if merge is not None and len(self._items) > merge_after:
            with self._merging:
                if self._items and merge(self._items[-1], item):
                    return  # the consumer will take it with the item it joined
                self._items.append(item)
        else:
            self._items.append(item)
        if not self._wake_pending:
            self._wake_pending = True
            try:
                self._token.run_sync_soon(self._wake, idempotent=True)
            except trio.RunFinishedError:
                # The Trio run is over (shutdown): nobody is left to read this.
                self._closed = True

    def _wake(self) -> None:
        self._event.set()

    async def receive_batch(self) -> list[T | Flush]:
        """Wait for at least one item, then return everything queued, in order."""
        while not self._items:
            # About to sleep: from now on a post must wake us. A post made between the
            # check above and this line saw the flag still set: look once more.
            self._wake_pending = False
            if self._items:
                break
            await self._event.wait()
            self._event = trio.Event()
        items: list[T | Flush] = []
        popleft = self._items.popleft
        with self._merging:
            while self._items:
                items.append(popleft())
        return items

    async def flush(self, payload: object = None) -> None:
        """Return once everything posted before this call has been handled by the consumer."""
        if self._closed:
            return
        marker = Flush(payload)
        self.post(marker)
        await marker.done.wait()

    def close(self) -> None:
        self._closed = True
        # Whoever waits on a flush must not wait for a consumer that is gone.
        while self._items:
            item = self._items.popleft()
            if isinstance(item, Flush):
                item.done.set()
