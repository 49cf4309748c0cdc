"""The agent's end of an ACP connection: client calls in, `Client` proxy out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, cast, runtime_checkable

import trio

from .. import schema
from ..rpc import ErrorCode, FrameMask, Peer, RequestError, open_peer
from ..schema import unstable
from ..schema.unstable import UNSTABLE_AGENT_METHODS
from ._dispatch import Proxy, TypedHandler, build_params, build_routes, missing_required

AGENT_METHOD_ATTRS = {
    "initialize": "initialize",
    "authenticate": "authenticate",
    "logout": "logout",
    "session/new": "new_session",
    "session/load": "load_session",
    "session/list": "list_sessions",
    "session/resume": "resume_session",
    "session/close": "close_session",
    "session/delete": "delete_session",
    # UNSTABLE in the spec (schema/unstable.py), shipped by leading peers.
    "session/fork": "fork_session",
    "session/set_title": "set_session_title",
    "session/status": "session_status",
    "session/archive": "archive_session",
    "session/unarchive": "unarchive_session",
    "auth/status": "auth_status",
    "session/set_mode": "set_session_mode",
    "session/set_config_option": "set_session_config_option",
    "session/prompt": "prompt",
    "session/cancel": "cancel",
}
REQUIRED_AGENT_METHODS = {"initialize", "session/new", "session/prompt", "session/cancel"}


@runtime_checkable
class Agent(Protocol):
    """What an ACP agent implements. Each method takes the decoded request object.

    Required: `initialize`, `new_session`, `prompt`, `cancel`. Optional (answered -32601
    when absent): `authenticate`, `logout`, `load_session`, `list_sessions`,
    `resume_session`, `close_session`, `delete_session`, `set_session_mode`,
    `set_session_config_option`, `fork_session` (unstable: `session/fork`), and the extension hooks
    `ext_method(method, params) -> result` / `ext_notification(method, params)`.
    To hear of its connection (`on_connect`, `prompt_received`), an agent subclasses
    `AgentHooks`.
    An agent that holds secrets masks them in every frame it writes (`AgentHooks.frame_mask`).
    Raise `trio_acp.rpc.RequestError` to answer an error.
    """

    async def initialize(self, params: schema.InitializeRequest) -> schema.InitializeResponse: ...
    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse: ...
    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse: ...
    async def cancel(self, params: schema.CancelNotification) -> None: ...


class CapabilityError(RequestError):
    """The agent tried a client method the client did not advertise (spec: MUST NOT)."""

    def __init__(self, what: str) -> None:
        super().__init__(
            int(ErrorCode.METHOD_NOT_FOUND),
            f"the client did not advertise {what}; the agent must not call it",
        )


class ClientProxy(Proxy):
    """The agent's handle on the client. Refuses calls the client's capabilities forbid.

    Every method takes either the request object or its fields as keyword arguments:
    ``await client.session_update(session_id=sid, update=AgentMessageChunk(...))``.
    """

    def __init__(self, peer: Peer | None) -> None:
        super().__init__(peer, schema.CLIENT_METHODS)
        # Until `initialize` says otherwise, every capability is unsupported (spec: omitted
        # capabilities MUST be treated as unsupported).
        self.capabilities: schema.ClientCapabilities = schema.ClientCapabilities()
        self.client_info: schema.Implementation | None = None
        # The agent's say on how an update is spelled for this client (its capabilities,
        # the notification -> the notifications to send, in order): e.g. the unstable
        # `plan_update` for a client that takes it, or a sub-agent's announcement before
        # its delegating call's start. None: as given.
        self.update_hook: (
            Callable[
                [schema.ClientCapabilities, schema.SessionNotification],
                schema.SessionNotification | list[schema.SessionNotification],
            ]
            | None
        ) = None

    def _require_fs(self, flag: str, what: str) -> None:
        fs = self.capabilities.fs
        if fs is None or getattr(fs, flag) is not True:
            raise CapabilityError(what)

    def _require_terminal(self) -> None:
        if self.capabilities.terminal is not True:
            raise CapabilityError("terminal")

    def _require_session_flag(self, flag: str, what: str) -> None:
        if getattr(self.capabilities.session, flag, None) is None:
            raise CapabilityError(what)

    async def session_update(
        self,
        params: schema.SessionNotification | None = None,
        /,
        *,
        at_once: bool = False,
        **kw: object,
    ) -> None:
        """``at_once``: the last update the sender has for now (`Peer.notify`)."""
        notification = build_params(schema.SessionNotification, params, kw)
        spelled = (
            [notification]
            if self.update_hook is None
            else self.update_hook(self.capabilities, notification)
        )
        if not isinstance(spelled, list):
            spelled = [spelled]
        for i, each in enumerate(spelled):
            # Updates a client must have asked for (spec: agents MUST only send them then).
            if isinstance(each.update, schema.NoticeUpdate):
                self._require_session_flag("notices", "session.notices")
            elif isinstance(each.update, (schema.CompactionUpdate, schema.CompactionSummaryChunk)):
                self._require_session_flag("compaction", "session.compaction")
            last = i == len(spelled) - 1
            await self._notify("session/update", each, at_once=at_once and last)

    async def request_permission(
        self, params: schema.RequestPermissionRequest | None = None, /, **kw: object
    ) -> schema.RequestPermissionResponse:
        return await self._request(
            "session/request_permission", build_params(schema.RequestPermissionRequest, params, kw)
        )

    async def read_text_file(
        self, params: schema.ReadTextFileRequest | None = None, /, **kw: object
    ) -> schema.ReadTextFileResponse:
        self._require_fs("read_text_file", "fs.readTextFile")
        return await self._request(
            "fs/read_text_file", build_params(schema.ReadTextFileRequest, params, kw)
        )

    async def write_text_file(
        self, params: schema.WriteTextFileRequest | None = None, /, **kw: object
    ) -> schema.WriteTextFileResponse:
        self._require_fs("write_text_file", "fs.writeTextFile")
        return await self._request(
            "fs/write_text_file", build_params(schema.WriteTextFileRequest, params, kw)
        )

    async def create_terminal(
        self,
        params: schema.CreateTerminalRequest | None = None,
        /,
        *,
        on_late: Callable[[schema.CreateTerminalResponse], None] | None = None,
        **kw: object,
    ) -> schema.CreateTerminalResponse:
        """``on_late``: if this call is cancelled before the answer, the client may still
        create the terminal (a person approving it late, a client ignoring
        ``$/cancel_request``); its answer then goes to ``on_late``, so the terminal can
        be released (`Peer.request`)."""
        self._require_terminal()
        return await self._request(
            "terminal/create",
            build_params(schema.CreateTerminalRequest, params, kw),
            on_late=on_late,
        )

    async def terminal_output(
        self, params: schema.TerminalOutputRequest | None = None, /, **kw: object
    ) -> schema.TerminalOutputResponse:
        self._require_terminal()
        return await self._request(
            "terminal/output", build_params(schema.TerminalOutputRequest, params, kw)
        )

    async def release_terminal(
        self, params: schema.ReleaseTerminalRequest | None = None, /, **kw: object
    ) -> schema.ReleaseTerminalResponse:
        self._require_terminal()
        return await self._request(
            "terminal/release", build_params(schema.ReleaseTerminalRequest, params, kw)
        )

    async def wait_for_terminal_exit(
        self, params: schema.WaitForTerminalExitRequest | None = None, /, **kw: object
    ) -> schema.WaitForTerminalExitResponse:
        self._require_terminal()
        return await self._request(
            "terminal/wait_for_exit", build_params(schema.WaitForTerminalExitRequest, params, kw)
        )

    async def kill_terminal(
        self, params: schema.KillTerminalRequest | None = None, /, **kw: object
    ) -> schema.KillTerminalResponse:
        self._require_terminal()
        return await self._request(
            "terminal/kill", build_params(schema.KillTerminalRequest, params, kw)
        )

    async def create_elicitation(
        self, params: schema.CreateElicitationRequest | None = None, /, **kw: object
    ) -> schema.CreateElicitationResponse:
        # A union alias: no class to call, so only a request object will do (keyword
        # arguments raise TypeError, as `Union[...](**kw)` does).
        union = cast(
            "Callable[..., schema.CreateElicitationRequest]", schema.CreateElicitationRequest
        )
        req = build_params(union, params, kw)
        mode = schema.to_wire(req).get("mode")
        elicitation = self.capabilities.elicitation
        # `elicitation: {}` advertises no mode at all (unlike MCP): each mode is its own flag.
        if elicitation is None or getattr(elicitation, str(mode), None) is None:
            raise CapabilityError(f"elicitation.{mode}")
        return await self._request("elicitation/create", req)

    async def complete_elicitation(
        self, params: schema.CompleteElicitationNotification | None = None, /, **kw: object
    ) -> None:
        await self._notify(
            "elicitation/complete", build_params(schema.CompleteElicitationNotification, params, kw)
        )

    async def auth_status_update(
        self, params: unstable.AuthStatusUpdateNotification | None = None, /, **kw: object
    ) -> None:
        """UNSTABLE: `auth/status_update`, the agent's authentication state changed. The
        spec gives it no client capability: the caller decides who can take it."""
        await self._notify(
            "auth/status_update", build_params(unstable.AuthStatusUpdateNotification, params, kw)
        )


class AgentSideConnection:
    """A live connection seen from the agent: `client` calls the client."""

    def __init__(self, peer: Peer, client: ClientProxy) -> None:
        self.peer = peer
        self.client = client

    async def wait_closed(self) -> None:
        await self.peer.wait_closed()

    async def aclose(self) -> None:
        await self.peer.aclose()


_AGENT_ROUTES = build_routes(
    {**schema.AGENT_METHODS, **UNSTABLE_AGENT_METHODS}, AGENT_METHOD_ATTRS, REQUIRED_AGENT_METHODS
)


class AgentHooks:
    """What an agent may hear of its connection besides ACP's methods: subclass it.

    The hooks do nothing here; an agent overrides the ones it needs. `open_agent_connection`
    calls them only on an agent that is an `AgentHooks` (they are not looked up by name).
    """

    def on_connect(self, client: ClientProxy) -> None:
        """Called with the agent's `ClientProxy` before any request reaches the agent."""

    def prompt_received(self, params: schema.PromptRequest) -> None:
        """Called the moment a ``session/prompt`` is read, in wire order with the
        notifications around it (a ``session/cancel`` right behind it then finds it),
        before the agent's `prompt` call, which gets the same ``params`` object. Must be
        quick and must not raise (exceptions are logged and ignored)."""

    def frame_mask(self) -> FrameMask | None:
        """What the connection applies to every byte it writes (`trio_acp.rpc.open_peer`'s
        ``mask``), asked once when it opens; None (here): nothing. An agent that holds
        secrets returns its masking function, so no frame carries them on any stream."""
        return None


@asynccontextmanager
async def open_agent_connection(
    stream: trio.abc.Stream, agent: object, **peer_options: Any
) -> AsyncIterator[AgentSideConnection]:
    """Serve `agent` on `stream` for the duration of the block; ``peer_options`` are
    `trio_acp.rpc.open_peer`'s. An agent that is an `AgentHooks` hears of its connection.

    Typical use: ``async with open_agent_connection(stream, agent) as conn: await conn.wait_closed()``.
    """
    missing = missing_required(agent, _AGENT_ROUTES)
    if missing:
        raise TypeError(
            f"{type(agent).__name__} lacks required ACP agent methods: {', '.join(missing)}"
        )
    unheard = _unheard_hooks(agent)
    if unheard:
        raise TypeError(
            f"{type(agent).__name__} defines {' and '.join(unheard)}, which the connection "
            "calls only on a subclass of trio_acp.connection.AgentHooks: subclass it"
        )
    # The proxy exists before the peer so that the agent holds it before any request can
    # reach it; its peer is bound the moment the peer exists.
    client = ClientProxy(None)

    def on_request(method: str, params: object) -> None:
        if method == "initialize" and isinstance(params, schema.InitializeRequest):
            client.capabilities = params.client_capabilities or schema.ClientCapabilities()
            client.client_info = params.client_info

    hooks = agent if isinstance(agent, AgentHooks) else None
    if hooks is not None:
        hooks.on_connect(client)
        # Every frame passes the agent's mask in the connection's writer, whoever made it
        # and whatever the stream (docs/ARCHITECTURE.md#d12).
        peer_options.setdefault("mask", hooks.frame_mask())
    handler = TypedHandler(
        agent,
        _AGENT_ROUTES,
        on_request=on_request,
        on_received={"session/prompt": hooks.prompt_received} if hooks is not None else None,
    )
    async with open_peer(
        stream,
        handler,
        request_received=handler.request_received if hooks is not None else None,
        **peer_options,
    ) as peer:
        client._peer = peer
        yield AgentSideConnection(peer, client)


def _unheard_hooks(agent: object) -> list[str]:
    """The hooks `agent` defines that the connection would not call.

    They used to be found on any agent by name: an agent written then, not subclassing
    `AgentHooks`, would otherwise lose them without a word (`prompt_received` is what
    keeps a prompt and a cancel right behind it in order).
    """
    if isinstance(agent, AgentHooks):
        return []
    return [
        name
        for name in ("on_connect", "prompt_received")
        if callable(getattr(type(agent), name, None))
    ]


async def serve_agent(stream: trio.abc.Stream, agent: object, **peer_options: Any) -> None:
    """Serve `agent` on `stream` until the client hangs up."""
    async with open_agent_connection(stream, agent, **peer_options) as conn:
        await conn.wait_closed()
