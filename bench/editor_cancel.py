"""`python -m bench.editor_cancel [--runs 50]`: cancel latency while a tool waits on the editor.

Two cases, each over an in-process editor (`trio_acp.testing.editor`, the real rpc stack
over a memory stream, real processes for terminals):

* `fs/write_text_file` pending (the editor never answers, e.g. a review left open): from
  the turn's cancel (`ClientCalls.cancel_turn_and_wait`) to the tool thread released, and
  to the cancel being done;
* `sleep 30` in an editor terminal (`terminal/wait_for_exit` pending): from the cancel to
  the tool thread released (its observation), and to `terminal/kill` + `terminal/release`
  answered.

This is the editor-workspace part of a cancel, not a whole turn (the session's interrupt
of the SDK comes on top: `python -m bench agent`). Prints p50/p99 in ms; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import trio

from trio_acp.openhands.editor.client_calls import ClientCallError, ClientCalls
from trio_acp.openhands.editor.files import EditorFiles
from trio_acp.testing.editor import SESSION, EditorClient, editor_pair


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def _cancel_write(runs: int) -> tuple[list[float], list[float]]:
    released, done = [], []
    client = EditorClient({"/w/a.py": "x"})
    client.hang = True
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        files = EditorFiles.for_client(calls, proxy, SESSION)
        for _ in range(runs):
            calls.begin_turn()
            client.received = trio.Event()
            ended: list[float] = []

            def tool() -> None:
                try:
                    files.write("/w/a.py", "y")
                except ClientCallError:
                    ended.append(time.perf_counter())

            async with trio.open_nursery() as inner:
                inner.start_soon(trio.to_thread.run_sync, tool)
                await client.received.wait()
                t0 = time.perf_counter()
                await calls.cancel_turn_and_wait()
                done.append(time.perf_counter() - t0)
            released.append(ended[0] - t0)
        calls.close()
    return released, done


async def _cancel_terminal(runs: int) -> tuple[list[float], list[float]]:
    from openhands.tools.terminal.definition import TerminalAction

    from trio_acp.openhands.editor.terminal import make_executor

    released, done = [], []
    client = EditorClient()
    calls = ClientCalls()
    with tempfile.TemporaryDirectory() as cwd:
        async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
            await nursery.start(calls.run)
            executor = make_executor(calls, proxy, SESSION, cwd)
            for _ in range(runs):
                calls.begin_turn()
                before = len(client.calls)
                ended: list[float] = []

                def tool() -> None:
                    executor(TerminalAction(command="sleep 30"))
                    ended.append(time.perf_counter())

                async with trio.open_nursery() as inner:
                    inner.start_soon(trio.to_thread.run_sync, tool)
                    while "terminal/wait_for_exit" not in [m for m, _ in client.calls[before:]]:
                        await trio.sleep(0.005)
                    t0 = time.perf_counter()
                    await calls.cancel_turn_and_wait()
                    done.append(time.perf_counter() - t0)
                released.append(ended[0] - t0)
            calls.close()
    return released, done


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    results = {}
    for name, fn in (
        ("fs/write_text_file pending", _cancel_write),
        ("terminal command (sleep 30)", _cancel_terminal),
    ):
        released, done = trio.run(fn, args.runs)
        results[name] = {
            "thread released p50 ms": round(statistics.median(released) * 1000, 2),
            "thread released p99 ms": round(_pct(released, 0.99) * 1000, 2),
            "cancel done p50 ms": round(statistics.median(done) * 1000, 2),
            "cancel done p99 ms": round(_pct(done, 0.99) * 1000, 2),
        }
    print(json.dumps({"runs": args.runs, "load": os.getloadavg()[0], "results": results}, indent=2))


if __name__ == "__main__":
    main()
