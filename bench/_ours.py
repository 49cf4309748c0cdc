"""Benchmark driver for OUR stack: a Trio client (`trio_acp.process.spawn_agent`) over
real stdio pipes, or both ends in memory (`open_in_memory_pair`).

    python -m bench._ours [--memory] [--n N] [--runs R] [--pings P] [--agent CMD ...]

Prints one JSON line (see bench/_common.py). Normally run by `python -m bench`.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from typing import Any

import trio

from trio_acp import schema
from trio_acp.process import spawn_agent
from trio_acp.testing.pair import open_in_memory_pair

from ._common import (
    OUR_ECHO_AGENT,
    CpuMeter,
    cpu_delta,
    driver_arguments,
    emit,
    flood_summary,
    ping_summary,
)


class CountingClient:
    """A client that only counts the `session/update`s it gets."""

    def __init__(self) -> None:
        self.count = 0

    async def session_update(self, params: schema.SessionNotification) -> None:
        self.count += 1

    async def request_permission(self, params: schema.RequestPermissionRequest):
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id="yes")
        )


def _load_echo_agent_class():
    spec = importlib.util.spec_from_file_location("echo_agent", OUR_ECHO_AGENT)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module.EchoAgent


async def _drive(
    agent: Any, client: CountingClient, meter: CpuMeter, n: int, runs: int, pings: int
) -> dict[str, Any]:
    init = await agent.initialize(protocol_version=1)
    sid = (await agent.new_session(cwd=str(OUR_ECHO_AGENT.parent), mcp_servers=[])).session_id
    prompt = [schema.TextContent(text=f"flood {n}")]

    seconds: list[float] = []
    counts: list[int] = []
    cpu: list[tuple[float, float | None]] = []
    for run in range(runs + 1):  # run 0 is the warm-up
        client.count = 0
        cpu_before = meter.read()
        start = time.perf_counter()
        response = await agent.prompt(session_id=sid, prompt=prompt)
        elapsed = time.perf_counter() - start
        cpu_after = meter.read()
        assert response.stop_reason == "end_turn", response
        if run:
            seconds.append(elapsed)
            counts.append(client.count)
            cpu.append(cpu_delta(cpu_before, cpu_after))

    for _ in range(min(200, pings)):  # warm-up
        await agent.ext_method("_echo/ping", {"i": -1})
    latencies: list[float] = []
    cpu_before = meter.read()
    for i in range(pings):
        start = time.perf_counter()
        await agent.ext_method("_echo/ping", {"i": i})
        latencies.append(time.perf_counter() - start)
    ping_cpu = cpu_delta(cpu_before, meter.read())
    return {
        "agent": init.agent_info.name if init.agent_info else None,
        "flood": flood_summary(n, seconds, counts, cpu),
        "ping": ping_summary(latencies, ping_cpu),
    }


async def main() -> None:
    parser = driver_arguments(__doc__)
    parser.add_argument("--memory", action="store_true", help="both ends in memory, no subprocess")
    args = parser.parse_args()
    client = CountingClient()
    if args.memory:
        async with open_in_memory_pair(_load_echo_agent_class()(), client) as (_, conn):
            result = await _drive(conn.agent, client, CpuMeter(None), args.n, args.runs, args.pings)
        result["transport"] = "memory"
    else:
        command = args.agent or [sys.executable, str(OUR_ECHO_AGENT)]
        async with spawn_agent(command, client) as proc:
            meter = CpuMeter(proc.process.pid)
            result = await _drive(proc.agent, client, meter, args.n, args.runs, args.pings)
        result["transport"] = "stdio"
    result["client"] = "trio-acp"
    emit(result)


if __name__ == "__main__":
    trio.run(main)
