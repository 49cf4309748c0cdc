"""The handles `LocalConversation` (local_conversation.py) gives out and keeps: a run on the
conversation's loop thread (`FutureRun`, the `Run` of conversation.py) and a message on its
way into the conversation on a thread of its own (`Landing`: sends land in order)."""

from __future__ import annotations

import concurrent.futures
import threading

import trio

from trio_acp.openhands.backends.loop_thread import wait_done, wait_future


class FutureRun:
    def __init__(self, fut: concurrent.futures.Future[None]) -> None:
        self._fut = fut

    def done(self) -> bool:
        return bool(self._fut.done())

    async def outcome(self) -> BaseException | None:
        try:
            await wait_future(self._fut)
        except Exception as exc:
            return exc
        return None

    async def wait_done(self) -> None:
        # Only that the run is over: a run cancelled outright (interrupted before it
        # started) ends with a cancelled future, which is not an error here.
        await wait_done(self._fut)


class Landing:
    """A message on its way into the conversation on a thread of its own (`send_message`)."""

    __slots__ = ("cut_short", "done", "error", "landed", "previous", "wake")

    def __init__(self, previous: Landing | None) -> None:
        self.previous = previous  # the send it goes after
        self.landed = threading.Event()  # for the next send's thread
        self.wake = trio.Event()  # for the task waiting here
        self.done = False  # under `_send_lock`
        self.cut_short = False  # under `_send_lock`: its turn was cancelled (note follows)
        self.error: BaseException | None = None
