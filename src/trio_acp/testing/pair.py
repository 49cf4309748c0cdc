"""An agent and a client connected in memory, for tests and Trio applications.

Both ends run the real stack (framing, JSON, schema) over an in-memory stream pair, so
what works here works over stdio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from ..connection import (
    AgentSideConnection,
    ClientSideConnection,
    open_agent_connection,
    open_client_connection,
)


@asynccontextmanager
async def open_in_memory_pair(
    agent: Any, client: Any, **peer_options: Any
) -> AsyncIterator[tuple[AgentSideConnection, ClientSideConnection]]:
    """Yield `(agent_connection, client_connection)`; drive the agent via `client_connection.agent`."""
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    async with open_agent_connection(agent_stream, agent, **peer_options) as agent_conn:
        async with open_client_connection(client_stream, client, **peer_options) as client_conn:
            yield agent_conn, client_conn
