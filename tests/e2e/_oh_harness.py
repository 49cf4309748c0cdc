"""Shared harness for the end-to-end tests of `trio-acp` under the official Python client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from typing import Any

import acp
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    RequestPermissionResponse,
    TextContentBlock,
)

from trio_acp.testing import ScriptedLLM, scripted_env
from trio_acp.testing.wire_check import FrameChecker

TIMEOUT = 90.0


class Client:
    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.got_update = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.got_update.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ):
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        )

    def of(self, kind: type) -> list[Any]:
        return [u for _, u in self.updates if isinstance(u, kind)]

    def text(self) -> str:
        return "".join(
            u.content.text
            for u in self.of(AgentMessageChunk)
            if isinstance(u.content, TextContentBlock)
        )


class Wire:
    """Every frame in wire order (per direction), plus markers where the client sent a prompt."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: StreamEvent) -> None:
        direction = "to_agent" if event.direction is StreamDirection.OUTGOING else "from_agent"
        self.frames.append((direction, event.message))

    def mark(self, label: str) -> None:
        self.frames.append(("marker", {"label": label}))

    def schema_errors(self) -> tuple[list[str], int]:
        agent = FrameChecker()
        for direction, frame in self.frames:
            if direction == "to_agent":
                agent.received(frame)
        for direction, frame in self.frames:
            if direction == "from_agent":
                agent.sent(frame)
        return agent.errors, agent.checked

    def updates_after_responses(self) -> list[dict[str, Any]]:
        """Turn updates that arrived after a prompt's response and before the next prompt.

        Session-level kinds (commands, modes, config options, session info) may come at
        any time; every other update of a session belongs inside one of its turns.
        """
        prompts = {
            f["id"]: f["params"]["sessionId"]
            for d, f in self.frames
            if d == "to_agent" and f.get("method") == "session/prompt"
        }
        late, closed = [], set()
        for direction, frame in self.frames:
            if direction == "marker":
                closed.clear()
            elif direction == "from_agent":
                if "id" in frame and "method" not in frame and frame["id"] in prompts:
                    closed.add(prompts[frame["id"]])
                elif frame.get("method") == "session/update":
                    params = frame["params"]
                    kind = params["update"]["sessionUpdate"]
                    if params["sessionId"] in closed and kind not in SESSION_LEVEL:
                        late.append(frame)
        return late


SESSION_LEVEL = {
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
}


def agent_env(llm: ScriptedLLM, home: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(scripted_env(llm.base_url))
    env.update(
        OPENHANDS_PERSISTENCE_DIR=home,
        LLM_NUM_RETRIES="1",
        LLM_TIMEOUT="30",
        LLM_MAX_INPUT_TOKENS="128000",
    )
    return env


async def _initialize(conn) -> Any:
    return await asyncio.wait_for(
        conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="official-python-e2e", version="0.0.1"),
        ),
        TIMEOUT,
    )


async def _prompt(conn, wire: Wire, sid: str, text: str):
    wire.mark(text)
    return await asyncio.wait_for(
        conn.prompt(session_id=sid, prompt=[TextContentBlock(type="text", text=text)]), TIMEOUT
    )


def _run(scenario, **kwargs):
    with (
        ScriptedLLM() as llm,
        tempfile.TemporaryDirectory() as home,
        tempfile.TemporaryDirectory() as ws,
    ):
        return asyncio.run(scenario(llm, home, os.path.realpath(ws), **kwargs))


@contextlib.asynccontextmanager
async def trio_acp_agent(client: Any, wire: Wire, env: dict[str, str]):
    """`trio-acp` as a subprocess under the official client, every frame recorded, initialized."""
    async with acp.spawn_agent_process(
        # stderr inherited: a pipe nobody reads could fill up and stall the agent.
        client,
        sys.executable,
        "-m",
        "trio_acp",
        env=env,
        transport_kwargs={"stderr": None},
    ) as (conn, process):
        conn._conn.add_observer(wire)
        await _initialize(conn)
        yield conn, process


async def new_session(conn, cwd: str):
    return await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), TIMEOUT)
