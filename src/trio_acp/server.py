"""The stdio server: the OpenHands agent on a connection, with stdio hygiene."""

from __future__ import annotations

from collections.abc import Mapping

import trio

from . import schema
from .connection import open_agent_connection
from .credentials import SecretValues
from .openhands.agent import open_openhands_agent
from .openhands.sdk import SdkLoader
from .openhands.sessions.commands import available_commands
from .stdio import serve_stdio
from .v2.stream import negotiated_stream


async def serve_stream(
    stream: trio.abc.Stream,
    *,
    sdk_loader: SdkLoader | None = None,
    env: Mapping[str, str] | None = None,
    secrets: SecretValues | None = None,
    agent_server_url: str | None = None,
) -> None:
    """Serve the OpenHands agent on `stream` until the client hangs up.

    `env` is where the settings come from (default: the process environment); `secrets`
    collects the credential values to mask, shared with the log formatter.
    """
    # The SDK import (~8-10 s) starts now, in a thread, so that `initialize` never waits
    # for it and `session/new` usually doesn't either
    # (docs/ARCHITECTURE.md#d3-an-instant-initialize). Under serve_stdio this
    # runs after fd 1 points at stderr, so nothing the import prints can reach the wire.
    loader = sdk_loader or SdkLoader()
    secrets = secrets if secrets is not None else SecretValues()
    async with open_openhands_agent(
        sdk_loader=loader, env=env, secrets=secrets, agent_server_url=agent_server_url
    ) as agent:
        # A client that asks for ACP v2 in its `initialize` gets the v2 gateway in front of
        # the agent (trio_acp/v2, docs/v2.md); any other gets the stream as it is.
        commands = schema.to_wire(available_commands()).get("availableCommands")
        async with negotiated_stream(
            stream, mask=agent.frame_mask(), available_commands=commands
        ) as agent_stream:
            # The connection masks every frame with the agent's secrets (`agent.mask_frame`).
            async with open_agent_connection(agent_stream, agent) as conn:
                await conn.wait_closed()


async def serve_main(
    env: Mapping[str, str] | None = None,
    secrets: SecretValues | None = None,
    agent_server_url: str | None = None,
) -> None:
    await serve_stdio(
        lambda stream: serve_stream(
            stream, env=env, secrets=secrets, agent_server_url=agent_server_url
        )
    )
