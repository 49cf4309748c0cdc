"""Interrupting a run: fast tests on the loop thread, no SDK."""

from __future__ import annotations

import asyncio

import trio

from trio_acp.openhands.conversation import _FutureRun
from trio_acp.openhands.loop_thread import LoopThread, wait_done
from trio_acp.openhands.turn import interrupt_until_done


class _Conversation:
    """Just what interrupting touches."""

    agent = None

    def __init__(self) -> None:
        self.interrupts = 0

    async def interrupt(self) -> None:
        self.interrupts += 1

    async def stop_tools(self) -> None:
        pass


async def test_interrupting_a_run_that_ended_cancelled_is_not_an_error():
    # A cancel can land before `arun()` has registered its task: the SDK then cancels the
    # asyncio task outright and the run's future ends *cancelled*. Waiting for the run to
    # be over must take that as "over" — it used to raise CancelledError out of the
    # interrupt loop and answer the prompt -32603 (seen in the cancel soak, 2 in 1,000).
    loop = LoopThread("test-interrupt")
    try:

        async def forever() -> None:
            await asyncio.sleep(3600)

        fut = loop.submit(forever)
        fut.cancel()
        with trio.fail_after(5):
            await wait_done(fut)
        conv = _Conversation()
        fut = loop.submit(forever)
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(interrupt_until_done, conv, _FutureRun(fut))
                await trio.sleep(0.05)
                fut.cancel()  # the run ends cancelled while we interrupt it
        assert conv.interrupts >= 1
    finally:
        loop.stop()
