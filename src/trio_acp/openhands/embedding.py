"""The OpenHands agent inside a Trio program: the public entry points.

Two ways in, both async context managers that close every session on the way out and
raise one exception, never a Trio exception group (docs/ARCHITECTURE.md#d8):

- `open_openhands(client, ...)` runs the agent in this process and yields your
  `AgentProxy` on it. The agent and your client talk ACP over an in-memory stream, through
  the same framing, schema and dispatch as over stdio, so what works here works in an
  editor. A failed request raises `trio_acp.rpc.RequestError` (its `code`, `message`,
  `data` are the JSON-RPC error the editor would see), and everything the agent sends
  has its credentials masked, as an editor's frames have (docs/ARCHITECTURE.md#d12).
- `open_openhands_agent(...)` yields the ACP `Agent` object itself, for serving it on a
  stream of your own: `trio_acp.connection.open_agent_connection(stream, agent)` (which
  masks its frames with the agent's `mask_frame`).

The OpenHands SDK is imported in a background thread when the agent opens (~8 s; see
docs/ARCHITECTURE.md#d3-an-instant-initialize): `initialize` answers at once and the first
`session/new` waits for the import.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import trio.testing

from trio_acp.connection import AgentProxy, Client, open_agent_connection, open_client_connection
from trio_acp.credentials import SecretValues
from trio_acp.openhands import agent as _agent
from trio_acp.openhands.agent import OpenHandsAgent
from trio_acp.openhands.sdk import SdkLoader

__all__ = ["OpenHandsAgent", "open_openhands", "open_openhands_agent"]


@asynccontextmanager
async def open_openhands_agent(
    *,
    env: Mapping[str, str] | None = None,
    agent_server_url: str | None = None,
    secrets: SecretValues | None = None,
    sdk_loader: SdkLoader | None = None,
) -> AsyncIterator[OpenHandsAgent]:
    """The OpenHands ACP agent for the duration of the block; leaving it closes every session.

    `env` is where settings come from, as an editor's environment would give them
    (`LLM_MODEL`, `LLM_API_KEY`, `OPENHANDS_PERSISTENCE_DIR`, ...; README "Models");
    default: this process's environment. `agent_server_url` runs new sessions on an
    OpenHands agent-server (docs/agent-server.md). `secrets` collects the credential values
    the agent learns, for masking what you log. `sdk_loader` shares one SDK import between
    several agents of a process (each otherwise starts its own thread; the import itself
    happens once per process either way).

    Raises the body's exception as itself, else the one failure inside the agent.
    """
    async with _agent.open_openhands_agent(
        env=env, agent_server_url=agent_server_url, secrets=secrets, sdk_loader=sdk_loader
    ) as agent:
        yield agent


@asynccontextmanager
async def open_openhands(
    client: Client,
    *,
    env: Mapping[str, str] | None = None,
    agent_server_url: str | None = None,
    secrets: SecretValues | None = None,
    sdk_loader: SdkLoader | None = None,
) -> AsyncIterator[AgentProxy]:
    """Run the OpenHands agent in this process and yield your handle on it.

    `client` answers the agent's calls: `session_update` (each streamed update, called in
    order; keep it quick) and `request_permission` are required, the file system and
    terminal methods optional (`trio_acp.connection.Client`). Call the agent through the
    proxy as an editor would: `initialize`, `new_session`, `prompt`, `cancel`, ... with
    request objects or their fields as keyword arguments (`trio_acp.schema`). To stop a
    turn, `await agent.cancel(session_id=...)`: its `prompt` call then returns with the
    stop reason `cancelled`. The other options are `open_openhands_agent`'s.

    A request the agent refuses raises `trio_acp.rpc.RequestError`; leaving the block
    closes every session; anything else raises one exception, never a group.
    """
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    async with (
        open_openhands_agent(
            env=env, agent_server_url=agent_server_url, secrets=secrets, sdk_loader=sdk_loader
        ) as agent,
        open_agent_connection(agent_stream, agent),
        open_client_connection(client_stream, client) as connection,
    ):
        yield connection.agent
