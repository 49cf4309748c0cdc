"""The stdio server: the OpenHands agent on a connection, with stdio hygiene."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import trio

from . import schema
from .connection import open_agent_connection
from .credentials import SecretValues
from .exception_groups import leaves, reraise
from .openhands.front import FrontAgent
from .openhands.sessions.commands import available_commands
from .openhands.sessions.tool_call_stop import STOPPABLE_TOOLS
from .openhands.sign_in import SignIn
from .stdio import serve_stdio
from .v2.stream import negotiated_stream

if TYPE_CHECKING:
    from .openhands.agent import OpenHandsAgent
    from .openhands.sdk import SdkLoader


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
    secrets = secrets if secrets is not None else SecretValues()
    # `initialize` is answered by the front before the agent's modules are imported; the
    # connection masks every frame with the agent's secrets (openhands/front.py).
    front = FrontAgent(sign_in=SignIn(env), secrets=secrets)
    try:
        await _serve_front(stream, front, sdk_loader, env, secrets, agent_server_url)
    except BaseExceptionGroup as group:
        # One clear exception, never Trio's group (docs/ARCHITECTURE.md#d8).
        failures = [leaf for leaf in leaves(group) if not isinstance(leaf, trio.Cancelled)]
        reraise((failures or leaves(group))[0])


async def _serve_front(
    stream: trio.abc.Stream,
    front: FrontAgent,
    sdk_loader: SdkLoader | None,
    env: Mapping[str, str] | None,
    secrets: SecretValues,
    agent_server_url: str | None,
) -> None:
    # A client that asks for ACP v2 in its `initialize` gets the v2 gateway in front of the
    # agent (trio_acp/v2, docs/v2.md); any other gets the stream as it is.
    commands = schema.to_wire(available_commands()).get("availableCommands")
    # Set when the client hung up: the agent then closes its sessions as it always did
    # (their turns cancelled and answered, their files saved), never cut by a cancel.
    closed = trio.Event()
    opening = False  # the agent is open or opening: it closes its sessions itself
    async with (
        negotiated_stream(
            stream,
            mask=front.frame_mask(),
            available_commands=commands,
            stoppable_tools=STOPPABLE_TOOLS,
        ) as s,
        open_agent_connection(s, front) as conn,
        trio.open_nursery() as nursery,
    ):

        async def agent_when_needed() -> None:
            nonlocal opening
            await front.needed.wait()
            # The agent's modules (~0.3 s of CPU) import in a thread: in the Trio thread
            # they would hold up a stdin EOF that comes meanwhile (an editor that quits
            # right after `initialize`), which then abandons them (bench/README.md, "Idle
            # sessions and exit"). Then the SDK's import (~7 s of CPU) in a thread, which
            # neither `initialize` nor `session/new` waits for (sessions/deferred_build.py;
            # docs/ARCHITECTURE.md#d3-an-instant-initialize). Under serve_stdio this runs
            # after fd 1 points at stderr: nothing the import prints can reach the wire.
            open_openhands_agent, loader_class = await trio.to_thread.run_sync(
                import_agent, abandon_on_cancel=True
            )
            opening = True  # from here on the agent closes its sessions, never cut short
            loader = sdk_loader or loader_class()
            async with open_openhands_agent(
                sdk_loader=loader,
                env=env,
                secrets=secrets,
                agent_server_url=agent_server_url,
                sign_in=front.sign_in,
            ) as agent:
                front.attach(agent)
                await closed.wait()

        nursery.start_soon(agent_when_needed)
        await conn.wait_closed()
        closed.set()
        if not opening:  # never asked for, or still importing: nothing to close
            nursery.cancel_scope.cancel()


def import_agent() -> tuple[
    Callable[..., AbstractAsyncContextManager[OpenHandsAgent]], type[SdkLoader]
]:
    """The agent's entry point and the SDK loader, imported (blocking: run in a thread)."""
    from .openhands.agent import open_openhands_agent
    from .openhands.sdk import SdkLoader

    return open_openhands_agent, SdkLoader


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
