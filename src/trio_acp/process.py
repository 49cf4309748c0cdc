"""Launching an ACP agent as a subprocess and driving it over its stdio, from Trio.

This is what an editor does; the demo, the end-to-end tests, the benchmarks and the
conformance suite do it too, and so can any Trio application.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from .connection import ClientSideConnection, open_client_connection


@attrs.define
class AgentProcess:
    process: trio.Process
    connection: ClientSideConnection

    @property
    def agent(self):
        return self.connection.agent


@asynccontextmanager
async def spawn_agent(
    command: Sequence[str],
    client: Any,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stderr: Any = None,
    exit_grace: float = 5.0,
    **peer_options: Any,
) -> AsyncIterator[AgentProcess]:
    """Start `command`, connect `client` to its stdio, and clean up on exit.

    On leaving the block the agent's stdin is closed (the spec's way to end a session);
    an agent that has not exited after `exit_grace` seconds is terminated, then killed.
    """
    full_env = dict(os.environ if env is None else env)
    process = await trio.lowlevel.open_process(
        list(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=full_env,
        cwd=cwd,
    )
    assert process.stdin is not None and process.stdout is not None
    stream = trio.StapledStream(process.stdin, process.stdout)
    try:
        async with open_client_connection(stream, client, **peer_options) as conn:
            yield AgentProcess(process, conn)
    finally:
        with trio.CancelScope(shield=True):
            await _stop(process, exit_grace)


async def _stop(process: trio.Process, grace: float) -> None:
    if process.stdin is not None:
        try:
            await process.stdin.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
    with trio.move_on_after(grace):
        await process.wait()
        return
    process.terminate()
    with trio.move_on_after(grace):
        await process.wait()
        return
    process.kill()
    await process.wait()
