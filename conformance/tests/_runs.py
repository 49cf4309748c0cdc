"""Running the suite in-process for the tests (several runs at once on one Trio loop)."""

from __future__ import annotations

from pathlib import Path

import trio

from trio_acp_conformance.context import RunConfig
from trio_acp_conformance.report import Report
from trio_acp_conformance.runner import run_suite


async def run(command: list[str], scratch: Path, *, only: list[str] | None = None) -> Report:
    config = RunConfig(command=command, scratch=scratch, only=only, allow_schema_download=False)
    return await run_suite(config)


def run_many(
    jobs: dict[str, tuple[list[str], list[str] | None]], root: Path, *, limit: int = 8
) -> dict[str, Report]:
    """``{name: (command, only)}`` → ``{name: report}``, at most ``limit`` runs at a time."""

    async def main() -> dict[str, Report]:
        out: dict[str, Report] = {}
        limiter = trio.CapacityLimiter(limit)

        async def one(name: str, command: list[str], only: list[str] | None) -> None:
            async with limiter:
                out[name] = await run(command, root / name, only=only)

        async with trio.open_nursery() as nursery:
            for name, (command, only) in jobs.items():
                nursery.start_soon(one, name, command, only)
        return out

    return trio.run(main)
