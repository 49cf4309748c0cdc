"""Idle sessions' memory and stdin EOF → exit of the `trio-acp` process (issue 27, items 4, 5).

    python -m bench idle-exit [--only memory,exit,warm] [--idle 20] [--exits 3] [--launches 4]

What an editor sees, over stdio (`trio_acp.testing.raw_agent`), on the scripted model:

- **memory**: one process; `session/new`, then `--idle` (20) more `session/new`: RSS and PSS
  of the agent and all its descendants, with 1 and with 1 + `--idle` idle sessions (each
  read once the sessions' warm-up is over), and the child processes. Then one session runs
  a terminal command (its shell starts) and the process's stdin is closed: the exit of a
  process with idle sessions and a shell (`exit: idle sessions` below).
- **exit**: fresh processes (`--exits` each), stdin closed (the editor went away) →
  the process has exited, polled every 5 ms: *no session* (right after `initialize`: the
  SDK import still runs), *right after session/new* (its warm-up still runs: what an
  editor that opens a session and quits does), *idle session* (after `session/new` and
  an answered prompt, at once: the session's warm-up may still run), *settled: 1 session
  with its shell* and *settled: 3 sessions with 3 shells* (each session's turn ran a terminal
  command, then 3 s of quiet), *turn running* (while the terminal runs `sleep 30`, right
  after `session/new`) and *turn running settled* (the same after an answered prompt and
  3 s of quiet).
- **warm**: warm start (on for users by default) in a warm directory of its own: one cold
  launch starts the server, then `--launches` launches (`initialize`, `session/new`, an
  answered prompt) each timed from its launcher's stdin closed to the launcher's exit;
  the server is stopped at the end.

After every exit: what is left of the process tree (processes still running), and for the
memory process the entries left in its private TMPDIR. Prints JSON; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.raw_agent import RawAgent

from .agent_common import latency_summary

MiB = 1 << 20
AGENT = [sys.executable, "-m", "trio_acp"]
# After the last session/new, before memory is read: the sessions' warm-up (tools built,
# the model call path warmed) is over well within this.
SETTLE = 3.0
#: Exit cases with N sessions that each finished a turn running a terminal command, the
#: process then left alone for SETTLE seconds: the idle state an editor quits from.
SETTLED = {"settled: 1 session with its shell": 1, "settled: 3 sessions with 3 shells": 3}
EXIT_CASES = (
    "no session",
    "right after session/new",
    "idle session",
    *SETTLED,
    "turn running",
    "turn running settled",
)


def tree_memory(pid: int) -> dict[str, Any]:
    """RSS and PSS (MiB) of `pid` and its live descendants, and how many descendants."""
    procs = [psutil.Process(pid)]
    procs += [p for p in procs[0].children(recursive=True) if _running(p)]
    rss = pss = 0.0
    for proc in procs:
        try:
            full = proc.memory_full_info()
        except psutil.Error:
            continue
        rss += full.rss / MiB
        pss += getattr(full, "pss", 0) / MiB
    return {"rss_mib": round(rss, 1), "pss_mib": round(pss, 1), "children": len(procs) - 1}


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _name(proc: psutil.Process) -> str:
    try:
        return proc.name()
    except psutil.Error:  # gone meanwhile (a shell's short-lived child)
        return ""


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if _running(p)]
    except psutil.Error:
        return []


def time_eof(agent: RawAgent, tree: list[psutil.Process]) -> dict[str, Any]:
    """Close the agent's stdin; the time until it exited (polled every 5 ms, its stdout
    drained meanwhile), its status, and what of `tree` still runs after it."""
    process = agent.process
    out = process.stdout.fileno()  # type: ignore[union-attr]
    start = time.perf_counter()
    process.stdin.close()  # type: ignore[union-attr]
    deadline = start + 60
    while process.poll() is None and time.perf_counter() < deadline:
        ready, _, _ = select.select([out], [], [], 0.005)
        if ready:
            try:
                os.read(out, 1 << 16)
            except OSError:
                pass
    elapsed = time.perf_counter() - start
    if process.poll() is None:
        process.kill()
        process.wait()
    time.sleep(0.2)  # whatever the exit left to die, dies now or never
    left = [f"{p.pid} {_name(p)}" for p in tree if _running(p)]
    for proc in tree:
        if _running(proc):
            proc.kill()
    return {"exit_s": elapsed, "status": process.returncode, "left": left, "eof_at": start}


def _env(llm: ScriptedLLM, root: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(scripted_env(llm.base_url))
    env.update(
        OPENHANDS_PERSISTENCE_DIR=str(root / "persist"),
        TMPDIR=str(root / "tmp"),
        LLM_NUM_RETRIES="1",
        LLM_TIMEOUT="120",
        TRIO_ACP_DEFAULT_MODE="always-approve",
        TRIO_ACP_WARM="0",
        TRIO_ACP_PUBLIC_SKILLS="0",
    )
    env.update(extra)
    return env


def _root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="trio-acp-idle-exit-"))
    for name in ("persist", "tmp", "ws"):
        (root / name).mkdir()
    return root


def _end_turn(reply: dict[str, Any]) -> None:
    assert reply.get("result", {}).get("stopReason") == "end_turn", reply


def memory(llm: ScriptedLLM, idle: int) -> dict[str, Any]:
    root = _root()
    ws = str(root / "ws")
    agent = RawAgent.spawn(_env(llm, root), stderr=subprocess.DEVNULL, cwd=ws)
    try:
        agent.initialize()
        sids = [agent.new_session(ws, timeout=600)]
        time.sleep(SETTLE)
        one = tree_memory(agent.pid)
        sids += [agent.new_session(ws, timeout=600) for _ in range(idle)]
        time.sleep(SETTLE)
        many = tree_memory(agent.pid)
        _end_turn(
            agent.prompt(sids[0], scenario_prompt("terminal", command="echo hi"), timeout=120)
        )
        with_shell = tree_memory(agent.pid)
        tree = descendants(agent.pid)
        ended = time_eof(agent, tree)
    finally:
        if agent.alive():
            agent.process.kill()
            agent.process.wait()
    return {
        "sessions_1": one,
        f"sessions_{idle + 1}": many,
        "growth_rss_mib": round(many["rss_mib"] - one["rss_mib"], 1),
        "growth_pss_mib": round(many["pss_mib"] - one["pss_mib"], 1),
        "after_a_terminal_command": with_shell,
        "exit: idle sessions, one shell": ended,
        "tmp_left": sorted(p.name for p in (root / "tmp").iterdir()),
    }


def _running_sleep(agent: RawAgent, sid: str) -> None:
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": agent.new_id(),
            "method": "session/prompt",
            "params": {
                "sessionId": sid,
                "prompt": [{"type": "text", "text": scenario_prompt("sleep", seconds=30)}],
            },
        }
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if any(_name(p) == "sleep" for p in descendants(agent.pid)):
            return
        agent.drain(0.02)
    raise TimeoutError("the sleep never started")


def one_exit(llm: ScriptedLLM, case: str, *, marked: bool = True, **env: str) -> dict:
    """One fresh process in state `case`, then stdin EOF. `marked`: through
    bench/exit_marked.py, which also times stdin EOF → the agent's `os._exit`."""
    root = _root()
    ws = str(root / "ws")
    mark = root / "exit-mark"
    argv = None
    if marked:
        env = {**env, "TRIO_ACP_BENCH_EXIT_MARK": str(mark), "PYTHONPATH": _here()}
        argv = [sys.executable, "-m", "bench.exit_marked"]
    agent = RawAgent.spawn(_env(llm, root, **env), argv=argv, stderr=subprocess.DEVNULL, cwd=ws)
    try:
        agent.initialize()
        if case != "no session":
            sid = agent.new_session(ws, timeout=600)
            if case == "turn running":
                _running_sleep(agent, sid)
            elif case == "turn running settled":
                _end_turn(agent.prompt(sid, scenario_prompt("echo", "hello"), timeout=120))
                time.sleep(SETTLE)
                _running_sleep(agent, sid)
            elif case == "idle session":
                _end_turn(agent.prompt(sid, scenario_prompt("echo", "hello"), timeout=120))
            elif case in SETTLED:
                sids = [sid] + [
                    agent.new_session(ws, timeout=600) for _ in range(SETTLED[case] - 1)
                ]
                for each in sids:  # a finished turn that ran a command: its shell is up
                    _end_turn(
                        agent.prompt(
                            each, scenario_prompt("terminal", command="echo hi"), timeout=120
                        )
                    )
                time.sleep(SETTLE)  # the warm-up and the turns' after-work are over
        tree = descendants(agent.pid)
        ended = time_eof(agent, tree)
        if marked and mark.exists():
            ended["to_os_exit_s"] = float(mark.read_text()) - ended["eof_at"]
        return ended
    finally:
        if agent.alive():
            agent.process.kill()
            agent.process.wait()


def _here() -> str:
    """The directory `bench` imports from, for the agent's PYTHONPATH."""
    paths = [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")]
    return os.pathsep.join(p for p in paths if p)


def warm(llm: ScriptedLLM, launches: int) -> dict[str, Any]:
    from trio_acp.warm import stop_all_under

    warm_dir = Path(tempfile.mkdtemp(prefix="trio-acp-idle-exit-warm-"))
    extra = {"TRIO_ACP_WARM": "1", "TRIO_ACP_WARM_DIR": str(warm_dir)}
    try:
        cold = one_exit(llm, "idle session", marked=False, **extra)
        runs = [one_exit(llm, "idle session", marked=False, **extra) for _ in range(launches)]
    finally:
        stop_all_under(warm_dir)
    return {"cold launch": cold, "warm launches": runs}


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    lat = latency_summary([r["exit_s"] for r in runs])
    return {
        "n": len(runs),
        "p50_ms": round(lat["p50_ms"], 1),
        "max_ms": round(lat["max_ms"], 1),
        "all_ms": [round(r["exit_s"] * 1000, 1) for r in runs],
        # stdin EOF → the agent's os._exit (the rest is the kernel's teardown)
        "to_os_exit_ms": [round(r["to_os_exit_s"] * 1000, 1) for r in runs if "to_os_exit_s" in r],
        "statuses": sorted({r["status"] for r in runs}),
        "left": [x for r in runs for x in r["left"]],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench idle-exit",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", default="memory,exit,warm", help="memory,exit,warm")
    parser.add_argument("--cases", default=",".join(EXIT_CASES), help="exit cases, by commas")
    parser.add_argument("--idle", type=int, default=20, help="idle sessions after the first")
    parser.add_argument("--exits", type=int, default=3, help="fresh processes per exit case")
    parser.add_argument("--launches", type=int, default=4, help="warm launches after the cold one")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    out: dict[str, Any] = {"load_average_start": [round(x, 1) for x in os.getloadavg()]}
    with ScriptedLLM() as llm:
        if "memory" in only:
            out["memory"] = memory(llm, args.idle)
        if "exit" in only:
            for case in args.cases.split(","):
                if case not in EXIT_CASES:
                    parser.error(f"no exit case {case!r}: {', '.join(EXIT_CASES)}")
                out[f"exit: {case}"] = _summary([one_exit(llm, case) for _ in range(args.exits)])
        if "warm" in only:
            got = warm(llm, args.launches)
            out["exit: warm child, cold launch"] = _summary([got["cold launch"]])
            out["exit: warm child"] = _summary(got["warm launches"])
    out["load_average_end"] = [round(x, 1) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
