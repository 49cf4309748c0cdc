"""The stdio server: the OpenHands agent on a connection, with stdio hygiene."""

from __future__ import annotations

from collections.abc import Mapping

import trio

from .connection import open_agent_connection
from .credentials import SecretValues
from .openhands.agent import open_openhands_agent
from .openhands.sdk import SdkLoader
from .rpc import direct_sender
from .stdio import serve_stdio


class MaskingStream(trio.abc.Stream):
    """A stream whose outgoing bytes have the agent's secret values masked.

    The connection's writer sends whole frames (one or several per `send_all`), so a
    secret can never straddle two calls: this is the last word on what reaches the client,
    whatever produced the frame (an update, an error message, a permission request).
    """

    def __init__(self, inner: trio.abc.Stream, secrets: SecretValues) -> None:
        self._inner = inner
        self._secrets = secrets

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._inner.send_all(
            self._secrets.mask_bytes(bytes(data)) if self._secrets.values else data
        )

    def try_send_now(self, data: bytes | memoryview) -> bytes | memoryview:
        # The peer's immediate write of a response (trio_acp/rpc/_direct.py), masked the
        # same way. What the pipe does not take comes back masked and goes out later through
        # send_all, which masks it once more: masked bytes hold no secret, so that second
        # pass changes nothing (and could only ever hide more, never reveal).
        send_now = direct_sender(self._inner)
        if send_now is None:
            return data
        return send_now(self._secrets.mask_bytes(bytes(data)) if self._secrets.values else data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self._inner.aclose()


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
        async with open_agent_connection(MaskingStream(stream, secrets), agent) as conn:
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
