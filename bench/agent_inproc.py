"""Benchmark driver: the SDK-thread → Trio handoff, in process (no SDK, no litellm, no pipes).

    python -m bench.agent_inproc [--items N] [--paced N] [--gap-us US] [--tokens N]

Normally run by `python -m bench agent`; prints one JSON line.

burst  a plain `threading.Thread` posts `--items` items back to back with
       `ThreadBridge.post()` while a Trio task drains them with `receive_batch()`:
       the post cost per item in the producer thread (its CPU time, and wall time), and
       the drain rate (items handed over per second, first post → last item received).
paced  `--paced` posts `--gap-us` µs apart: the cost of each post() call in the SDK
       thread (its own CPU time; and its wall time, which includes the GIL hand-off when the
       woken Trio thread runs before post() returns). Twice: the producer sleeps between
       posts (the GIL is free, the Trio thread drains every item, so every post schedules
       a wake-up with `run_sync_soon`: the worst case), then it spins (holds the GIL like a
       CPU-bound litellm parsing the next chunk: the Trio thread gets in less often).
pump   the session's real update pump (`Outbox.pump`: bridge → Translator.token →
       coalesce → client.session_update) fed `--tokens` litellm-shaped token chunks from a
       plain thread, back to back: the Trio side's capacity in tokens per second, and how
       many updates coalescing makes of them (the client here is a counter: no JSON).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from types import SimpleNamespace
from typing import Any

import trio

from trio_acp.openhands.sessions.bridge import ThreadBridge
from trio_acp.testing.scenarios import long_text

from ._common import emit, percentile


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def burst(n: int) -> dict[str, Any]:
    bridge = ThreadBridge()
    token_done = threading.Event()
    producer: dict[str, float] = {}

    def produce() -> None:
        post = bridge.post
        c0 = time.thread_time()
        t0 = time.perf_counter()
        for i in range(n):
            post(i)
        producer["wall"] = time.perf_counter() - t0
        producer["cpu"] = time.thread_time() - c0
        token_done.set()

    received = 0
    batches = 0
    ok = True
    expected = 0
    start = time.perf_counter()
    thread = threading.Thread(target=produce, name="bench-producer")
    thread.start()
    while received < n:
        items = await bridge.receive_batch()
        batches += 1
        # Order check, cheaply: the items are 0..n-1 in order.
        if items[0] != expected or items[-1] != expected + len(items) - 1:
            ok = False
        expected += len(items)
        received += len(items)
    end = time.perf_counter()
    thread.join()
    return {
        "items": n,
        "post_cpu_us": producer["cpu"] * 1e6 / n,
        "post_wall_us": producer["wall"] * 1e6 / n,
        "drain_per_s": n / (end - start),
        "seconds": end - start,
        "batches": batches,
        "in_order": ok and received == n,
    }


async def paced(n: int, gap_s: float, *, sleep: bool) -> dict[str, Any]:
    """`sleep`: the producer sleeps between posts (GIL free: the Trio thread drains every
    item, so every post wakes it — the worst case); else it spins (holds the GIL, like a
    CPU-bound litellm: the Trio thread gets in less often, and batches)."""
    bridge = ThreadBridge()
    wait = time.sleep if sleep else _spin
    costs: list[float] = []
    cpu_costs: list[float] = []

    def produce() -> None:
        post = bridge.post
        clock = time.perf_counter_ns
        cpu = time.thread_time_ns
        for i in range(n):
            wait(gap_s)
            c0 = cpu()
            t0 = clock()
            post(i)
            t1 = clock()
            c1 = cpu()
            costs.append((t1 - t0) / 1000)
            cpu_costs.append((c1 - c0) / 1000)

    received = 0
    batches = 0
    thread = threading.Thread(target=produce, name="bench-paced-producer")
    thread.start()
    while received < n:
        items = await bridge.receive_batch()
        batches += 1
        received += len(items)
    thread.join()
    costs.sort()
    cpu_costs.sort()
    return {
        "items": n,
        "gap_us": gap_s * 1e6,
        "producer": "sleeps" if sleep else "spins",
        # Wall time of the call: when it wakes the Trio thread, that thread may take the
        # GIL before post() returns (the wake-up write releases it), so this includes the
        # hand-off. CPU time is the producer thread's own.
        "post_p50_us": percentile(costs, 50),
        "post_p99_us": percentile(costs, 99),
        "post_mean_us": statistics.fmean(costs),
        "post_cpu_p50_us": percentile(cpu_costs, 50),
        "post_cpu_mean_us": statistics.fmean(cpu_costs),
        "batches": batches,
    }


class _CountingClient:
    def __init__(self, expected_chars: int) -> None:
        self.expected_chars = expected_chars
        self.chars = 0
        self.updates = 0
        self.parts: list[str] = []
        self.done = trio.Event()

    async def session_update(self, session_id: str, update: Any) -> None:
        text = update.content.text
        self.parts.append(text)
        self.updates += 1
        self.chars += len(text)
        if self.chars >= self.expected_chars:
            self.done.set()


def _fake_chunks(text: str, size: int) -> list[Any]:
    """litellm `ModelResponseStream`-shaped chunks, as the Translator reads them."""
    chunks = []
    for i in range(0, len(text), size):
        delta = SimpleNamespace(content=text[i : i + size], reasoning_content=None, tool_calls=None)
        chunks.append(
            SimpleNamespace(id="chatcmpl-bench", choices=[SimpleNamespace(index=0, delta=delta)])
        )
    return chunks


async def pump(tokens: int) -> dict[str, Any]:
    from trio_acp.credentials import SecretValues, UpdateMask
    from trio_acp.openhands.sessions.outbox import Outbox
    from trio_acp.openhands.translate import Translator

    text = long_text(tokens)
    chunks = _fake_chunks(text, 4)
    client = _CountingClient(len(text))

    async def send_update(update: Any, *, at_once: bool = False) -> None:
        await client.session_update(session_id=str(uuid.UUID(int=0)), update=update)

    # Just a session's outbox and its pump: no conversation behind it.
    outbox = Outbox(Translator("/"), UpdateMask(SecretValues()), send_update, ThreadBridge())
    outbox.begin_turn(1)
    producer: dict[str, float] = {}

    def produce() -> None:
        post = outbox.post_token
        c0 = time.thread_time()
        for chunk in chunks:
            post(chunk)
        producer["cpu"] = time.thread_time() - c0

    async with trio.open_nursery() as nursery:
        nursery.start_soon(outbox.pump)
        c0 = time.process_time()
        t0 = time.perf_counter()
        thread = threading.Thread(target=produce, name="bench-pump-producer")
        thread.start()
        await client.done.wait()
        t1 = time.perf_counter()
        c1 = time.process_time()
        thread.join()
        nursery.cancel_scope.cancel()
    trio_cpu = (c1 - c0) - producer["cpu"]
    return {
        "tokens": tokens,
        "seconds": t1 - t0,
        "tokens_per_s": tokens / (t1 - t0),
        "updates": client.updates,
        "text_ok": "".join(client.parts) == text,
        "post_cpu_us": producer["cpu"] * 1e6 / tokens,
        "trio_cpu_us": trio_cpu * 1e6 / tokens,
    }


async def drive(args: argparse.Namespace) -> dict[str, Any]:
    await burst(min(args.items, 10_000))  # warm-up
    return {
        "burst": await burst(args.items),
        "paced": await paced(args.paced, args.gap_us / 1e6, sleep=True),
        "paced_spin": await paced(args.paced, args.gap_us / 1e6, sleep=False),
        "pump": await pump(args.tokens),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--paced", type=int, default=2_000)
    parser.add_argument("--gap-us", type=float, default=500.0)
    parser.add_argument("--tokens", type=int, default=20_000)
    args = parser.parse_args()
    emit(trio.run(drive, args))


if __name__ == "__main__":
    main()
