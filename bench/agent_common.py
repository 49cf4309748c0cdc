"""Shared bits of the OpenHands-agent benchmarks (`python -m bench agent`).

The agent under test is `python -m trio_acp`, spawned exactly as an editor spawns it, with
the scripted OpenAI-compatible server (trio_acp.testing.ScriptedLLM) as its model: the real
litellm streaming path, no network, no API key. The environment is the demo's
(src/trio_acp/demo.py): a throw-away OPENHANDS_PERSISTENCE_DIR, one LLM attempt, a timeout.
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
from pathlib import Path
from typing import Any

import trio

from ._common import ROOT, percentile

PY = sys.executable
AGENT_COMMAND = [PY, "-m", "trio_acp"]


def agent_env(base_url: str, persistence_dir: str) -> dict[str, str]:
    """The agent's environment: the scripted model at `base_url`, storage in `persistence_dir`."""
    from trio_acp.testing import scripted_env

    env = dict(os.environ)
    env.update(scripted_env(base_url))
    env.update(
        OPENHANDS_PERSISTENCE_DIR=persistence_dir,
        LLM_NUM_RETRIES="1",
        LLM_TIMEOUT="600",  # litellm's path takes over a minute for 20,000 chunks under load
        LLM_MAX_INPUT_TOKENS="128000",
        TRIO_ACP_WARM="0",  # the ordinary start (bench/__main__.py)
    )
    return env


def agent_command(profiled: bool = False) -> list[str]:
    """`python -m trio_acp`, or the same under bench/agent_profiled.py (cProfile on signals)."""
    return [PY, "-m", "bench.agent_profiled"] if profiled else list(AGENT_COMMAND)


def profiled_env(env: dict[str, str], profile_out: str) -> dict[str, str]:
    """`env` for bench/agent_profiled.py: importable from the agent's cwd, writing `profile_out`."""
    env = dict(env)
    env["TRIO_ACP_BENCH_PROFILE"] = profile_out
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


async def profile_phase_start(pid: int | None) -> None:
    if pid is not None:
        os.kill(pid, signal.SIGUSR1)
        await trio.sleep(0.1)  # the handler runs on the agent's next pass through its loop


async def profile_phase_stop(pid: int | None, prefix: str | None, dump: int, out: str) -> None:
    """Ask the profiled agent to write its `dump`-th profile (`prefix.dump`); move it to `out`."""
    if pid is None or prefix is None:
        return
    os.kill(pid, signal.SIGUSR2)
    path = f"{prefix}.{dump}"
    with trio.move_on_after(30):
        while not os.path.exists(path):
            await trio.sleep(0.05)
        os.replace(path, out)


def thread_schedstats(pid: int) -> dict[int, tuple[int, int, int]]:
    """Per thread of `pid`: (CPU ns, run-queue wait ns, time slices), from /proc (Linux).

    The run-queue wait is time a thread was runnable but had no CPU: other processes (or
    threads) had them. Time neither on a CPU nor runnable is sleeping: I/O, a lock, the GIL."""
    out: dict[int, tuple[int, int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu, wait, slices = (int(x) for x in f.read().split()[:3])
        except (OSError, ValueError):
            continue
        out[int(tid)] = (cpu, wait, slices)
    return out


def schedstat_delta(
    pid: int,
    before: dict[int, tuple[int, int, int]],
    after: dict[int, tuple[int, int, int]],
    seconds: float,
) -> dict[str, Any]:
    """Where a process's threads spent `seconds` of wall time (threads alive at the end)."""
    threads = []
    for tid, (cpu, wait, slices) in after.items():
        c0, w0, s0 = before.get(tid, (0, 0, 0))
        threads.append(
            {
                "tid": tid,
                "main": tid == pid,
                "cpu_s": (cpu - c0) / 1e9,
                "runqueue_wait_s": (wait - w0) / 1e9,
                "slices": slices - s0,
            }
        )
    threads.sort(key=lambda t: -t["cpu_s"])
    return {
        "seconds": seconds,
        "cpu_s": sum(t["cpu_s"] for t in threads),
        "runqueue_wait_s": sum(t["runqueue_wait_s"] for t in threads),
        "threads": [t for t in threads if t["cpu_s"] > 0.001 or t["runqueue_wait_s"] > 0.001],
    }


def latency_summary(seconds: list[float]) -> dict[str, Any]:
    """p50/p90/p99/max of a list of durations, in milliseconds (nearest-rank percentiles)."""
    ms = sorted(s * 1000 for s in seconds)
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p90_ms": percentile(ms, 90),
        "p99_ms": percentile(ms, 99),
        "max_ms": ms[-1],
        "min_ms": ms[0],
        "mean_ms": statistics.fmean(ms),
    }


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
