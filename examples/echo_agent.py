"""A small ACP agent on trio-acp's protocol stack: it echoes prompts back.

It exercises the whole stack without any model:
- `hello` → the prompt's text comes back as `agent_message_chunk`s;
- `slow N` → N chunks 50 ms apart, so a client can cancel mid-turn (`cancelled` result);
- `flood N` → N one-word chunks as fast as possible (the throughput benchmark);
- `ask` → a `session/request_permission` round trip; the answer is echoed;
- `_echo/ping` (extension method) → `{"pong": params}`.

Run it under any ACP client: `python examples/echo_agent.py`.
"""

from __future__ import annotations

import uuid

import trio

from trio_acp import schema
from trio_acp.connection import AgentHooks, ClientProxy, serve_agent
from trio_acp.rpc import RequestError
from trio_acp.stdio import serve_stdio


class EchoAgent(AgentHooks):
    def __init__(self) -> None:
        self.client: ClientProxy | None = None
        self.sessions: dict[str, trio.CancelScope | None] = {}

    def on_connect(self, client: ClientProxy) -> None:
        self.client = client

    async def initialize(self, params: schema.InitializeRequest) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=schema.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                prompt_capabilities=schema.PromptCapabilities(embedded_context=True)
            ),
            auth_methods=[],
            agent_info=schema.Implementation(name="trio-acp-echo", version="0.1.0"),
        )

    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        session_id = str(uuid.uuid4())
        self.sessions[session_id] = None
        return schema.NewSessionResponse(session_id=session_id)

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        if params.session_id not in self.sessions:
            raise RequestError.resource_not_found(params.session_id)
        text = " ".join(
            block.text for block in params.prompt if isinstance(block, schema.TextContent)
        ).strip()
        words = text.split()
        with trio.CancelScope() as scope:
            self.sessions[params.session_id] = scope
            try:
                if words[:1] == ["flood"]:
                    await self._flood(params.session_id, int(words[1]) if len(words) > 1 else 1000)
                elif words[:1] == ["slow"]:
                    await self._slow(params.session_id, int(words[1]) if len(words) > 1 else 100)
                elif words[:1] == ["ask"]:
                    await self._ask(params.session_id)
                else:
                    await self._say(params.session_id, text or "(empty prompt)")
            finally:
                self.sessions[params.session_id] = None
        if scope.cancelled_caught:
            return schema.PromptResponse(stop_reason="cancelled")
        return schema.PromptResponse(stop_reason="end_turn")

    async def _say(self, session_id: str, text: str) -> None:
        await self.client.session_update(
            session_id=session_id,
            update=schema.AgentMessageChunk(content=schema.TextContent(text=text)),
        )

    async def _flood(self, session_id: str, n: int) -> None:
        for i in range(n):
            await self._say(session_id, f"w{i} ")

    async def _slow(self, session_id: str, n: int) -> None:
        for i in range(n):
            await self._say(session_id, f"chunk {i} ")
            await trio.sleep(0.05)

    async def _ask(self, session_id: str) -> None:
        await self.client.session_update(
            session_id=session_id,
            update=schema.ToolCallStart(
                tool_call_id="t1", title="echo tool", kind="other", status="pending"
            ),
        )
        response = await self.client.request_permission(
            session_id=session_id,
            tool_call=schema.ToolCallUpdate(tool_call_id="t1"),
            options=[
                schema.PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
                schema.PermissionOption(option_id="no", name="Reject", kind="reject_once"),
            ],
        )
        await self._say(session_id, f"permission: {schema.to_wire(response.outcome)}")

    async def cancel(self, params: schema.CancelNotification) -> None:
        scope = self.sessions.get(params.session_id)
        if scope is not None:
            scope.cancel()

    async def ext_method(self, method: str, params):
        if method == "_echo/ping":
            return {"pong": params}
        raise RequestError.method_not_found(method)


async def main() -> None:
    await serve_stdio(lambda stream: serve_agent(stream, EchoAgent()))


if __name__ == "__main__":
    trio.run(main)
