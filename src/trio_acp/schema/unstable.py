"""UNSTABLE ACP types, written by hand: methods the spec marks unstable but peers ship.

Everything here comes from the official package's ``schema/v1/schema.unstable.json``
(``@agentclientprotocol/sdk``, the same package as ``types.py``), which may change or
drop it at any time. It is kept out of ``types.py`` on purpose: that module is exactly
what ``scripts/gen_schema.py`` makes of the *stable* schema, and the schema tests hold
every class there to it. Nothing here is exported from ``trio_acp.schema``'s star
namespace; use ``trio_acp.schema.unstable``.

Currently: ``session/fork`` (the ``sessionCapabilities.fork`` capability, its request
and response).
"""

from typing import Any

import attrs

from . import types as t
from .methods import MethodSpec

__all__ = [
    "UNSTABLE_AGENT_METHODS",
    "ForkSessionRequest",
    "ForkSessionResponse",
    "SessionCapabilities",
    "SessionForkCapabilities",
]


@attrs.define(kw_only=True)
class SessionForkCapabilities:
    """UNSTABLE. Capabilities for the `session/fork` method (``{}``: supported)."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SessionCapabilities(t.SessionCapabilities):
    """The stable session capabilities plus the UNSTABLE ``fork``.

    A subclass, so it goes wherever the stable class goes (``AgentCapabilities``); the
    converter encodes an instance as its own class, ``fork`` included.
    """

    #: Whether the agent supports `session/fork`.
    fork: SessionForkCapabilities | None = None


@attrs.define(kw_only=True)
class ForkSessionRequest:
    """UNSTABLE. Request parameters for forking an existing session.

    Creates a new session based on the context of an existing one, without affecting the
    original session's history. The schema offers no cut point: the fork has the
    parent's whole history.
    """

    #: The ID of the session to fork.
    session_id: t.SessionId
    #: The working directory for this session. Must be an absolute path.
    cwd: str
    #: Additional workspace roots to activate for this session.
    additional_directories: list[str] | None = None
    #: List of MCP servers to connect to for this session.
    mcp_servers: list[t.McpServer] | None = None
    #: Client-provided system prompt (only for agents advertising
    #: `sessionCapabilities.systemPrompt`; kept as raw JSON so that an agent that does not
    #: can refuse it, as the schema requires, rather than silently ignore it).
    system_prompt: Any = None
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class ForkSessionResponse:
    """UNSTABLE. Response from forking an existing session."""

    #: Unique identifier for the newly created forked session.
    session_id: t.SessionId
    #: Initial mode state if supported by the Agent.
    modes: t.SessionModeState | None = None
    #: Initial session configuration options if supported by the Agent.
    config_options: list[t.SessionConfigOption] | None = None
    meta: dict[str, Any] | None = None


#: Unstable methods an agent may serve (client -> agent), by name.
UNSTABLE_AGENT_METHODS: dict[str, MethodSpec] = {
    "session/fork": MethodSpec("session/fork", ForkSessionRequest, ForkSessionResponse),
}
