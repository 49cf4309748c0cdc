"""A real session (the agent in process, the SDK, the scripted model) and an editor-shaped
client: what a client's capabilities change in a session (docs/editor-workspace.md)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from _inprocess import loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.rpc import RequestError
from trio_acp.testing import scenario_prompt
from trio_acp.testing.editor import EditorClient
from trio_acp.testing.pair import open_in_memory_pair

pytest.importorskip("openhands.sdk")


class ZedLike(EditorClient):
    """No terminals, no fs: only Zed's `_meta.terminal_output`."""

    def capabilities(self) -> schema.ClientCapabilities:
        return schema.ClientCapabilities(meta={"terminal_output": True})


async def _session(conn, client, cwd, **extra: Any) -> str:
    await conn.agent.initialize(protocol_version=1, client_capabilities=client.capabilities())
    response = await conn.agent.new_session(cwd=str(cwd), mcp_servers=[], **extra)
    return response.session_id


async def test_zed_meta_streams_a_local_commands_output_as_it_runs(env, tmp_path):
    client = ZedLike()
    command = "for i in 1 2 3; do echo line$i; sleep 0.4; done"
    with trio.fail_after(120):
        async with (
            open_openhands_agent(env=env, sdk_loader=loader()) as agent,
            open_in_memory_pair(agent, client) as (_, conn),
        ):
            sid = await _session(conn, client, tmp_path)
            response = await conn.agent.prompt(
                session_id=sid,
                prompt=[schema.TextContent(text=scenario_prompt("terminal", command=command))],
            )
    assert response.stop_reason == "end_turn"
    assert client.calls == []  # nothing asked of the client: the shell is the SDK's
    progress = [u for u in client.updates if isinstance(u, schema.ToolCallProgress)]
    metas = [(u.meta or {}) for u in progress]
    info = next(i for i, m in enumerate(metas) if "terminal_info" in m)
    tid = metas[info]["terminal_info"]["terminal_id"]
    assert progress[info].content == [schema.Terminal(terminal_id=tid)]
    outputs = [m["terminal_output"]["data"] for m in metas if "terminal_output" in m]
    streamed = "".join(outputs)
    # Output as it came (more than one update), only new text each time, in order.
    assert len(outputs) >= 2
    assert [line for line in streamed.splitlines() if line.startswith("line")] == [
        "line1",
        "line2",
        "line3",
    ]
    exits = [m["terminal_exit"] for m in metas if "terminal_exit" in m]
    assert exits == [{"terminal_id": tid, "exit_code": 0, "signal": None}]
    # The last update keeps the pseudo-terminal embedded; the text is in rawOutput.
    last = [u for u in progress if u.status == "completed"][-1]
    assert last.content == [schema.Terminal(terminal_id=tid)]
    assert "line3" in last.raw_output["output"]


async def test_additional_directories_are_checked_listed_and_told_to_the_model(env, tmp_path, llm):
    extra = tmp_path / "lib"
    extra.mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    client = EditorClient(terminal=False)
    with trio.fail_after(120):
        async with (
            open_openhands_agent(env=env, sdk_loader=loader()) as agent,
            open_in_memory_pair(agent, client) as (_, conn),
        ):
            init = await conn.agent.initialize(protocol_version=1)
            caps = init.agent_capabilities.session_capabilities
            assert caps.additional_directories is not None
            with pytest.raises(RequestError) as refused:
                await conn.agent.new_session(
                    cwd=str(ws), mcp_servers=[], additional_directories=["relative/dir"]
                )
            assert refused.value.code == -32602
            sid = (
                await conn.agent.new_session(
                    cwd=str(ws), mcp_servers=[], additional_directories=[str(extra), str(extra)]
                )
            ).session_id
            await conn.agent.prompt(
                session_id=sid, prompt=[schema.TextContent(text=scenario_prompt("echo", "hi"))]
            )
            listed = await conn.agent.list_sessions()
            # Resumed without the list: no extra root is active, and the index says so.
            await conn.agent.resume_session(session_id=sid, cwd=str(ws), mcp_servers=[])
            relisted = await conn.agent.list_sessions()
    (info,) = [s for s in listed.sessions if s.session_id == sid]
    assert info.additional_directories == [str(extra)]
    (info,) = [s for s in relisted.sessions if s.session_id == sid]
    assert info.additional_directories is None
    # The model was told about the extra root with the first prompt.
    told = [r for r in llm.requests if str(extra) in str(r.body.get("messages"))]
    assert told
