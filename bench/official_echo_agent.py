"""The echo agent's benchmark subset, written on the OFFICIAL Python SDK (`acp`, asyncio).

The counterpart of examples/echo_agent.py for the benchmarks: the same wire traffic,
so the two stacks can be compared on the same scenario.
- `flood N` → N `agent_message_chunk`s ("w0 ", "w1 ", …) as fast as possible, then `end_turn`;
- anything else → the prompt's text echoed back in one chunk;
- extension method `_echo/ping` → `{"pong": params}`.

Run it under any ACP client: `python bench/official_echo_agent.py`.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import acp
from acp.schema import AgentCapabilities, Implementation, PromptCapabilities, TextContentBlock


class OfficialEchoAgent:
    def __init__(self) -> None:
        self._conn: Any = None
        self._sessions: set[str] = set()

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(
        self, protocol_version: int, client_capabilities=None, client_info=None, **kwargs: Any
    ):
        return acp.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                prompt_capabilities=PromptCapabilities(embedded_context=True)
            ),
            auth_methods=[],
            agent_info=Implementation(name="official-echo", version="0.1.0"),
        )

    async def new_session(
        self, cwd: str, additional_directories=None, mcp_servers=None, **kwargs: Any
    ):
        session_id = str(uuid.uuid4())
        self._sessions.add(session_id)
        return acp.NewSessionResponse(session_id=session_id)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any):
        if session_id not in self._sessions:
            raise acp.RequestError.resource_not_found(session_id)
        text = " ".join(b.text for b in prompt if isinstance(b, TextContentBlock)).strip()
        words = text.split()
        if words[:1] == ["flood"]:
            for i in range(int(words[1]) if len(words) > 1 else 1000):
                await self._conn.session_update(
                    session_id=session_id, update=acp.update_agent_message_text(f"w{i} ")
                )
        else:
            await self._conn.session_update(
                session_id=session_id,
                update=acp.update_agent_message_text(text or "(empty prompt)"),
            )
        return acp.PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        pass

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "echo/ping":  # the router strips the leading "_"
            return {"pong": params}
        raise acp.RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        pass


if __name__ == "__main__":
    asyncio.run(acp.run_agent(OfficialEchoAgent()))
