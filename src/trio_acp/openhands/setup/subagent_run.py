"""A sub-agent's run, cut by a cancel mid-model-call (subagents.py).

The SDK's task tool runs a sub-agent's conversation with the blocking `run()` on the
parent's tool thread, where a cancel could only pause it between steps: a model call held
the cancelled turn for up to `subagents.STOP_WAIT`. `run_until_stopped` runs it as the
session runs its own (docs/ARCHITECTURE.md#d9-arun-on-a-private-asyncio-loop-thread).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import LocalConversation, ObservedConversation
    from trio_acp.openhands.setup.subagents import Delegation

log = logging.getLogger(__name__)


def run_until_stopped(conversation: LocalConversation, d: Delegation | None) -> None:
    """The sub-agent's run, as the session's own (docs/ARCHITECTURE.md#d9): `arun()`,
    so a cancel cuts its model call (`Delegation.stop` cancels the task, as the SDK's
    `interrupt()` cancels the session's) instead of waiting for the call's end. On an
    asyncio loop of its own, in the delegating call's thread, which it blocks as the
    SDK's `run()` did; the run's gate (a context variable) is current in the task."""
    loop = asyncio.new_event_loop()

    async def run() -> None:
        task = asyncio.current_task()
        assert task is not None

        def cut() -> None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop is closed: the run is over
                pass

        if d is not None:
            with d.lock:
                if d.stopped.is_set():
                    return
                d.cut_run = cut
        await cast("ObservedConversation", conversation).arun()  # its @observe: sdk/classes.py

    try:
        loop.run_until_complete(run())
    except asyncio.CancelledError:
        pass  # cut before `arun()` took over its own cancellation (it then pauses)
    finally:
        if d is not None:
            with d.lock:
                d.cut_run = None
        # Not `asyncio.run`: its shutdown waits for the executor's threads (D9). What the
        # run left on the loop (litellm's logging worker binds itself to the loop of the
        # last call) is cancelled and given a moment, so nothing is left pending on a
        # closed loop.
        try:
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            if leftovers:
                loop.run_until_complete(asyncio.wait(leftovers, timeout=1.0))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except Exception:
            log.debug("closing a sub-agent's loop", exc_info=True)
        finally:
            loop.close()
