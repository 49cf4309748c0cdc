"""The cancel race of issue 22.1: `session/cancel` 0–50 ms after a tool call is announced.

    python -m bench.cancel_race [--tries 200] [--seed 1] [--max-delay-ms 50] [--stderr FILE]

The agent is spawned as an editor spawns it (`python -m trio_acp`, no client terminal: the
SDK's own shell runs the command), in an always-approve session, and driven with raw
frames. Each try prompts the scripted model's `terminal` scenario with the command
`sleep <unique>; touch <marker>`, waits for the `tool_call` update that announces it, then
sends `session/cancel` after a random 0..`--max-delay-ms` ms. Counted per try: the stop
reason, and whether the command survived the cancel (its `sleep` still running when the
turn answered). At the end, after the commands' own duration has passed: how many markers
were written (a command that ran to its end). Survivors and markers must both be 0. Exit 1
if not, or if a check failed (an answer other than `cancelled`/`end_turn`, no answer).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from typing import Any

import psutil
import trio

from trio_acp.testing import ScriptedLLM, scenario_prompt

from .agent_common import AGENT_COMMAND, agent_env, latency_summary
from .cancel_soak import Agent

TURN_DEADLINE = 60.0
# How long each command sleeps before it writes its marker: short, so that the end of the
# run can wait for every command that survived to have written it.
SLEEP = 3.0


def _sleeping(seconds: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] == ["sleep", seconds]:
            found.append(proc)
    return found


async def race(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    failures: list[str] = []
    with (
        ScriptedLLM() as llm,
        tempfile.TemporaryDirectory() as home,
        tempfile.TemporaryDirectory() as ws,
    ):
        env = agent_env(llm.base_url, home)
        process = await trio.lowlevel.open_process(
            AGENT_COMMAND,
            stdin=-1,
            stdout=-1,
            stderr=open(args.stderr or os.path.join(home, "stderr.log"), "wb"),
            env=env,
        )
        agent = Agent(process)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.read_loop)

            async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
                rid = agent.new_id()
                await agent.write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
                _, frame = await agent.wait_for(lambda: agent.response(rid), 120)
                if "error" in frame:
                    raise RuntimeError(f"{method}: {frame['error']}")
                return frame["result"]

            await request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            sid = (await request("session/new", {"cwd": ws, "mcpServers": []}))["sessionId"]
            await request("session/set_mode", {"sessionId": sid, "modeId": "always-approve"})
            warm = scenario_prompt("terminal", command="echo warm")
            await request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": warm}]}
            )

            outcomes: Counter[str] = Counter()
            survivors: list[int] = []
            delays: list[float] = []
            latencies: list[float] = []
            started = time.monotonic()
            for n in range(args.tries):
                seconds = f"{SLEEP:g}.{n:06d}"
                marker = os.path.join(ws, f"marker-{n}")
                text = scenario_prompt("terminal", command=f"sleep {seconds}; touch {marker}")
                rid = agent.new_id()
                mark = len(agent.frames)
                await agent.write(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "method": "session/prompt",
                        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
                    }
                )

                def announced() -> bool:
                    return any(
                        f.get("method") == "session/update"
                        and f["params"]["update"].get("sessionUpdate") == "tool_call"
                        for _, f in agent.frames[mark:]
                    )

                try:
                    await agent.wait_for(announced, TURN_DEADLINE)
                except trio.TooSlowError:
                    failures.append(f"try {n}: the tool call was never announced")
                    break
                delay = rng.uniform(0, args.max_delay_ms / 1000)
                delays.append(delay)
                await trio.sleep(delay)
                cancelled_at = await agent.write(
                    {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
                )
                try:
                    t, frame = await agent.wait_for(
                        lambda: agent.response(rid, mark), TURN_DEADLINE
                    )
                except trio.TooSlowError:
                    failures.append(f"try {n}: no response within {TURN_DEADLINE:g} s")
                    break
                latencies.append(t - cancelled_at)
                reason = (
                    frame.get("result", {}).get("stopReason")
                    if "result" in frame
                    else f"error {frame['error']}"
                )
                outcomes[reason] += 1
                if reason not in ("cancelled", "end_turn"):
                    failures.append(f"try {n}: {reason}")
                alive = _sleeping(seconds)
                if alive:
                    survivors.append(n)
                if args.progress and n % 50 == 49:
                    print(f"  {n + 1} tries, {time.monotonic() - started:.0f} s", file=sys.stderr)
            seconds_taken = time.monotonic() - started
            # Every command that survived has written its marker by now.
            await trio.sleep(SLEEP + 2.0)
            markers = sorted(
                int(p.split("-")[1]) for p in os.listdir(ws) if p.startswith("marker-")
            )
            results = {
                "tries": args.tries,
                "seed": args.seed,
                "max_delay_ms": args.max_delay_ms,
                "seconds": seconds_taken,
                "outcomes": dict(outcomes),
                "survivors": len(survivors),
                "survivor_tries": survivors,
                "markers": len(markers),
                "marker_tries": markers,
                # The answer's latency (ms) of each try that left a marker or a survivor.
                "latency_of": {
                    n: round(latencies[n] * 1000, 1)
                    for n in sorted({*markers, *survivors})
                    if n < len(latencies)
                },
                "cancel_latency": latency_summary(latencies),
                "failures": failures,
            }
            await process.stdin.aclose()
            with trio.move_on_after(10):
                await process.wait()
            nursery.cancel_scope.cancel()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-delay-ms", type=float, default=50)
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--stderr", help="keep the agent's stderr (its log) in this file")
    args = parser.parse_args()
    results = trio.run(race, args)
    print(json.dumps(results, indent=2))
    lat = results["cancel_latency"]
    print(
        f"cancel race: {results['tries']} tries in {results['seconds']:.0f} s, "
        f"outcomes {results['outcomes']}, survivors {results['survivors']}, "
        f"markers {results['markers']}, cancel latency p50 {lat.get('p50_ms', 0):.1f} ms "
        f"p99 {lat.get('p99_ms', 0):.1f} ms, failures: {len(results['failures'])}",
        file=sys.stderr,
    )
    bad = results["failures"] or results["survivors"] or results["markers"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
