"""The warm-up after session/new: what a session's first prompt would otherwise wait for.

It builds the tools and starts the MCP servers (not the terminal's shell: it starts with
the first turn, sdk/terminal_start.py) and warms the model call path (the first call's
lazy imports, tokenizer, tool schemas); its figures are in bench/README.md
(`python -m bench agent --only first`). Here: that every step runs, and that a step that
fails costs nothing but its own time.
"""

from __future__ import annotations

import uuid

import pytest
import trio

from _inprocess import RecordingClient, agent_env, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair


@pytest.fixture
def env(llm, tmp_path):
    # LLM_MAX_INPUT_TOKENS: so the condenser counts tokens, as for a known model.
    return agent_env(llm, tmp_path / "home", LLM_MAX_INPUT_TOKENS="128000")


class Client(RecordingClient):
    def tool_outputs(self) -> str:
        return "".join(
            c.content.text
            for u in self.updates
            if isinstance(u, schema.ToolCallProgress) and u.status == "completed"
            for c in (u.content or [])
            if isinstance(c, schema.ContentToolCallContent)
        )


async def test_every_warm_up_step_runs_after_session_new(env, tmp_path):
    client = Client()
    with trio.fail_after(90):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                session = agent._sessions[uuid.UUID(sid)]
                await session.warmed.wait()
                assert session.warm_up_report == {
                    "tools": "done",
                    "tool schemas": "done",
                    "model call path": "done",
                }
                # The tools are built before any prompt asked for them (the terminal's shell
                # starts with the turn: sdk/terminal_start.py).
                assert "terminal" in session.conversation.sdk_conversation.agent.tools_map
                r = await conn.agent.prompt(
                    session_id=sid, prompt=[schema.TextContent(text=scenario_prompt("terminal"))]
                )
                assert r.stop_reason == "end_turn"
    assert "hello from terminal" in client.tool_outputs(), [
        (u.status, u.content) for u in client.updates if "ToolCallProgress" in type(u).__name__
    ]


async def test_the_cached_tool_schemas_are_the_sdks_own(env, tmp_path, monkeypatch):
    # Built once per action class (sdk/tool_schemas.py): the same as the SDK builds them
    # each call, with and without the risk field, and a caller's edit stays its own.
    from openhands.sdk.tool.schema import Schema

    from trio_acp.openhands.sdk import tool_schemas

    with trio.fail_after(90):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, Client()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                session = agent._sessions[uuid.UUID(sid)]
                await session.warmed.wait()
                tools = list(session.conversation.sdk_conversation.agent.tools_map.values())
    assert len(tools) >= 3 and tool_schemas.cached_classes() >= len(tools)

    def converted() -> list[object]:
        return [t.to_openai_tool(add_security_risk_prediction=r) for t in tools for r in (0, 1)]

    cached = converted()
    cached[0]["function"]["parameters"]["properties"].clear()  # a caller's edit
    again = converted()
    cached_method = Schema.__dict__["to_mcp_schema"]
    monkeypatch.setattr(Schema, "to_mcp_schema", classmethod(cached_method.__func__.__wrapped__))
    assert again == converted()
    assert again[0]["function"]["parameters"]["properties"]


async def test_a_failed_warm_up_step_costs_the_session_nothing(env, tmp_path, monkeypatch):
    # The tools cannot be built while the session warms up.
    from trio_acp.openhands.sdk import import_sdk

    import_sdk()
    from openhands.tools.terminal.impl import TerminalExecutor

    def broken(*args, **kwargs):
        raise RuntimeError("no terminal tool right now")

    monkeypatch.setattr(TerminalExecutor, "__init__", broken)
    client = Client()
    with trio.fail_after(90):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                session = agent._sessions[uuid.UUID(sid)]
                await session.warmed.wait()
                report = session.warm_up_report
                assert report["tools"].startswith("failed:"), report
                assert "no terminal tool" in report["tools"]
                assert report["model call path"] == "done"  # the other step is not held up
                assert "tool schemas" not in report  # it needs the tools
                # The tool is back: the first prompt builds the tools itself, and they work.
                monkeypatch.undo()
                r = await conn.agent.prompt(
                    session_id=sid, prompt=[schema.TextContent(text=scenario_prompt("terminal"))]
                )
                assert r.stop_reason == "end_turn"
    assert "hello from terminal" in client.tool_outputs(), [
        (u.status, u.content) for u in client.updates if "ToolCallProgress" in type(u).__name__
    ]


async def test_closing_does_not_wait_for_the_tool_schemas(env, tmp_path, monkeypatch):
    """The schemas only warm caches: a close (stdin EOF right after session/new) abandons
    their build instead of waiting for it (it waited ~1 s on a loaded machine)."""
    import threading

    from trio_acp.openhands.backends import local_conversation

    building, release = threading.Event(), threading.Event()

    def held(agent):
        building.set()
        release.wait(60)

    monkeypatch.setattr(local_conversation, "warm_tool_schemas", held)
    try:
        with trio.fail_after(60):
            async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
                async with open_in_memory_pair(agent, Client()) as (_, conn):
                    await conn.agent.initialize(protocol_version=1)
                    sid = (
                        await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])
                    ).session_id
                    assert await trio.to_thread.run_sync(building.wait, 30)
                    with trio.fail_after(20):  # bounded: held, the build would never end
                        await conn.agent.close_session(session_id=sid)
                    assert not release.is_set()
    finally:
        release.set()
