"""The client's end of an ACP connection: agent calls in, `AgentProxy` out.

Used by tests, the demo, the conformance suite and Trio applications that drive ACP
agents. `session/update` notifications are delivered in wire order and before the
response that follows them, so a `prompt()` call returns only after every update of its
turn has been handed to the client's `session_update`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, runtime_checkable

import trio

from .. import schema
from ..rpc import Peer, open_peer
from ..schema import unstable
from ..schema.unstable import UNSTABLE_AGENT_METHODS
from ._dispatch import Proxy, TypedHandler, build_params, build_routes, missing_required

CLIENT_METHOD_ATTRS = {
    "session/update": "session_update",
    "session/request_permission": "request_permission",
    "fs/read_text_file": "read_text_file",
    "fs/write_text_file": "write_text_file",
    "terminal/create": "create_terminal",
    "terminal/output": "terminal_output",
    "terminal/release": "release_terminal",
    "terminal/wait_for_exit": "wait_for_terminal_exit",
    "terminal/kill": "kill_terminal",
    "elicitation/create": "create_elicitation",
    "elicitation/complete": "complete_elicitation",
}
REQUIRED_CLIENT_METHODS = {"session/update", "session/request_permission"}


@runtime_checkable
class Client(Protocol):
    """What an ACP client implements. Each method takes the decoded request object.

    Required: `session_update` (keep it quick: it runs in the connection's reader, which
    is what keeps updates in order) and `request_permission`. Optional (answered -32601
    when absent): `read_text_file`, `write_text_file`, `create_terminal`,
    `terminal_output`, `release_terminal`, `wait_for_terminal_exit`, `kill_terminal`,
    `create_elicitation`, `complete_elicitation`, `ext_method`, `ext_notification`.
    """

    async def session_update(self, params: schema.SessionNotification) -> None: ...
    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse: ...


class AgentProxy(Proxy):
    """The client's handle on the agent.

    Every method takes either the request object or its fields as keyword arguments:
    ``await agent.prompt(session_id=sid, prompt=[TextContent(text="hi")])``.
    """

    def __init__(self, peer: Peer) -> None:
        super().__init__(peer, {**schema.AGENT_METHODS, **UNSTABLE_AGENT_METHODS})

    async def _call[T](
        self, method: str, cls: Callable[..., T], params: T | None, kw: dict[str, object]
    ) -> Any:  # the decoded result (`schema.from_wire`); each method names its type
        return await self._request(method, build_params(cls, params, kw))

    async def initialize(
        self, params: schema.InitializeRequest | None = None, /, **kw: object
    ) -> schema.InitializeResponse:
        return await self._call("initialize", schema.InitializeRequest, params, kw)

    async def authenticate(
        self, params: schema.AuthenticateRequest | None = None, /, **kw: object
    ) -> schema.AuthenticateResponse:
        return await self._call("authenticate", schema.AuthenticateRequest, params, kw)

    async def logout(
        self, params: schema.LogoutRequest | None = None, /, **kw: object
    ) -> schema.LogoutResponse:
        return await self._call("logout", schema.LogoutRequest, params, kw)

    async def new_session(
        self, params: schema.NewSessionRequest | None = None, /, **kw: object
    ) -> schema.NewSessionResponse:
        return await self._call("session/new", schema.NewSessionRequest, params, kw)

    async def load_session(
        self, params: schema.LoadSessionRequest | None = None, /, **kw: object
    ) -> schema.LoadSessionResponse:
        return await self._call("session/load", schema.LoadSessionRequest, params, kw)

    async def list_sessions(
        self, params: schema.ListSessionsRequest | None = None, /, **kw: object
    ) -> schema.ListSessionsResponse:
        return await self._call("session/list", schema.ListSessionsRequest, params, kw)

    async def resume_session(
        self, params: schema.ResumeSessionRequest | None = None, /, **kw: object
    ) -> schema.ResumeSessionResponse:
        return await self._call("session/resume", schema.ResumeSessionRequest, params, kw)

    async def close_session(
        self, params: schema.CloseSessionRequest | None = None, /, **kw: object
    ) -> schema.CloseSessionResponse:
        return await self._call("session/close", schema.CloseSessionRequest, params, kw)

    async def delete_session(
        self, params: schema.DeleteSessionRequest | None = None, /, **kw: object
    ) -> schema.DeleteSessionResponse:
        return await self._call("session/delete", schema.DeleteSessionRequest, params, kw)

    async def fork_session(
        self, params: unstable.ForkSessionRequest | None = None, /, **kw: object
    ) -> unstable.ForkSessionResponse:
        """UNSTABLE in the spec: `session/fork` (see `trio_acp.schema.unstable`)."""
        return await self._call("session/fork", unstable.ForkSessionRequest, params, kw)

    async def set_session_mode(
        self, params: schema.SetSessionModeRequest | None = None, /, **kw: object
    ) -> schema.SetSessionModeResponse:
        return await self._call("session/set_mode", schema.SetSessionModeRequest, params, kw)

    async def set_session_config_option(
        self, params: schema.SetSessionConfigOptionRequest | None = None, /, **kw: object
    ) -> schema.SetSessionConfigOptionResponse:
        return await self._call(
            "session/set_config_option", schema.SetSessionConfigOptionRequest, params, kw
        )

    async def prompt(
        self, params: schema.PromptRequest | None = None, /, **kw: object
    ) -> schema.PromptResponse:
        return await self._call("session/prompt", schema.PromptRequest, params, kw)

    async def cancel(
        self, params: schema.CancelNotification | None = None, /, **kw: object
    ) -> None:
        await self._notify("session/cancel", build_params(schema.CancelNotification, params, kw))


class ClientSideConnection:
    """A live connection seen from the client: `agent` calls the agent."""

    def __init__(self, peer: Peer, agent: AgentProxy) -> None:
        self.peer = peer
        self.agent = agent

    async def wait_closed(self) -> None:
        await self.peer.wait_closed()

    async def aclose(self) -> None:
        await self.peer.aclose()


_CLIENT_ROUTES = build_routes(schema.CLIENT_METHODS, CLIENT_METHOD_ATTRS, REQUIRED_CLIENT_METHODS)


@asynccontextmanager
async def open_client_connection(
    stream: trio.abc.Stream, client: object, **peer_options: Any
) -> AsyncIterator[ClientSideConnection]:
    """Drive an agent over `stream`, answering its calls with `client`."""
    missing = missing_required(client, _CLIENT_ROUTES)
    if missing:
        raise TypeError(
            f"{type(client).__name__} lacks required ACP client methods: {', '.join(missing)}"
        )
    async with open_peer(stream, TypedHandler(client, _CLIENT_ROUTES), **peer_options) as peer:
        yield ClientSideConnection(peer, AgentProxy(peer))
