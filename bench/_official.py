"""Benchmark driver for the OFFICIAL Python SDK (`acp`, asyncio): a client launched with
`acp.spawn_agent_process`, over real stdio pipes.

    python -m bench._official [--n N] [--runs R] [--pings P] [--agent CMD ...]

Prints one JSON line (see bench/_common.py). Normally run by `python -m bench`.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import acp
from acp.schema import AllowedOutcome, RequestPermissionResponse

from ._common import (
    OFFICIAL_ECHO_AGENT,
    ROOT,
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

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.count += 1

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ):
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="yes")
        )


async def main() -> None:
    args = driver_arguments(__doc__).parse_args()
    command = args.agent or [sys.executable, str(OFFICIAL_ECHO_AGENT)]
    client = CountingClient()
    async with acp.spawn_agent_process(
        client, command[0], *command[1:], cwd=str(ROOT), transport_kwargs={"stderr": None}
    ) as (conn, process):
        meter = CpuMeter(process.pid)
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        sid = (await conn.new_session(cwd=str(ROOT), mcp_servers=[])).session_id
        prompt = [acp.text_block(f"flood {args.n}")]

        seconds: list[float] = []
        counts: list[int] = []
        cpu: list[tuple[float, float | None]] = []
        for run in range(args.runs + 1):  # run 0 is the warm-up
            client.count = 0
            cpu_before = meter.read()
            start = time.perf_counter()
            response = await conn.prompt(session_id=sid, prompt=prompt)
            elapsed = time.perf_counter() - start
            cpu_after = meter.read()
            assert response.stop_reason == "end_turn", response
            if run:
                seconds.append(elapsed)
                counts.append(client.count)
                cpu.append(cpu_delta(cpu_before, cpu_after))

        for _ in range(min(200, args.pings)):  # warm-up
            await conn.ext_method("echo/ping", {"i": -1})
        latencies: list[float] = []
        cpu_before = meter.read()
        for i in range(args.pings):
            start = time.perf_counter()
            await conn.ext_method("echo/ping", {"i": i})
            latencies.append(time.perf_counter() - start)
        ping_cpu = cpu_delta(cpu_before, meter.read())

    emit(
        {
            "agent": init.agent_info.name if init.agent_info else None,
            "client": "acp (official)",
            "transport": "stdio",
            "flood": flood_summary(args.n, seconds, counts, cpu),
            "ping": ping_summary(latencies, ping_cpu),
        }
    )


if __name__ == "__main__":
    asyncio.run(main())
