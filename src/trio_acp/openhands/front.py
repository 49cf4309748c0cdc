"""The agent's front: `initialize` answered before the agent's own modules are imported.

A new process used to import the whole agent (`agent.py`: its sessions, turns,
translation, the SDK door; ~0.3 s of CPU, as much again as the protocol stack itself)
before it read its first frame, and `initialize` took 1.2-1.6× as long as the echo
agent's (examples/echo_agent.py). The answer needs only `sign_in.py`, whose imports are
light (the settings, litellm's model map read as a file: `setup/audio_models.py`), so the
server (`trio_acp.server`) serves this front at once and imports the agent, and starts
the SDK's import, once `initialize` is answered (`needed`), or as soon as another
request needs it. Every other method is forwarded to the agent once it is there
(`attach`). docs/ARCHITECTURE.md#d3-an-instant-initialize.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from trio_acp import schema
from trio_acp.connection import AGENT_METHOD_ATTRS, AgentHooks, ClientProxy
from trio_acp.credentials import SecretValues
from trio_acp.openhands.sign_in import SignIn
from trio_acp.rpc import FrameMask, RequestError, after_response

if TYPE_CHECKING:
    from trio_acp.openhands.agent import OpenHandsAgent

#: The methods the front forwards: every ACP method but `initialize`.
FORWARDED = {m: attr for m, attr in AGENT_METHOD_ATTRS.items() if m != "initialize"}


class FrontAgent(AgentHooks):
    """Answers `initialize` itself (with the `SignIn` the agent is then built with) and
    forwards the rest to the agent once `attach`ed; masks with the agent's secrets."""

    def __init__(self, *, sign_in: SignIn, secrets: SecretValues) -> None:
        self.sign_in = sign_in
        self._secrets = secrets
        self._client: ClientProxy | None = None
        self._agent: OpenHandsAgent | None = None
        self._attached = trio.Event()
        # Set once the agent is wanted: `initialize` answered, or another request came.
        self.needed = trio.Event()

    def attach(self, agent: OpenHandsAgent) -> None:
        """The agent is imported and open: from now on it serves every other method."""
        if self._client is not None:
            agent.on_connect(self._client)
        self._agent = agent
        self._attached.set()

    async def agent(self) -> OpenHandsAgent:
        """The agent, once attached (asking for it is what gets it imported)."""
        self.needed.set()
        await self._attached.wait()
        assert self._agent is not None
        return self._agent

    # --- AgentHooks ------------------------------------------------------------------

    def on_connect(self, client: ClientProxy) -> None:
        self._client = client

    def prompt_received(self, params: schema.PromptRequest) -> None:
        # A prompt names a session, which only the attached agent can have opened.
        if self._agent is not None:
            self._agent.prompt_received(params)

    def frame_mask(self) -> FrameMask:
        return self._secrets.mask_bytes

    # --- initialize, and the rest ----------------------------------------------------

    async def initialize(self, params: schema.InitializeRequest) -> schema.InitializeResponse:
        async def wanted() -> None:
            self.needed.set()

        # Only after the answer: the imports that follow would hold it back.
        after_response(wanted)
        return self.sign_in.initialize(params)

    async def ext_method(self, method: str, params: Any) -> Any:
        # Our extension methods (`_trio_acp/...`) are the agent's; any other is unknown,
        # answered at once, as before there was one.
        if not method.startswith("_trio_acp/"):
            raise RequestError.method_not_found(method)
        return await (await self.agent()).ext_method(method, params)

    async def cancel(self, params: schema.CancelNotification) -> None:
        # A notification, handled in the reader's task: never wait there. Before the
        # agent there is no session to cancel.
        if self._agent is not None:
            await self._agent.cancel(params)


def _forwarder(method: str, attr: str) -> Callable[[FrontAgent, Any], Awaitable[Any]]:
    async def forward(self: FrontAgent, params: Any) -> Any:
        fn = getattr(await self.agent(), attr, None)
        if fn is None:
            raise RequestError.method_not_found(method)
        return await fn(params)

    forward.__name__ = forward.__qualname__ = attr
    forward.__doc__ = f"`{method}`, answered by the agent."
    return forward


for _method, _attr in FORWARDED.items():
    if _attr not in vars(FrontAgent):
        setattr(FrontAgent, _attr, _forwarder(_method, _attr))
