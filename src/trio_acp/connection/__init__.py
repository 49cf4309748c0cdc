"""Typed ACP connections over the JSON-RPC peer, for both ends of the wire.

- `open_agent_connection(stream, agent)` serves an `Agent`; one that subclasses
  `AgentHooks` is given a `ClientProxy` (`on_connect`) and hears of prompts as they are read.
- `open_client_connection(stream, client)` drives an agent through an `AgentProxy`,
  answering the agent's calls with a `Client`.
"""

from ._agent_side import (
    AGENT_METHOD_ATTRS,
    Agent,
    AgentHooks,
    AgentSideConnection,
    CapabilityError,
    ClientProxy,
    open_agent_connection,
    serve_agent,
)
from ._client_side import (
    CLIENT_METHOD_ATTRS,
    AgentProxy,
    Client,
    ClientSideConnection,
    open_client_connection,
)

__all__ = [
    "AGENT_METHOD_ATTRS",
    "CLIENT_METHOD_ATTRS",
    "Agent",
    "AgentHooks",
    "AgentProxy",
    "AgentSideConnection",
    "CapabilityError",
    "Client",
    "ClientProxy",
    "ClientSideConnection",
    "open_agent_connection",
    "open_client_connection",
    "serve_agent",
]
