"""UNSTABLE ACP types, written by hand: methods the spec marks unstable but peers ship.

Everything here comes from the official package's ``schema/v1/schema.unstable.json``
(``@agentclientprotocol/sdk``, the same package as ``types.py``), which may change or
drop it at any time. It is kept out of ``types.py`` on purpose: that module is exactly
what ``scripts/gen_schema.py`` makes of the *stable* schema, and the schema tests hold
every class there to it. Nothing here is exported from ``trio_acp.schema``'s star
namespace; use ``trio_acp.schema.unstable``.

Currently: ``session/fork`` (the ``sessionCapabilities.fork`` capability, its request
and response); client system prompts (``sessionCapabilities.systemPrompt``, ``systemPrompt``
on session/new, load, resume and fork; schema 1.30 made them stable with the same shape);
``session/set_title`` and ``session/status``; ``PromptResponse.usage``; ``session/archive``
and ``session/unarchive`` (``sessionCapabilities.archive``, the ``archived`` filter of
``session/list`` and ``SessionInfo.archived``); the ``subagent_update`` session update.
"""

from typing import Any, Literal

import attrs

from . import types as t
from .methods import MethodSpec

__all__ = [
    "UNSTABLE_AGENT_METHODS",
    "UNSTABLE_CLIENT_METHODS",
    "ClientCapabilities",
    "InitializeRequest",
    "PlanCapabilities",
    "SubagentCapabilities",
    "AgentAuthCapabilities",
    "AuthAccount",
    "AuthState",
    "AuthStatusCapabilities",
    "AuthStatusRequest",
    "AuthStatusResponse",
    "AuthStatusUpdateNotification",
    "KnownAuthState",
    "ArchiveSessionRequest",
    "ArchiveSessionResponse",
    "ForkSessionRequest",
    "ForkSessionResponse",
    "KnownSessionArchiveFilter",
    "KnownSessionStatus",
    "ListSessionsRequest",
    "ListSessionsResponse",
    "KnownSystemPromptMode",
    "LoadSessionRequest",
    "NewSessionRequest",
    "PromptResponse",
    "ResumeSessionRequest",
    "SessionArchiveCapabilities",
    "SessionArchiveFilter",
    "SessionCapabilities",
    "SessionInfo",
    "SessionForkCapabilities",
    "SessionStatus",
    "SessionStatusCapabilities",
    "SessionStatusRequest",
    "SessionStatusResponse",
    "SessionSystemPromptCapabilities",
    "SessionSystemPromptModeCapabilities",
    "SessionSystemPromptOverrideCapabilities",
    "SessionTitleCapabilities",
    "SetSessionTitleRequest",
    "SetSessionTitleResponse",
    "SystemPrompt",
    "SubagentState",
    "SubagentUpdate",
    "SystemPromptMode",
    "UnarchiveSessionRequest",
    "UnarchiveSessionResponse",
    "Usage",
]

#: How the agent combines a client system prompt with its own instructions: ``append``,
#: ``override``, or a custom/future value (kept so that it can be refused by name).
SystemPromptMode = str
KnownSystemPromptMode = Literal["append", "override"]

#: The agent's overall authentication state (`auth/status`).
AuthState = str
KnownAuthState = Literal["authenticated", "unauthenticated", "not_required", "unknown"]

#: Whether the agent has a session in memory (``open``) or only stored (``saved``).
SessionStatus = str
KnownSessionStatus = Literal["open", "saved"]

#: Which sessions `session/list` returns by archive state: ``exclude`` (the default),
#: ``include``, ``only``, or a custom/future value (refused with -32602 by name).
SessionArchiveFilter = str
KnownSessionArchiveFilter = Literal["exclude", "include", "only"]


@attrs.define(kw_only=True)
class SessionForkCapabilities:
    """UNSTABLE. Capabilities for the `session/fork` method (``{}``: supported)."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SessionSystemPromptOverrideCapabilities:
    """UNSTABLE (stable from schema 1.30). The agent can replace its built-in default
    instructions with the client's system prompt (``{}``: supported)."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SessionSystemPromptModeCapabilities:
    """System prompt delivery modes the agent supports in addition to ``append``."""

    #: Whether the agent supports `override` mode.
    override: SessionSystemPromptOverrideCapabilities | None = None
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SessionSystemPromptCapabilities:
    """Client-provided system prompts: ``{}`` means ``append`` mode only."""

    #: Delivery modes supported in addition to `append` (omitted: only `append`).
    mode: SessionSystemPromptModeCapabilities | None = None
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SessionTitleCapabilities:
    """UNSTABLE. Capabilities for `session/set_title` (``{}``: clients can set titles)."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SessionStatusCapabilities:
    """UNSTABLE. Capabilities for `session/status` (``{}``: supported)."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SessionArchiveCapabilities:
    """UNSTABLE. `session/archive` and `session/unarchive`, the `archived` filter on
    `session/list` and `SessionInfo.archived` (``{}``: all supported)."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SessionCapabilities(t.SessionCapabilities):
    """The stable session capabilities plus the UNSTABLE ones.

    A subclass, so it goes wherever the stable class goes (``AgentCapabilities``); the
    converter encodes an instance as its own class, the extra fields included.
    """

    #: Whether the agent supports `session/fork`.
    fork: SessionForkCapabilities | None = None
    #: Whether the agent supports `systemPrompt` on session lifecycle requests.
    system_prompt: SessionSystemPromptCapabilities | None = None
    #: Whether the agent supports `session/set_title`.
    title: SessionTitleCapabilities | None = None
    #: Whether the agent supports `session/status`.
    status: SessionStatusCapabilities | None = None
    #: Whether the agent supports `session/archive` and `session/unarchive`.
    archive: SessionArchiveCapabilities | None = None


@attrs.define(kw_only=True)
class SystemPrompt:
    """Client-provided system-level instructions for a session.

    Agents that cannot apply it (an unadvertised mode, an unsupported content block)
    MUST return an error instead of creating, loading, resuming or forking the session.
    """

    #: How the agent combines `content` with its own instructions.
    mode: SystemPromptMode
    #: The system prompt content: `text` blocks (clients MUST NOT send an empty array).
    content: list[t.ContentBlock]
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class NewSessionRequest(t.NewSessionRequest):
    """The stable request plus the client's `systemPrompt`."""

    #: System-level instructions for the new session (omitted: the agent's own).
    system_prompt: SystemPrompt | None = None


@attrs.define(kw_only=True)
class LoadSessionRequest(t.LoadSessionRequest):
    """The stable request plus the client's `systemPrompt`."""

    #: System-level instructions for the loaded session (omitted: the agent's own).
    system_prompt: SystemPrompt | None = None


@attrs.define(kw_only=True)
class ResumeSessionRequest(t.ResumeSessionRequest):
    """The stable request plus the client's `systemPrompt`."""

    #: System-level instructions for the resumed session (omitted: the agent's own).
    system_prompt: SystemPrompt | None = None


@attrs.define(kw_only=True)
class SetSessionTitleRequest:
    """UNSTABLE. Request parameters for setting the title of a session."""

    #: The ID of the session.
    session_id: t.SessionId
    #: The title to set.
    title: str
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SetSessionTitleResponse:
    """UNSTABLE. The title the agent stored (clients SHOULD display it)."""

    title: str
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SessionStatusRequest:
    """UNSTABLE. Request parameters for checking the status of a session.

    No side effects; a session the agent does not know gets -32002 with its id in `data`.
    """

    session_id: t.SessionId
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SessionStatusResponse:
    """UNSTABLE. Whether the agent has the session in memory (a snapshot)."""

    status: SessionStatus
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class Usage:
    """UNSTABLE. Token usage information for a prompt turn."""

    #: Sum of all token types.
    total_tokens: int
    #: Input tokens.
    input_tokens: int
    #: Output tokens.
    output_tokens: int
    #: Thought/reasoning tokens.
    thought_tokens: int | None = None
    #: Cache read tokens.
    cached_read_tokens: int | None = None
    #: Cache write tokens.
    cached_write_tokens: int | None = None
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class PromptResponse(t.PromptResponse):
    """The stable response plus the UNSTABLE token `usage` of the turn."""

    usage: Usage | None = None


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
    #: `sessionCapabilities.systemPrompt`).
    system_prompt: SystemPrompt | None = None
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


@attrs.define(kw_only=True)
class AuthStatusCapabilities:
    """UNSTABLE. The agent supports `auth/status` (``{}``)."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class AgentAuthCapabilities(t.AgentAuthCapabilities):
    """The stable auth capabilities plus the UNSTABLE `status`."""

    #: Whether the agent supports the `auth/status` method.
    status: AuthStatusCapabilities | None = None


@attrs.define(kw_only=True)
class AuthAccount:
    """UNSTABLE. An account or credential the agent has configured (display only)."""

    #: Human-readable name for the account.
    label: str
    #: Whether the agent currently uses this account by default.
    active: bool | None = None
    name: str | None = None
    email: str | None = None
    organization: str | None = None
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class AuthStatusRequest:
    """UNSTABLE. `auth/status`: the agent's authentication state, unchanged by asking
    (never answered -32000)."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class AuthStatusResponse:
    """UNSTABLE. Response to `auth/status`."""

    #: Whether the agent can start sessions without the user signing in first.
    state: AuthState
    #: The accounts the agent has configured, for display.
    accounts: list[AuthAccount] | None = None
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class AuthStatusUpdateNotification:
    """UNSTABLE. `auth/status_update`: the agent's authentication state changed."""

    state: AuthState
    accounts: list[AuthAccount] | None = None
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class PlanCapabilities:
    """UNSTABLE. The client takes `plan_update` and `plan_removed` updates (``{}``)."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SubagentCapabilities:
    """UNSTABLE. The client understands exposed subagent sessions (``{}``)."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class ClientCapabilities(t.ClientCapabilities):
    """The stable client capabilities plus the UNSTABLE `plan` and `subagents`."""

    #: Whether the client supports `plan_update` and `plan_removed` session updates.
    plan: PlanCapabilities | None = None
    #: Whether the client understands exposed subagent sessions.
    subagents: SubagentCapabilities | None = None


@attrs.define(kw_only=True)
class InitializeRequest(t.InitializeRequest):
    """The stable request, its client capabilities read with the unstable fields."""

    client_capabilities: ClientCapabilities | None = None


@attrs.define(kw_only=True)
class ArchiveSessionRequest:
    """UNSTABLE. Archive a session: hidden from default `session/list` results, its id and
    saved history kept. An active session is closed first (its work cancelled). Archiving
    an archived session succeeds; one that does not exist gets -32002."""

    session_id: t.SessionId
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class ArchiveSessionResponse:
    """UNSTABLE. Response from archiving a session."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class UnarchiveSessionRequest:
    """UNSTABLE. Return a session to default `session/list` results (never loads or
    resumes it). Unarchiving a session that is not archived succeeds; one that does not
    exist gets -32002."""

    session_id: t.SessionId
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class UnarchiveSessionResponse:
    """UNSTABLE. Response from unarchiving a session."""

    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class ListSessionsRequest(t.ListSessionsRequest):
    """The stable request plus the UNSTABLE `archived` filter (omitted: ``exclude``)."""

    archived: SessionArchiveFilter | None = None


@attrs.define(kw_only=True)
class SessionInfo(t.SessionInfo):
    """The stable entry plus the UNSTABLE `archived` flag (omitted: not reported)."""

    archived: bool | None = None


@attrs.define(kw_only=True)
class ListSessionsResponse(t.ListSessionsResponse):
    """The stable response, its entries encoded with the UNSTABLE `archived` flag (a list
    is encoded by its declared item type: `SessionInfo` here, not the stable one)."""

    sessions: list[SessionInfo]  # type: ignore[assignment]


@attrs.define(kw_only=True)
class SubagentState:
    """UNSTABLE `StateUpdate`: a child's foreground-work state, a whole snapshot.

    ``running``; ``idle`` (done for now, with its `stop_reason` — ``end_turn``,
    ``cancelled``, ... — and `usage` when known); ``requires_action``; ``unknown``. One class
    for the schema's variants: the ones sent here differ only by these optional fields.
    """

    state: str
    stop_reason: t.StopReason | None = None
    usage: Usage | None = None
    #: With `stop_reason` ``error``: the failure, as a JSON-RPC error object.
    error: t.Error | None = None
    meta: dict[str, Any] | None = None


@attrs.define(kw_only=True)
class SubagentUpdate:
    """UNSTABLE `subagent_update` (a `SessionUpdate` variant, sent on the parent session):
    announces a child session the parent created and owns, or patches its metadata.

    Only `session_id` is required; an omitted field keeps its value (`attrs` None here is
    omitted on the wire: this class never clears a field). The first update for a child
    MUST come before any of the child's own traffic.
    """

    session_id: t.SessionId
    title: str | None = None
    description: str | None = None
    state: SubagentState | None = None
    meta: dict[str, Any] | None = None


#: Unstable methods an agent may serve (client -> agent), by name.
UNSTABLE_AGENT_METHODS: dict[str, MethodSpec] = {
    "session/fork": MethodSpec("session/fork", ForkSessionRequest, ForkSessionResponse),
    # The stable methods whose params or result gained unstable fields: the subclasses
    # decode and encode them (the stable table in methods.py stays the schema's own).
    "initialize": MethodSpec("initialize", InitializeRequest, t.InitializeResponse),
    "session/new": MethodSpec("session/new", NewSessionRequest, t.NewSessionResponse),
    "session/load": MethodSpec("session/load", LoadSessionRequest, t.LoadSessionResponse),
    "session/resume": MethodSpec("session/resume", ResumeSessionRequest, t.ResumeSessionResponse),
    "session/prompt": MethodSpec("session/prompt", t.PromptRequest, PromptResponse),
    "session/set_title": MethodSpec(
        "session/set_title", SetSessionTitleRequest, SetSessionTitleResponse
    ),
    "session/status": MethodSpec("session/status", SessionStatusRequest, SessionStatusResponse),
    "auth/status": MethodSpec("auth/status", AuthStatusRequest, AuthStatusResponse),
    "session/archive": MethodSpec("session/archive", ArchiveSessionRequest, ArchiveSessionResponse),
    "session/unarchive": MethodSpec(
        "session/unarchive", UnarchiveSessionRequest, UnarchiveSessionResponse
    ),
    "session/list": MethodSpec("session/list", ListSessionsRequest, ListSessionsResponse),
}

#: Unstable methods a client may serve (agent -> client), by name.
UNSTABLE_CLIENT_METHODS: dict[str, MethodSpec] = {
    "auth/status_update": MethodSpec("auth/status_update", AuthStatusUpdateNotification, None),
}
