"""Shared bits of the benchmark drivers: paths, arguments, statistics, output."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUR_ECHO_AGENT = ROOT / "examples" / "echo_agent.py"
OFFICIAL_ECHO_AGENT = ROOT / "bench" / "official_echo_agent.py"


def driver_arguments(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--n", type=int, default=20_000, help="notifications per flood turn")
    parser.add_argument("--runs", type=int, default=5, help="timed flood turns (after one warm-up)")
    parser.add_argument("--pings", type=int, default=2_000, help="sequential _echo/ping requests")
    parser.add_argument(
        "--agent", nargs=argparse.REMAINDER, help="agent command (default: the echo agent)"
    )
    return parser


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of another process (Linux /proc; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    # After "pid (comm)": state is field 3, utime 14, stime 15 (1-based, man 5 proc).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds spent by this process (the client) and by the agent's process.

    On a busy machine wall-clock rates swing with the load; CPU time per notification
    is steadier (the agent's is counted in clock ticks: 10 ms resolution)."""

    def __init__(self, agent_pid: int | None) -> None:
        self.agent_pid = agent_pid

    def read(self) -> tuple[float, float | None]:
        agent = process_cpu_seconds(self.agent_pid) if self.agent_pid is not None else None
        return time.process_time(), agent


def cpu_delta(
    before: tuple[float, float | None], after: tuple[float, float | None]
) -> tuple[float, float | None]:
    client = after[0] - before[0]
    agent = None if before[1] is None or after[1] is None else after[1] - before[1]
    return client, agent


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[rank]


def flood_summary(
    n: int, seconds: list[float], counts: list[int], cpu: list[tuple[float, float | None]]
) -> dict[str, Any]:
    rates = sorted(n / s for s in seconds)
    client_us = [c * 1e6 / n for c, _ in cpu]
    agent_us = [a * 1e6 / n for _, a in cpu if a is not None]
    return {
        "n": n,
        "seconds": seconds,
        "counts_ok": all(c == n for c in counts),
        "counts": counts,
        "best_per_s": rates[-1],
        "median_per_s": statistics.median(rates),
        # CPU µs per notification, median over the runs (agent: None when unknown, or
        # when agent and client share one process).
        "client_cpu_us": statistics.median(client_us),
        "agent_cpu_us": statistics.median(agent_us) if agent_us else None,
    }


def ping_summary(latencies_s: list[float], cpu: tuple[float, float | None]) -> dict[str, Any]:
    us = sorted(x * 1e6 for x in latencies_s)
    return {
        "n": len(us),
        "client_cpu_us": cpu[0] * 1e6 / len(us),
        "agent_cpu_us": None if cpu[1] is None else cpu[1] * 1e6 / len(us),
        "p50_us": percentile(us, 50),
        "p99_us": percentile(us, 99),
        "mean_us": statistics.fmean(us),
        "per_s": len(us) / (sum(us) / 1e6),
    }


def emit(result: dict[str, Any]) -> None:
    """The driver's one line of output: JSON, on stdout."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
