"""Cancel soak: many prompts, each cancelled at a random moment, against `python -m trio_acp`.

    python -m bench.cancel_soak [--prompts 1000] [--seed 1] [--max-delay-ms 500]

The agent is spawned exactly as an editor spawns it and driven with raw JSON lines (so the
soak controls what shares a write). Each prompt is one of:

- `stream`:     a reply streamed slowly (the scripted model's `slow` scenario);
- `tool`:       `sleep 30` in the terminal (always-approve session);
- `permission`: a terminal command in an always-ask session; the soak does not answer the
                permission request until it has cancelled, then answers `cancelled` as the
                spec asks of clients;

and is cancelled in one of these ways: in the same write as the prompt (before the agent
has read it), after a random 0..`--max-delay-ms` ms, or twice in a row after the delay.

Checked for every prompt: answered exactly once, with `cancelled` (or `end_turn` if it had
already finished), no update for its session after its response (until the next prompt),
and every few prompts an echo prompt must run (`end_turn`). At the end: no `sleep` process
left, the agent's thread count back to where it was after warm-up. Printed: counts, cancel
latency (cancel written → response read) p50/p99/max per kind, and the checks. Exit 1 if a
check failed. Bounded: every wait has a deadline; a stuck prompt is a failure, not a hang.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter, defaultdict
from typing import Any

import psutil
import trio

from trio_acp.testing import ScriptedLLM, scenario_prompt

from .agent_common import AGENT_COMMAND, agent_env, latency_summary

KINDS = ("stream", "tool", "permission")
HOWS = ("same-write", "delay", "twice")
TURN_DEADLINE = 60.0


class Agent:
    """Raw stdio: write frames, read frames in the background into a list."""

    def __init__(self, process: trio.Process) -> None:
        self.process = process
        self.frames: list[tuple[float, dict[str, Any]]] = []
        self.changed = trio.Event()
        self._next = 0
        self._answered: set[Any] = set()

    def new_id(self) -> int:
        self._next += 1
        return self._next

    async def write(self, *frames: dict[str, Any]) -> float:
        data = b"".join(json.dumps(f).encode() + b"\n" for f in frames)
        await self.process.stdin.send_all(data)
        return time.monotonic()

    async def read_loop(self) -> None:
        buffer = b""
        while True:
            data = await self.process.stdout.receive_some(1 << 16)
            if not data:
                break
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            now = time.monotonic()
            for line in lines:
                if line.strip():
                    self.frames.append((now, json.loads(line)))
            self.changed.set()
            self.changed = trio.Event()

    async def wait_for(self, predicate, timeout: float) -> Any:
        with trio.fail_after(timeout):
            while True:
                found = predicate()
                if found:
                    return found
                await self.changed.wait()

    async def refuse_permissions(self, start: int) -> None:
        """Answer `cancelled` to every permission request since `start` not answered yet, as
        the spec asks of a client that cancelled (the agent may have withdrawn them already:
        a late answer must be harmless)."""
        for _, f in self.frames[start:]:
            if f.get("method") == "session/request_permission" and f["id"] not in self._answered:
                self._answered.add(f["id"])
                await self.write(
                    {
                        "jsonrpc": "2.0",
                        "id": f["id"],
                        "result": {"outcome": {"outcome": "cancelled"}},
                    }
                )

    def response(self, request_id: int, start: int = 0) -> tuple[float, dict[str, Any]] | None:
        for t, f in self.frames[start:]:
            if f.get("id") == request_id and "method" not in f:
                return t, f
        return None


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    results: dict[str, Any] = {"failures": []}
    fail = results["failures"].append
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
            sessions = {}
            for name, mode in (("approve", "always-approve"), ("ask", "always-ask")):
                sid = (await request("session/new", {"cwd": ws, "mcpServers": []}))["sessionId"]
                await request("session/set_mode", {"sessionId": sid, "modeId": mode})
                sessions[name] = sid
            # Warm-up: one finished turn per session, then the thread count to come back to.
            for sid in sessions.values():
                await request(
                    "session/prompt",
                    {
                        "sessionId": sid,
                        "prompt": [{"type": "text", "text": scenario_prompt("echo", "warm")}],
                    },
                )
            agent_ps = psutil.Process(process.pid)
            threads_before = agent_ps.num_threads()

            latencies: dict[str, list[float]] = defaultdict(list)
            outcomes: Counter[str] = Counter()
            started = time.monotonic()
            for n in range(args.prompts):
                kind, how = rng.choice(KINDS), rng.choice(HOWS)
                sid = sessions["ask" if kind == "permission" else "approve"]
                text = {
                    "stream": scenario_prompt("slow", chunks=200, delay_ms=50),
                    "tool": scenario_prompt("sleep", seconds=30),
                    "permission": scenario_prompt("terminal", command=f"touch {ws}/never-{n}"),
                }[kind]
                rid = agent.new_id()
                prompt = {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "session/prompt",
                    "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
                }
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "session/cancel",
                    "params": {"sessionId": sid},
                }
                mark = len(agent.frames)
                if how == "same-write":
                    cancelled_at = await agent.write(prompt, cancel)
                else:
                    await agent.write(prompt)
                    await trio.sleep(rng.uniform(0, args.max_delay_ms / 1000))
                    cancelled_at = await agent.write(cancel)
                    if how == "twice":
                        await agent.write(cancel)
                await agent.refuse_permissions(mark)
                try:
                    t, frame = await agent.wait_for(
                        lambda: agent.response(rid, mark), TURN_DEADLINE
                    )
                except trio.TooSlowError:
                    fail(f"prompt {n} ({kind}, {how}): no response within {TURN_DEADLINE:g} s")
                    break
                reason = (
                    frame.get("result", {}).get("stopReason")
                    if "result" in frame
                    else f"error {frame['error']}"
                )
                outcomes[f"{kind}:{reason}"] += 1
                if reason not in ("cancelled", "end_turn"):
                    fail(f"prompt {n} ({kind}, {how}): {reason}")
                latencies[kind].append(t - cancelled_at)
                latencies["all"].append(t - cancelled_at)
                await agent.refuse_permissions(mark)  # asked after our cancel
                # Nothing of this session after the response, until our next prompt.
                await trio.sleep(0.02)
                index = next(i for i, (_, f) in enumerate(agent.frames) if f is frame)
                late = [
                    f
                    for _, f in agent.frames[index + 1 :]
                    if f.get("method") == "session/update"
                    and f["params"]["sessionId"] == sid
                    and f["params"]["update"]["sessionUpdate"] not in SESSION_LEVEL
                ]
                if late:
                    fail(f"prompt {n} ({kind}, {how}): {len(late)} update(s) after the response")
                answers = [
                    f for _, f in agent.frames[mark:] if f.get("id") == rid and "method" not in f
                ]
                if len(answers) != 1:
                    fail(f"prompt {n}: answered {len(answers)} times")
                if n % 25 == 24:  # the session still works
                    echo = await request(
                        "session/prompt",
                        {
                            "sessionId": sid,
                            "prompt": [
                                {"type": "text", "text": scenario_prompt("echo", f"alive {n}")}
                            ],
                        },
                    )
                    if echo.get("stopReason") != "end_turn":
                        fail(f"follow-up after prompt {n}: {echo}")
                if args.progress and n % 50 == 49:
                    print(f"  {n + 1} prompts, {time.monotonic() - started:.0f} s", file=sys.stderr)
            results["seconds"] = time.monotonic() - started
            for sid in sessions.values():
                echo = await request(
                    "session/prompt",
                    {
                        "sessionId": sid,
                        "prompt": [{"type": "text", "text": scenario_prompt("echo", "final")}],
                    },
                )
                if echo.get("stopReason") != "end_turn":
                    fail(f"final follow-up: {echo}")
            # Let interrupted tool threads wind down, and Trio's idle worker threads (kept
            # 10 s for reuse) exit: what is left then was leaked.
            await trio.sleep(11.0)
            sleeping = [p.pid for p in agent_ps.children(recursive=True) if p.name() == "sleep"]
            threads_after = agent_ps.num_threads()
            if sleeping:
                fail(f"{len(sleeping)} sleep process(es) left")
            if threads_after > threads_before:
                fail(f"threads {threads_before} after warm-up, {threads_after} at the end")
            never = [p for p in os.listdir(ws) if p.startswith("never-")]
            if never:
                fail(f"{len(never)} command(s) ran without permission")
            results.update(
                prompts=args.prompts,
                seed=args.seed,
                outcomes=dict(outcomes),
                latency={k: latency_summary(v) for k, v in latencies.items()},
                threads_before=threads_before,
                threads_after=threads_after,
                sleep_left=len(sleeping),
            )
            await process.stdin.aclose()
            with trio.move_on_after(10):
                await process.wait()
            nursery.cancel_scope.cancel()
    return results


SESSION_LEVEL = {
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-delay-ms", type=float, default=500)
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--stderr", help="keep the agent's stderr (its log) in this file")
    args = parser.parse_args()
    results = trio.run(soak, args)
    print(json.dumps(results, indent=2))
    lat = results.get("latency", {}).get("all", {})
    print(
        f"cancel soak: {results.get('prompts')} prompts in {results.get('seconds', 0):.0f} s, "
        f"outcomes {results.get('outcomes')}, cancel latency p50 {lat.get('p50_ms', 0):.1f} ms "
        f"p99 {lat.get('p99_ms', 0):.1f} ms max {lat.get('max_ms', 0):.1f} ms, "
        f"failures: {len(results['failures'])}",
        file=sys.stderr,
    )
    sys.exit(1 if results["failures"] else 0)


if __name__ == "__main__":
    main()
