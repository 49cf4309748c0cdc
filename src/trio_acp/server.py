"""The stdio server: the OpenHands agent on a connection, with stdio hygiene."""

from __future__ import annotations

import trio

from .connection import open_agent_connection
from .openhands.agent import open_openhands_agent
from .openhands.sdk import SdkLoader
from .stdio import serve_stdio


async def serve_stream(stream: trio.abc.Stream, *, sdk_loader: SdkLoader | None = None) -> None:
    """Serve the OpenHands agent on `stream` until the client hangs up."""
    # The SDK import (~8-10 s) starts now, in a thread, so that `initialize` never waits
    # for it and `session/new` usually doesn't either (DESIGN §3). Under serve_stdio this
    # runs after fd 1 points at stderr, so nothing the import prints can reach the wire.
    loader = sdk_loader or SdkLoader()
    async with open_openhands_agent(sdk_loader=loader) as agent:
        async with open_agent_connection(stream, agent) as conn:
            await conn.wait_closed()


async def serve_main() -> None:
    await serve_stdio(serve_stream)
