"""An asyncio event loop in a thread of its own, awaited from Trio without blocking it.

The SDK's synchronous `run()` can only stop between steps; `arun()` + `interrupt()`
aborts an in-flight LLM stream or tool call within milliseconds
(docs/ARCHITECTURE.md#d9-arun-on-a-private-asyncio-loop-thread). So each
session runs its conversation's `arun()` on a private asyncio loop thread, and Trio waits
for the result through a done-callback that wakes it with `run_sync_soon`: no Trio worker
thread sits blocked on a future, and a Trio cancellation never abandons the SDK mid-step.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            # Let tasks still pending (e.g. an interrupted run's cleanup) see a closed loop
            # rather than leak: cancel them and give them one pass to finish.
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    @property
    def ident(self) -> int | None:
        """The thread's id (what `logging.LogRecord.thread` says of what runs on it)."""
        return self._thread.ident

    def submit(self, fn: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(_call(fn), self._loop)

    def stop(self) -> None:
        """Ask the loop to stop; returns at once (the thread is a daemon)."""
        if not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._loop.stop)
            except RuntimeError:
                pass


async def _call[T](fn: Callable[[], Awaitable[T]]) -> T:
    return await fn()


async def wait_future[T](fut: concurrent.futures.Future[T]) -> T:
    """Wait in Trio for a concurrent future, without a blocked worker thread; its result.

    Cancelling the waiting Trio task does not cancel the future: the caller decides how
    to stop the work (e.g. `Conversation.interrupt()`) and waits again.
    """
    await wait_done(fut)
    return fut.result()


async def wait_done(fut: concurrent.futures.Future[Any]) -> None:
    """Wait until the future is done, however it ended (result, error or cancelled).

    For a caller that only needs the work to be over — e.g. interrupting a run, where the
    run's own outcome (even a cancelled future) is someone else's to report.
    """
    if fut.done():
        return
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()

    def wake(_: Any) -> None:
        try:
            token.run_sync_soon(done.set)
        except trio.RunFinishedError:
            pass

    fut.add_done_callback(wake)
    await done.wait()
