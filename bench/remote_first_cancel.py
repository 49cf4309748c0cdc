"""A session's first turn, cancelled early: local vs through an agent-server.

    python -m bench remote-first-cancel [--sessions 8] [--delays 0.2,first]

The `trio-acp` process over stdio (`trio_acp.testing.raw_agent`), with and without
`--agent-server URL` (a real `openhands-agent-server` on 127.0.0.1,
`trio_acp.testing.agent_server`), on the scripted model. For each session: `session/new`,
then its first prompt (a slow streamed reply), then `session/cancel` after each delay of
--delays: a number of seconds after the prompt was sent, or `first` (the first streamed
chunk, as the conformance suite's cancel checks do). A fresh session per cancel: the first
turn is the one that pays for the conversation's tools starting (on the server, while its
first message is taken in). Then one more prompt in that session, which must be answered.

Figures per side and delay: cancel → `cancelled` response p50/p99 (and max), and the
remote/local ratio; the REST round trip to the server for reference. Prints; asserts only
that every cancelled turn answered `cancelled` and the next prompt `end_turn`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.agent_server import AgentServer
from trio_acp.testing.raw_agent import RawAgent

from .agent_common import latency_summary


def _chunk_for(sid: str):
    def match(frame: dict[str, Any]) -> bool:
        return (
            frame.get("method") == "session/update"
            and frame["params"]["sessionId"] == sid
            and frame["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )

    return match


def _first_turn_cancel(agent: RawAgent, cwd: str, delay: str) -> float:
    sid = agent.new_session(cwd)
    rid = agent.new_id()
    prompt = [{"type": "text", "text": scenario_prompt("slow", chunks=400, delay_ms=20)}]
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": prompt},
        }
    )
    if delay == "first":
        agent.read_until(_chunk_for(sid), timeout=120, what="the first chunk")
    else:
        agent.drain(float(delay))
    start = time.perf_counter()
    agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    reply = agent.response(rid, timeout=120)
    latency = time.perf_counter() - start
    reason = reply.get("result", {}).get("stopReason")
    assert reason == "cancelled", reply
    again = agent.prompt(sid, "after the cancel [scenario:echo]", timeout=120)
    assert again.get("result", {}).get("stopReason") == "end_turn", again
    return latency


def _round_trip_ms(server: AgentServer) -> float:
    times = []
    for _ in range(20):
        request = urllib.request.Request(
            f"{server.url}/api/conversations/count", headers={"X-Session-API-Key": server.api_key}
        )
        start = time.perf_counter()
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench remote-first-cancel",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sessions", type=int, default=8, help="cancels per side and delay (8)")
    parser.add_argument(
        "--delays",
        default="0.2,first",
        help="when to cancel: seconds after the prompt, or `first` chunk (0.2,first)",
    )
    parser.add_argument("--only", choices=("local", "remote"), help="one side only")
    args = parser.parse_args(argv)
    delays = [d.strip() for d in args.delays.split(",") if d.strip()]
    sides = [args.only] if args.only else ["local", "remote"]
    with ScriptedLLM() as llm, AgentServer() as server, tempfile.TemporaryDirectory() as home:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(OPENHANDS_PERSISTENCE_DIR=home, TRIO_ACP_AGENT_SERVER_API_KEY=server.api_key)
        base = [sys.executable, "-m", "trio_acp"]
        argv_of = {"local": base, "remote": [*base, "--agent-server", server.url]}
        agents = {
            side: RawAgent.spawn(env, argv=argv_of[side], stderr=subprocess.DEVNULL)
            for side in sides
        }
        cwd = str(server.workspace)
        latencies: dict[str, dict[str, list[float]]] = {s: {d: [] for d in delays} for s in sides}
        try:
            for agent in agents.values():
                agent.initialize()
                agent.new_session(cwd)  # the process's own first-use costs, not timed
            for _ in range(args.sessions):
                for delay in delays:
                    for side in sides:  # interleaved: both sides see the same machine load
                        latencies[side][delay].append(_first_turn_cancel(agents[side], cwd, delay))
            trip = _round_trip_ms(server)
        finally:
            for agent in agents.values():
                agent.close()
    out: dict[str, Any] = {"sessions": args.sessions, "round_trip_ms": round(trip, 1)}
    for side in sides:
        for delay in delays:
            out[f"{side}@{delay}"] = latency_summary(latencies[side][delay])
    if len(sides) == 2:
        for delay in delays:
            lo, re = out[f"local@{delay}"], out[f"remote@{delay}"]
            out[f"ratio@{delay}"] = {
                "p50": round(re["p50_ms"] / lo["p50_ms"], 2),
                "p99": round(re["p99_ms"] / lo["p99_ms"], 2),
            }
    out["load_average"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
