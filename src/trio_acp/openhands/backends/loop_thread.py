"""An asyncio event loop in a thread of its own, awaited from Trio without blocking it.

The SDK's synchronous `run()` can only stop between steps; `arun()` + `interrupt()`
aborts an in-flight LLM stream or tool call within milliseconds
(docs/ARCHITECTURE.md#d9-arun-on-a-private-asyncio-loop-thread). So each
session runs its conversation's `arun()` on a private asyncio loop thread, and Trio waits
for the result through a done-callback that wakes it with `run_sync_soon`: no Trio worker
thread sits blocked on a future, and a Trio cancellation never abandons the SDK mid-step.

litellm caches its HTTP clients (an `AsyncOpenAI`, an httpx client over aiohttp, with their
connection pools) per event loop: the cache key ends with the loop's `id()`. A closed
session's loop never runs again, but its clients stayed cached until litellm's TTL (10
minutes) or its 200-entry bound evicted them, ~0.2 MiB each (bench/README.md, "Many sessions
at once"), and a later loop given the same `id()` would have been handed them. When the
loop stops, `_drop_llm_clients` takes this loop's entries out of the cache and closes them,
on this loop, before it closes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

T = TypeVar("T")

log = logging.getLogger(__name__)


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
            self._loop.run_until_complete(_drop_llm_clients(id(self._loop)))
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


async def _drop_llm_clients(loop_id: int) -> None:
    """Remove from litellm's client cache the clients made for the loop `loop_id` (this
    one, about to close) and close them (see the module's docstring)."""
    litellm = sys.modules.get("litellm")  # never imported here: no model call, no clients
    cache = getattr(litellm, "in_memory_llm_clients_cache", None)
    entries = getattr(cache, "cache_dict", None)
    ttls = getattr(cache, "ttl_dict", None)
    if not isinstance(entries, dict) or not isinstance(ttls, dict):
        return
    suffix = f"-{loop_id}"
    for key in [k for k in list(entries) if isinstance(k, str) and k.endswith(suffix)]:
        # Popped, not `delete_cache`d: litellm would queue the client to be closed later,
        # on a loop that will be gone; it is closed here, now, on its own loop.
        client = entries.pop(key, None)
        ttls.pop(key, None)
        close = getattr(client, "aclose", None) or getattr(client, "close", None)
        if not callable(close):
            continue
        try:
            result = close()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.debug("closing the cached LLM client %s failed", key, exc_info=True)


async def _call[T](fn: Callable[[], Awaitable[T]]) -> T:
    return await fn()


async def wait_future[T](fut: concurrent.futures.Future[T]) -> T:
    """Wait in Trio for a concurrent future, without a blocked worker thread; its result.

    Cancelling the waiting Trio task does not cancel the future: the caller decides how
    to stop the work (e.g. `Conversation.interrupt()`) and waits again.
    """
    await wait_done(fut)
    return fut.result()


async def wait_done[T](fut: concurrent.futures.Future[T]) -> None:
    """Wait until the future is done, however it ended (result, error or cancelled).

    For a caller that only needs the work to be over — e.g. interrupting a run, where the
    run's own outcome (even a cancelled future) is someone else's to report.
    """
    if fut.done():
        return
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()

    def wake(_: object) -> None:
        try:
            token.run_sync_soon(done.set)
        except trio.RunFinishedError:
            pass

    fut.add_done_callback(wake)
    await done.wait()
