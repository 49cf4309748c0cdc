"""The thread → Trio handoff: never blocks the sender, loses nothing, keeps order."""

from __future__ import annotations

import threading

import trio
import trio.lowlevel
import trio.testing

from trio_acp.openhands.backends.loop_thread import LoopThread, wait_future
from trio_acp.openhands.sessions.bridge import Flush, ThreadBridge


async def _drain(bridge: ThreadBridge, n: int) -> list:
    got: list = []
    while len(got) < n:
        for item in await bridge.receive_batch():
            if isinstance(item, Flush):
                item.done.set()
            else:
                got.append(item)
    return got


async def test_items_from_many_threads_all_arrive_in_per_thread_order():
    bridge = ThreadBridge()
    per_thread = 5_000

    def produce(tag: int) -> None:
        for i in range(per_thread):
            bridge.post((tag, i))

    threads = [threading.Thread(target=produce, args=(t,)) for t in range(4)]
    async with trio.open_nursery() as nursery:
        result: dict = {}

        async def consume():
            result["items"] = await _drain(bridge, 4 * per_thread)

        nursery.start_soon(consume)
        for t in threads:
            t.start()
        await trio.to_thread.run_sync(lambda: [t.join() for t in threads])
    items = result["items"]
    assert len(items) == 4 * per_thread
    for tag in range(4):
        assert [i for t, i in items if t == tag] == list(range(per_thread))


async def test_batches_coalesce_a_burst():
    bridge = ThreadBridge()
    for i in range(1000):
        bridge.post(i)  # from the Trio thread itself, which the SDK also does
    batch = await bridge.receive_batch()
    assert batch == list(range(1000))


async def test_flush_waits_for_everything_posted_before_it():
    bridge = ThreadBridge()
    handled: list = []

    async def consumer():
        while True:
            for item in await bridge.receive_batch():
                if isinstance(item, Flush):
                    item.done.set()
                else:
                    await trio.lowlevel.checkpoint()  # a slow consumer
                    handled.append(item)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consumer)
        await trio.to_thread.run_sync(lambda: [bridge.post(i) for i in range(300)])
        await bridge.flush()
        assert handled == list(range(300))
        nursery.cancel_scope.cancel()


async def test_post_after_close_or_after_the_run_is_dropped_silently():
    bridge = ThreadBridge()
    bridge.close()
    bridge.post("late")  # never raises
    await bridge.flush()  # returns at once when closed


def test_post_after_trio_run_finished_never_raises():
    holder = {}

    async def main():
        holder["bridge"] = ThreadBridge()

    trio.run(main)
    holder["bridge"].post("after the run")  # RunFinishedError is swallowed


async def test_loop_thread_result_and_exception_reach_trio():
    loop = LoopThread("test-loop")
    try:

        async def ok():
            return 42

        async def boom():
            raise ValueError("boom")

        assert await wait_future(loop.submit(ok)) == 42
        try:
            await wait_future(loop.submit(boom))
        except ValueError as exc:
            assert str(exc) == "boom"
        else:
            raise AssertionError("expected ValueError")
    finally:
        loop.stop()


async def test_close_releases_a_flush_that_nobody_will_consume():
    bridge = ThreadBridge()
    async with trio.open_nursery() as nursery:
        done = trio.Event()

        async def flusher():
            await bridge.flush()  # no consumer is running
            done.set()

        nursery.start_soon(flusher)
        await trio.sleep(0.01)
        assert not done.is_set()
        bridge.close()
        with trio.fail_after(5):
            await done.wait()


class _CountingToken:
    """A TrioToken that counts the wake-ups scheduled through it."""

    def __init__(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self.calls = 0

    def run_sync_soon(self, fn, *args, idempotent: bool = False) -> None:
        self.calls += 1
        self.token.run_sync_soon(fn, *args, idempotent=idempotent)


async def test_posts_while_the_consumer_is_busy_schedule_no_wake_up():
    token = _CountingToken()
    bridge = ThreadBridge(token)  # type: ignore[arg-type]
    bridge.post(0)
    assert token.calls == 1
    await trio.testing.wait_all_tasks_blocked()  # the wake-up has run
    assert await bridge.receive_batch() == [0]
    # The consumer is awake (sending what it got): these gather for its next drain, and
    # the posting thread pays no run_sync_soon for them.
    await trio.to_thread.run_sync(lambda: [bridge.post(i) for i in range(1, 101)])
    assert token.calls == 1
    assert await bridge.receive_batch() == list(range(1, 101))
    # Once the consumer waits again, a post wakes it, and nothing is lost.
    async with trio.open_nursery() as nursery:
        got: list = []

        async def consume() -> None:
            got.extend(await bridge.receive_batch())

        nursery.start_soon(consume)
        await trio.testing.wait_all_tasks_blocked()
        await trio.to_thread.run_sync(bridge.post, 101)
    assert got == [101]
    assert token.calls == 2
