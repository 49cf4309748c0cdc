"""Exit and cancel latency of the `trio-acp` process, local vs through an agent-server.

    python -m bench remote-lifecycle [--exits 3] [--cancels 10] [--only local|remote]

What an editor sees, over stdio (`trio_acp.testing.raw_agent`), with and without
`--agent-server URL` (a real `openhands-agent-server` on 127.0.0.1,
`trio_acp.testing.agent_server`), on the scripted model:

- **exit**: a fresh process per exit: `initialize`, `session/new`, one answered prompt,
  then its stdin closed (the editor went away) → the process has exited. Editors wait a
  few seconds for that, then kill the agent.
- **cancel mid-stream**: in one process and session, a slow streamed reply, `session/cancel`
  at its first streamed chunk → the `cancelled` response.
- **cancel mid-tool**: the same, while the terminal runs `sleep 30` (the cancel at the
  tool call's `in_progress` update).
- **tool turn** (`--tool-turns N`, 5): a whole turn of one terminal command (`echo`) and
  the model's `finish`, run unasked (always-approve): through an agent-server the server
  stops before the command for trio-acp to decide (a credential read is asked:
  docs/agent-server.md, "Events, cancel, permissions, failures").

Figures per side: p50/p99 (and max) in ms; the load average. Prints; asserts only that
each cancelled turn answered `cancelled` and each process exited 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.agent_server import AgentServer
from trio_acp.testing.raw_agent import RawAgent

from .agent_common import latency_summary


def _update(sid: str, test: Callable[[dict[str, Any]], bool]) -> Callable[[dict[str, Any]], bool]:
    def match(frame: dict[str, Any]) -> bool:
        return (
            frame.get("method") == "session/update"
            and frame["params"]["sessionId"] == sid
            and test(frame["params"]["update"])
        )

    return match


def _first_chunk(update: dict[str, Any]) -> bool:
    return update["sessionUpdate"] == "agent_message_chunk"


def _tool_running(update: dict[str, Any]) -> bool:
    return update["sessionUpdate"] in ("tool_call", "tool_call_update") and (
        update.get("status") == "in_progress"
    )


def _cancel_at(agent: RawAgent, sid: str, text: str, at: Callable[[dict[str, Any]], bool]) -> float:
    rid = agent.new_id()
    prompt = [{"type": "text", "text": text}]
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": prompt},
        }
    )
    agent.read_until(_update(sid, at), timeout=120, what="the point to cancel at")
    start = time.perf_counter()
    agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    reply = agent.response(rid, timeout=120)
    latency = time.perf_counter() - start
    assert reply.get("result", {}).get("stopReason") == "cancelled", reply
    return latency


def _tool_turn(agent: RawAgent, sid: str) -> float:
    start = time.perf_counter()
    reply = agent.prompt(sid, scenario_prompt("terminal", command="echo bench"), timeout=120)
    latency = time.perf_counter() - start
    assert reply.get("result", {}).get("stopReason") == "end_turn", reply
    return latency


def _exit_after_eof(argv: list[str], env: dict[str, str], cwd: str) -> float:
    agent = RawAgent.spawn(env, argv=argv, stderr=subprocess.DEVNULL)
    try:
        agent.initialize()
        sid = agent.new_session(cwd)
        reply = agent.prompt(sid, scenario_prompt("echo", "hello"), timeout=120)
        assert reply.get("result", {}).get("stopReason") == "end_turn", reply
        agent.process.stdin.close()  # type: ignore[union-attr]
        start = time.perf_counter()
        while agent.alive():
            agent.drain(0.005)
        latency = time.perf_counter() - start
        assert agent.process.returncode == 0, agent.process.returncode
        return latency
    finally:
        if agent.alive():
            agent.process.kill()
            agent.process.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench remote-lifecycle",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--exits", type=int, default=3, help="fresh processes per side (3)")
    parser.add_argument("--cancels", type=int, default=10, help="cancels per side and case (10)")
    parser.add_argument("--only", choices=("local", "remote"), help="one side only")
    parser.add_argument("--tool-turns", type=int, default=5, help="tool turns per side (5)")
    args = parser.parse_args(argv)
    sides = [args.only] if args.only else ["local", "remote"]
    with ScriptedLLM() as llm, AgentServer() as server, tempfile.TemporaryDirectory() as home:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=home,
            TRIO_ACP_AGENT_SERVER_API_KEY=server.api_key,
            TRIO_ACP_DEFAULT_MODE="always-approve",
        )
        base = [sys.executable, "-m", "trio_acp"]
        argv_of = {"local": base, "remote": [*base, "--agent-server", server.url]}
        cwd = str(server.workspace)
        cases: dict[str, tuple[str, Callable[[dict[str, Any]], bool]]] = {
            "cancel mid-stream": (scenario_prompt("slow", chunks=400, delay_ms=20), _first_chunk),
            "cancel mid-tool": (scenario_prompt("sleep", seconds=30), _tool_running),
        }
        figures: dict[str, dict[str, list[float]]] = {
            side: {name: [] for name in ["exit", *cases, "tool turn"]} for side in sides
        }
        agents = {
            side: RawAgent.spawn(env, argv=argv_of[side], stderr=subprocess.DEVNULL)
            for side in sides
        }
        try:
            sessions = {}
            for side, agent in agents.items():
                agent.initialize()
                sessions[side] = agent.new_session(cwd)
                agent.prompt(sessions[side], scenario_prompt("echo", "warm"), timeout=120)
            for _ in range(args.cancels):
                for name, (text, at) in cases.items():
                    for side in sides:  # interleaved: both sides see the same machine load
                        figures[side][name].append(
                            _cancel_at(agents[side], sessions[side], text, at)
                        )
            for _ in range(args.tool_turns):
                for side in sides:
                    figures[side]["tool turn"].append(_tool_turn(agents[side], sessions[side]))
        finally:
            for agent in agents.values():
                agent.close(timeout=60)
        for _ in range(args.exits):
            for side in sides:
                figures[side]["exit"].append(_exit_after_eof(argv_of[side], env, cwd))
    out: dict[str, Any] = {
        "exits": args.exits,
        "cancels": args.cancels,
        "tool_turns": args.tool_turns,
    }
    for side in sides:
        for name, latencies in figures[side].items():
            summary = latency_summary(latencies)
            out[f"{side}: {name}"] = {
                k: round(v, 1) if isinstance(v, float) else v
                for k, v in summary.items()
                if k in ("n", "p50_ms", "p99_ms", "max_ms")
            }
    out["load_average"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
