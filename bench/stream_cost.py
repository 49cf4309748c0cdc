"""`python -m bench.stream_cost`: our own CPU per streamed token, without the SDK or a model.

The agent's streaming path from the SDK's token callback on, with real litellm chunks:

    producer thread (stands in for the SDK's thread: `--spin-us` of busy work per chunk,
    holding the GIL as litellm's stream wrapper does, then `Outbox.post_token`)
      → ThreadBridge → Outbox.pump (Translator.token, coalesce, UpdateMask)
      → ClientProxy.session_update (schema.to_wire, orjson) → Peer → a real pipe → `cat`

Printed per token: the Trio thread's CPU (all of it is ours), the producer's CPU beyond its
spin (`post_token`: ours, in the SDK's thread), the wall time beyond the spin (what the
stream's pace loses to us, GIL hand-offs included), and the updates the coalescing made.
The chunks are `litellm.types.utils.ModelResponseStream` objects built up front, so
litellm's own cost is not in these figures: `python -m bench agent` measures the whole.

Runs against whatever `trio_acp` the interpreter imports, so the same file measures another
checkout: `/path/to/other/.venv/bin/python bench/stream_cost.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _chunks(tokens: int) -> tuple[list[Any], str]:
    from litellm.types.utils import Delta, ModelResponseStream, StreamingChoices

    text = "".join(f"w{i % 997:03d}" for i in range(tokens))  # 4 characters per token
    chunks = [
        ModelResponseStream(
            id="chatcmpl-bench",
            choices=[StreamingChoices(index=0, delta=Delta(content=text[i : i + 4]))],
        )
        for i in range(0, len(text), 4)
    ]
    return chunks, text


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _run(chunks: list[Any], spin_s: float, journal: bool = False) -> dict[str, Any]:
    import trio

    sink = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    assert sink.stdin is not None
    try:
        return trio.run(_drive, chunks, spin_s, os.dup(sink.stdin.fileno()), journal)
    finally:
        sink.stdin.close()
        sink.wait()


async def _drive(chunks: list[Any], spin_s: float, sink_fd: int, journal: bool) -> dict[str, Any]:
    import tempfile
    from pathlib import Path

    import trio
    import trio.testing

    from trio_acp.connection._agent_side import ClientProxy
    from trio_acp.credentials import SecretValues, UpdateMask
    from trio_acp.openhands.sessions.outbox import Outbox
    from trio_acp.openhands.translate import Translator
    from trio_acp.rpc import open_peer

    read_end, write_end = os.pipe()  # the peer's input: never written, never EOF
    stream = trio.StapledStream(trio.lowlevel.FdStream(sink_fd), trio.lowlevel.FdStream(read_end))

    class Handler:
        async def handle_request(self, method: str, params: Any) -> Any:
            return None

        async def handle_notification(self, method: str, params: Any) -> None:
            pass

    sent = {"updates": 0}
    producer: dict[str, float] = {}
    try:
        async with open_peer(stream, Handler()) as peer:
            client = ClientProxy(peer)

            async def send_update(update: Any, *, at_once: bool = False) -> None:
                sent["updates"] += 1
                await client.session_update(session_id="bench", update=update, at_once=at_once)

            outbox = Outbox(Translator("/"), UpdateMask(SecretValues()), send_update)
            scratch = tempfile.TemporaryDirectory()
            if journal:  # as a local session has it (journal.py)
                from trio_acp.openhands.sessions.journal import TurnJournal

                outbox.journal = TurnJournal(Path(scratch.name) / "trio_acp_turn.jsonl")
            outbox.begin_turn(1)

            def produce() -> None:
                post = outbox.post_token
                clock = time.thread_time
                cpu = 0.0
                for chunk in chunks:
                    _spin(spin_s)
                    c = clock()
                    post(chunk)
                    cpu += clock() - c
                producer["cpu"] = cpu

            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.pump)
                await trio.testing.wait_all_tasks_blocked()
                c0, t0, p0 = time.thread_time(), time.perf_counter(), time.process_time()
                thread = threading.Thread(target=produce, name="bench-producer")
                thread.start()
                await trio.to_thread.run_sync(thread.join)
                await outbox.end_turn(1, None, within=60)  # everything translated and queued
                if outbox.journal is not None:
                    await outbox.journal.aclose()  # and written
                c1, t1, p1 = time.thread_time(), time.perf_counter(), time.process_time()
                nursery.cancel_scope.cancel()
            scratch.cleanup()
    finally:
        os.close(write_end)
    n = len(chunks)
    return {
        "trio_cpu_us": (c1 - c0) * 1e6 / n,
        "post_cpu_us": producer["cpu"] * 1e6 / n,
        "wall_over_spin_us": ((t1 - t0) - n * spin_s) * 1e6 / n,
        # Every thread of the process beyond the producer's spin (the journal's writer too).
        "process_cpu_us": ((p1 - p0) - n * spin_s) * 1e6 / n,
        "updates": sent["updates"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument(
        "--spin-us", type=float, default=300, help="producer's busy work per chunk (µs)"
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument(
        "--journal", action="store_true", help="with a session's turn journal (journal.py)"
    )
    args = parser.parse_args()

    chunks, _ = _chunks(args.tokens)
    _run(chunks[:500], args.spin_us / 1e6, args.journal)  # warm-up
    runs = [_run(chunks, args.spin_us / 1e6, args.journal) for _ in range(args.runs)]
    keys = ("trio_cpu_us", "post_cpu_us", "wall_over_spin_us", "process_cpu_us", "updates")
    summary = {key: statistics.median(run[key] for run in runs) for key in keys}
    summary["load"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"runs": runs, "median": summary}))
        return
    print(
        f"{args.tokens:,} real litellm chunks, producer spins {args.spin_us:g} µs per chunk; "
        f"median of {args.runs} runs (load average {summary['load']:.1f}):"
    )
    print(
        f"  Trio thread CPU {summary['trio_cpu_us']:.1f} µs/token; post_token in the producer "
        f"{summary['post_cpu_us']:.1f} µs/token; wall beyond the spin "
        f"{summary['wall_over_spin_us']:.1f} µs/token; {summary['updates']:,.0f} updates"
    )
    print(
        f"  the whole process beyond the spin {summary['process_cpu_us']:.1f} µs/token"
        + (" (with the turn journal)" if args.journal else "")
    )


if __name__ == "__main__":
    sys.exit(main())
