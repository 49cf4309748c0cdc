"""`python -m bench.editor_cancel_session [--runs 50]`: cancel latency through a session while a
tool waits on the editor — the whole path: session/cancel → `cancelled` response.

The real agent (`open_openhands_agent`, the SDK, the scripted model) and an in-process editor
(`trio_acp.testing.editor.EditorClient`: fs/* over buffers, terminals as real processes) talk
over the real rpc stack on a memory stream. One session, `runs` turns per case:

* `sleep 30` in an editor terminal: the cancel is sent once `terminal/wait_for_exit` is
  pending; measured to the `cancelled` response, and whether `terminal/kill` +
  `terminal/release` reached the editor before it;
* `fs/write_text_file` pending (the editor holds the write, as a review left open would):
  the cancel is sent once the write arrived; measured to the `cancelled` response.

Prints p50/p99 in ms, and the machine's load; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.editor import EditorClient
from trio_acp.testing.pair import open_in_memory_pair


class HoldingEditor(EditorClient):
    """Holds every fs/write_text_file until it is cancelled (a review left open)."""

    def __init__(self, buffers: dict[str, str]) -> None:
        super().__init__(buffers)
        self.write_pending = trio.Event()

    async def write_text_file(self, params: Any) -> Any:
        self.calls.append(("fs/write_text_file", params.path))
        self.write_pending.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.cancelled.append("fs/write_text_file")
            raise


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _figures(values: list[float]) -> dict[str, float]:
    return {
        "p50 ms": round(statistics.median(values) * 1000, 1),
        "p99 ms": round(_pct(values, 0.99) * 1000, 1),
        "max ms": round(max(values) * 1000, 1),
    }


async def _wait_until(predicate: Any, timeout: float = 60) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.002)


async def run(runs: int, env: dict[str, str], workdir: Path) -> dict[str, Any]:
    path = workdir / "held.py"
    path.write_text("value = 'disk'\n")
    client = HoldingEditor({str(path): "value = 'buffer'\n"})
    results: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        client._nursery = nursery
        async with (
            open_openhands_agent(env=env) as agent,
            open_in_memory_pair(agent, client) as (_, conn),
        ):
            await conn.agent.initialize(
                protocol_version=1, client_capabilities=client.capabilities()
            )
            sid = (await conn.agent.new_session(cwd=str(workdir), mcp_servers=[])).session_id

            async def cancelled_turn(text: str, ready: Any) -> tuple[float, list[str]]:
                before = len(client.calls)
                out: dict[str, Any] = {}

                async def prompt() -> None:
                    out["response"] = await conn.agent.prompt(
                        session_id=sid, prompt=[schema.TextContent(text=text)]
                    )
                    out["at"] = time.perf_counter()
                    out["calls"] = client.methods()[before:]

                async with trio.open_nursery() as inner:
                    inner.start_soon(prompt)
                    await _wait_until(lambda: ready(client.methods()[before:]))
                    await trio.sleep(0.05)  # the tool thread is waiting on the editor
                    t0 = time.perf_counter()
                    await conn.agent.cancel(session_id=sid)
                assert out["response"].stop_reason == "cancelled", out["response"]
                return out["at"] - t0, out["calls"]

            sleep_prompt = scenario_prompt("sleep", "", seconds=30)
            latencies, cleaned = [], 0
            for _ in range(runs):
                took, calls = await cancelled_turn(
                    sleep_prompt, lambda m: "terminal/wait_for_exit" in m
                )
                latencies.append(took)
                cleaned += "terminal/kill" in calls and "terminal/release" in calls
            results["sleep 30 in an editor terminal"] = {
                **_figures(latencies),
                "kill + release before the response": f"{cleaned}/{runs}",
            }

            review = scenario_prompt("review", "", path=str(path), old="'buffer'", new="'new'")
            latencies = []
            for _ in range(runs):
                client.write_pending = trio.Event()
                took, _calls = await cancelled_turn(review, lambda m: "fs/write_text_file" in m)
                latencies.append(took)
            results["fs/write_text_file pending"] = {
                **_figures(latencies),
                "disk untouched": path.read_text() == "value = 'disk'\n",
            }
        nursery.cancel_scope.cancel()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    with ScriptedLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=str(Path(tmp) / "home"),
            LLM_NUM_RETRIES="1",
            LLM_TIMEOUT="30",
            TRIO_ACP_DEFAULT_MODE="always-approve",
        )
        workdir = Path(tmp) / "ws"
        workdir.mkdir()
        started = time.perf_counter()
        results = trio.run(run, args.runs, env, workdir.resolve())
    print(
        json.dumps(
            {
                "runs": args.runs,
                "load": round(os.getloadavg()[0], 2),
                "seconds": round(time.perf_counter() - started, 1),
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
