"""Interrupting a run: fast tests on the loop thread, no SDK."""

from __future__ import annotations

import asyncio
from typing import Any

import trio

from trio_acp.openhands.backends.local_handles import FutureRun
from trio_acp.openhands.backends.loop_thread import LoopThread, wait_done
from trio_acp.openhands.sessions import turn
from trio_acp.openhands.sessions.turn import interrupt_until_done


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
                nursery.start_soon(interrupt_until_done, conv, FutureRun(fut))
                await trio.sleep(0.05)
                fut.cancel()  # the run ends cancelled while we interrupt it
        assert conv.interrupts >= 1
    finally:
        loop.stop()


class _RunEndsDuringInterrupt:
    """A run that the interrupt ends before `interrupt()` itself returns: the SDK's
    `interrupt()` runs in a worker thread that the turn cannot abandon, and the run's end
    can wake the turn first (it then cancels the task that is interrupting)."""

    agent = None

    def __init__(self) -> None:
        self.ended = trio.Event()
        self.tools_stopped = 0

    def start_run(self) -> Any:
        conv = self

        class _Run:
            def done(self) -> bool:
                return conv.ended.is_set()

            async def outcome(self) -> BaseException | None:
                await conv.ended.wait()
                return None

            async def wait_done(self) -> None:
                await conv.ended.wait()

        return _Run()

    async def interrupt(self) -> None:
        with trio.CancelScope(shield=True):  # as a thread that cannot be abandoned
            self.ended.set()
            await trio.sleep(0.1)  # the turn sees the run's end meanwhile

    async def stop_tools(self) -> None:
        await trio.lowlevel.checkpoint()
        self.tools_stopped += 1


async def test_the_tools_are_stopped_even_if_the_run_ends_while_interrupting(autojump_clock):
    # The run ending first used to cancel the interrupting task before it stopped the
    # tools: the sub-agents and the commands the interrupt does not reach kept running.
    conv = _RunEndsDuringInterrupt()
    cancel_event = trio.Event()
    cancel_event.set()  # the user cancelled as the run started
    with trio.fail_after(30):
        outcome = await turn._run_conversation_once(conv, cancel_event, 0, "fake")  # type: ignore[arg-type]
    assert outcome == "cancelled"
    assert conv.tools_stopped == 1
