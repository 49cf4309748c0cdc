"""`python -m bench failures`: how long a failing model keeps the editor waiting.

The agent is `python -m trio_acp`, spawned as an editor spawns it, with the scripted model
(trio_acp.testing.ScriptedLLM, in this process) and trio-acp's **default** failure
settings (src/trio_acp/openhands/translate/model_failures.py): no `LLM_NUM_RETRIES` or
`LLM_RETRY_*` in its environment. One agent process, one session, warmed up by one
`echo` turn (a session's first prompt also starts its tools). Figures, from
`session/prompt` sent to its error response:

- a 401 (`error401`), `--runs` times: no retry, so this is one model call;
- a 500 on every call (`error500`), once (each costs the whole back-off, 2 + 4 + 8 s);
- `--cancels` times: an `error500` prompt, `session/cancel` sent as soon as the first
  retry note arrives (the agent is then in its 2 s back-off), and the time from the
  cancel to the `cancelled` response;
- with `--stall`, also a stream that stalls mid-reply (`stall`), once: two attempts of
  the 60 s idle timeout (about 2 minutes);
- with `--big-body`, also an HTTP 500 whose body is 5 MiB on the first attempt, then a
  reply (`error500_big [times:1]`), once: the turn, and the gap between the two attempts'
  starts, whose documented wait is 2 s (src/trio_acp/openhands/sdk/error_bodies.py).

Prints a table and one JSON line (`--json FILE` writes it to a file too). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from trio_acp import schema
from trio_acp.process import spawn_agent
from trio_acp.rpc import RequestError
from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env

from ._common import percentile
from .agent_common import AGENT_COMMAND, tail


class Client:
    def __init__(self) -> None:
        self.retrying = trio.Event()
        self.notes: list[str] = []

    async def session_update(self, params: schema.SessionNotification) -> None:
        update = params.update
        if isinstance(update, schema.AgentThoughtChunk) and "Retrying" in update.content.text:
            self.notes.append(update.content.text.strip())
            self.retrying.set()

    async def request_permission(self, params: Any) -> Any:
        raise AssertionError("no permission requests here")


def agent_env(base_url: str, home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_")}
    env.update(scripted_env(base_url))
    env.update(
        OPENHANDS_PERSISTENCE_DIR=home,
        LLM_MAX_INPUT_TOKENS="128000",
        TRIO_ACP_DEFAULT_MODE="always-approve",
    )
    return env


async def _prompt(agent: Any, sid: str, text: str) -> tuple[float, str, dict[str, Any] | None]:
    """(seconds to the response, stop reason or error message, error data)."""
    t0 = time.perf_counter()
    try:
        response = await agent.prompt(session_id=sid, prompt=[schema.TextContent(text=text)])
    except RequestError as exc:
        return time.perf_counter() - t0, exc.message, exc.data
    return time.perf_counter() - t0, response.stop_reason, None


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with (
        ScriptedLLM() as llm,
        tempfile.TemporaryDirectory() as home,
        tempfile.TemporaryDirectory() as cwd,
    ):
        client = Client()
        log_path = Path(home) / "agent.log"
        with open(log_path, "wb") as log:
            try:
                async with spawn_agent(
                    AGENT_COMMAND, client, cwd=cwd, stderr=log, env=agent_env(llm.base_url, home)
                ) as proc:
                    agent = proc.agent
                    with trio.fail_after(60):
                        await agent.initialize(protocol_version=1)
                    with trio.fail_after(180):
                        sid = (await agent.new_session(cwd=cwd, mcp_servers=[])).session_id
                    seconds, stop, _ = await _prompt(agent, sid, scenario_prompt("echo", "warm up"))
                    out["warm_up"] = {"seconds": seconds, "stop_reason": stop}

                    runs = []
                    for _ in range(args.runs):
                        before = len(llm.requests)
                        seconds, message, data = await _prompt(
                            agent, sid, scenario_prompt("error401")
                        )
                        runs.append(
                            {
                                "seconds": seconds,
                                "requests": len(llm.requests) - before,
                                "message": message,
                            }
                        )
                        await _prompt(agent, sid, scenario_prompt("echo", "next"))
                    out["http401"] = runs

                    client.notes.clear()
                    before = len(llm.requests)
                    seconds, message, data = await _prompt(agent, sid, scenario_prompt("error500"))
                    out["http500"] = {
                        "seconds": seconds,
                        "requests": len(llm.requests) - before,
                        "message": message,
                        "notes": list(client.notes),
                    }
                    await _prompt(agent, sid, scenario_prompt("echo", "next"))

                    cancels = []
                    for _ in range(args.cancels):
                        client.retrying = trio.Event()
                        before = len(llm.requests)
                        result: dict[str, Any] = {}

                        async def run_turn() -> None:
                            _, result["stop"], _ = await _prompt(
                                agent, sid, scenario_prompt("error500")
                            )
                            result["t"] = time.perf_counter()

                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(run_turn)
                            with trio.fail_after(60):
                                await client.retrying.wait()
                            t_cancel = time.perf_counter()
                            await agent.cancel(session_id=sid)
                        cancels.append(
                            {
                                "seconds": result["t"] - t_cancel,
                                "stop_reason": result["stop"],
                                "requests": len(llm.requests) - before,
                            }
                        )
                        await _prompt(agent, sid, scenario_prompt("echo", "next"))
                    out["cancel_in_back_off"] = cancels

                    if args.stall:
                        client.notes.clear()
                        before = len(llm.requests)
                        seconds, message, data = await _prompt(agent, sid, scenario_prompt("stall"))
                        out["stall"] = {
                            "seconds": seconds,
                            "requests": len(llm.requests) - before,
                            "message": message,
                            "notes": list(client.notes),
                        }
                    if args.big_body:
                        before = len(llm.requests)
                        seconds, stop, _ = await _prompt(
                            agent, sid, scenario_prompt("error500_big", times=1)
                        )
                        calls = llm.requests[before:]
                        out["big_body"] = {
                            "seconds": seconds,
                            "stop_reason": stop,
                            "outcomes": [c.outcome for c in calls],
                            "gap": calls[1].started - calls[0].started if len(calls) > 1 else None,
                        }
                    seconds, stop, _ = await _prompt(
                        agent, sid, scenario_prompt("echo", "still works")
                    )
                    out["follow_up"] = stop
            except BaseException:
                sys.stderr.write(f"the agent failed; its log ends with:\n{tail(log_path)}\n")
                raise
    return out


def report(r: dict[str, Any]) -> None:
    print("model failures: `python -m trio_acp` with its default failure settings, scripted model")
    print(
        f"  warm-up echo turn:                         {r['warm_up']['seconds'] * 1000:8,.0f} ms ({r['warm_up']['stop_reason']})"
    )
    t401 = sorted(run["seconds"] for run in r["http401"])
    calls = {run["requests"] for run in r["http401"]}
    print(
        f"  401 → error response, median of {len(t401)}:        {percentile(t401, 50) * 1000:8,.0f} ms "
        f"(min {t401[0] * 1000:,.0f}, max {t401[-1] * 1000:,.0f}); model calls per turn: {sorted(calls)}"
    )
    print(f"    message: {r['http401'][0]['message'][:160]}…")
    e500 = r["http500"]
    print(
        f"  500 on every call → error response:        {e500['seconds']:8.2f} s; model calls: {e500['requests']}"
    )
    for note in e500["notes"]:
        print(f"    note: {note}")
    print(f"    message: {e500['message'][:160]}…")
    lat = sorted(c["seconds"] for c in r["cancel_in_back_off"])
    if lat:
        reasons = sorted({c["stop_reason"] for c in r["cancel_in_back_off"]})
        calls = sorted({c["requests"] for c in r["cancel_in_back_off"]})
        print(
            f"  cancel in the back-off → `cancelled`, {len(lat)} turns: p50 {percentile(lat, 50) * 1000:,.1f} ms, "
            f"p99 {percentile(lat, 99) * 1000:,.1f} ms, max {lat[-1] * 1000:,.1f} ms; "
            f"stop reasons {reasons}; model calls per turn {calls}"
        )
    if "stall" in r:
        s = r["stall"]
        print(
            f"  stall mid-stream → error response:         {s['seconds']:8.2f} s; model calls: {s['requests']}"
        )
        print(f"    message: {s['message'][:160]}…")
    if "big_body" in r:
        b = r["big_body"]
        gap = f"{b['gap']:.2f} s" if b["gap"] is not None else "-"
        print(
            f"  5 MiB HTTP 500 body, then a reply:          {b['seconds']:8.2f} s ({b['stop_reason']}); "
            f"calls {b['outcomes']}, {gap} between their starts (the wait: 2 s)"
        )
    print(f"  follow-up prompt:                          {r['follow_up']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench failures", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=5, help="401 turns (default 5)")
    parser.add_argument(
        "--cancels", type=int, default=10, help="cancels during a back-off (default 10)"
    )
    parser.add_argument(
        "--stall", action="store_true", help="also a stalled stream (about 2 minutes)"
    )
    parser.add_argument(
        "--big-body", action="store_true", help="also a 5 MiB HTTP 500 body, then a reply"
    )
    parser.add_argument("--json", help="also write the JSON result to this file")
    args = parser.parse_args(argv)
    result = trio.run(measure, args)
    report(result)
    line = json.dumps(result)
    print(line)
    if args.json:
        Path(args.json).write_text(line + "\n")


if __name__ == "__main__":
    main()
