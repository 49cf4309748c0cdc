"""End to end: `trio-acp` (the OpenHands agent) as a subprocess under the official Python client.

The client is the `acp` package from PyPI (asyncio), the model is our scripted
OpenAI-compatible server on 127.0.0.1 (the real litellm streaming path, no key), and
every frame in both directions is checked against the official JSON Schema. Each test
spawns one agent (the SDK import inside it costs ~10 s), so the checks are grouped.

pytest-trio runs in trio_mode, so the test functions are sync and call `asyncio.run`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile

import psutil
import pytest

acp = pytest.importorskip("acp")

from _oh_harness import (  # noqa: E402 - after the importorskip
    TIMEOUT,
    Client,
    Wire,
    _initialize,
    _prompt,
    _run,
    agent_env,
    new_session,
    trio_acp_agent,
)
from acp.exceptions import RequestError as AcpRequestError  # noqa: E402
from acp.schema import (  # noqa: E402
    AgentMessageChunk,
    AgentPlanUpdate,
    ToolCallProgress,
    ToolCallStart,
)

from trio_acp.testing import scenario_prompt  # noqa: E402


async def _full_session(llm, home, ws):
    client, wire, out = Client(), Wire(), {}
    async with trio_acp_agent(client, wire, agent_env(llm, home)) as (conn, process):
        out["init"] = await _initialize(conn)
        sid = (await new_session(conn, ws)).session_id
        out["sid"] = sid
        out["first"] = await _prompt(
            conn, wire, sid, scenario_prompt("demo", "Show me [word:pelican] things")
        )
        out["text_after_first"] = client.text()
        out["second"] = await _prompt(
            conn, wire, sid, scenario_prompt("remember", "What did I say?")
        )
        out["second_session"] = (await new_session(conn, ws)).session_id
        # Its commands are announced right after the response: wait for them before the
        # connection closes (the assertion below is about what arrives, not a race).
        for _ in range(200):
            if any(s == out["second_session"] for s, _u in client.updates):
                break
            await asyncio.sleep(0.05)
        out["files"] = sorted(os.listdir(ws))
    out["client"], out["wire"] = client, wire
    out["persisted"] = sorted(os.listdir(os.path.join(home, "conversations")))
    return out


def test_full_session_multi_turn_with_tools():
    out = _run(_full_session)
    client, wire, sid = out["client"], out["wire"], out["sid"]

    assert out["init"].protocol_version == 1
    assert out["init"].agent_info.name == "trio-acp"
    assert out["first"].stop_reason == "end_turn"
    assert out["second"].stop_reason == "end_turn"
    # The second turn saw the first: the model quoted a word only the first prompt had.
    assert "You said earlier: pelican" in client.text()
    assert out["second_session"] != sid

    # The turn's tool calls: a terminal command that really ran, a file edit with its
    # diff, a task-tracker plan.
    starts = {u.tool_call_id: u for u in client.of(ToolCallStart)}
    progress = client.of(ToolCallProgress)
    assert len(starts) == 3
    kinds = {u.kind for u in progress if u.kind} | {u.kind for u in starts.values()}
    assert {"execute", "edit"} <= kinds
    completed = [u for u in progress if u.status == "completed"]
    assert len(completed) == 3
    outputs = [
        c.content.text
        for u in completed
        for c in (u.content or [])
        if getattr(c, "type", "") == "content"
    ]
    assert any("hello from terminal" in text for text in outputs)
    diffs = [c for u in completed for c in (u.content or []) if getattr(c, "type", "") == "diff"]
    assert diffs and diffs[0].path.startswith("/") and "trio-acp demo" in diffs[0].new_text
    assert out["files"] == ["trio-acp-demo.txt"]
    plans = client.of(AgentPlanUpdate)
    assert plans and len(plans[-1].entries) == 3
    # Streaming: the reply arrived in several chunks, not one.
    assert len(client.of(AgentMessageChunk)) > 3
    # Every update names its session; every frame is valid; nothing after a response.
    assert {s for s, _ in client.updates} == {
        sid,
        out["second_session"],
    }  # the second: its commands
    errors, checked = wire.schema_errors()
    assert errors == [] and checked > 20
    assert wire.updates_after_responses() == []
    # The conversation is persisted under the SDK's layout.
    assert sid.replace("-", "") in out["persisted"]


async def _cancels(llm, home, ws):
    client, wire, out = Client(), Wire(), {}
    async with trio_acp_agent(client, wire, agent_env(llm, home)) as (conn, process):
        sid = (await new_session(conn, ws)).session_id
        # A cancel while idle is a no-op (and never answered: it is a notification).
        await conn.cancel(session_id=sid)

        # Mid-LLM-stream: the slow scenario streams 200 chunks 50 ms apart.
        # Wait for the reply's first chunk, not any update: the session's own updates
        # (available commands) may still be arriving after session/new answered.
        task = asyncio.create_task(_prompt(conn, wire, sid, scenario_prompt("slow")))
        for _ in range(int(TIMEOUT * 20)):
            if client.of(AgentMessageChunk):
                break
            await asyncio.sleep(0.05)
        await conn.cancel(session_id=sid)
        out["stream"] = await asyncio.wait_for(task, TIMEOUT)
        out["chunks_at_cancel"] = len(client.of(AgentMessageChunk))

        # Mid-tool: `sleep 30` in the terminal.
        task = asyncio.create_task(_prompt(conn, wire, sid, scenario_prompt("sleep")))
        for _ in range(int(TIMEOUT * 20)):
            if any(u.status == "in_progress" for u in client.of(ToolCallProgress)):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # let the command start
        agent = psutil.Process(process.pid)
        out["sleep_before"] = [p.pid for p in agent.children(recursive=True) if p.name() == "sleep"]
        await conn.cancel(session_id=sid)
        out["tool"] = await asyncio.wait_for(task, TIMEOUT)
        out["sleep_after"] = [
            p.pid for p in agent.children(recursive=True) if p.name() == "sleep" and p.is_running()
        ]

        # The session is still usable, with its history.
        out["after"] = await _prompt(conn, wire, sid, scenario_prompt("echo", "still here"))
        out["slow_requests"] = [r.outcome for r in llm.requests if r.scenario == "slow"]
    out["client"], out["wire"] = client, wire
    return out


def test_cancel_mid_stream_and_mid_tool():
    out = _run(_cancels)
    assert out["stream"].stop_reason == "cancelled"
    # The stream was cut: the model's connection was dropped, not read to the end.
    assert out["slow_requests"] == ["disconnected"]
    assert out["tool"].stop_reason == "cancelled"
    assert out["sleep_before"], "the sleep command should have been running"
    assert out["sleep_after"] == []
    assert out["after"].stop_reason == "end_turn"
    assert "Echo:" in out["client"].text()
    failed = [u for u in out["client"].of(ToolCallProgress) if u.status == "failed"]
    assert failed, "the interrupted tool call is reported failed"
    errors, _ = out["wire"].schema_errors()
    assert errors == []
    assert out["wire"].updates_after_responses() == []


async def _errors(llm, home, ws):
    client, wire, out = Client(), Wire(), {}
    async with trio_acp_agent(client, wire, agent_env(llm, home)) as (conn, process):
        with pytest.raises(AcpRequestError) as info:
            await conn.new_session(cwd="relative/path", mcp_servers=[])
        out["relative_cwd"] = info.value
        sid = (await new_session(conn, ws)).session_id
        with pytest.raises(AcpRequestError) as info:
            await _prompt(conn, wire, sid, scenario_prompt("error500"))
        out["llm_error"] = info.value
        out["after"] = await _prompt(conn, wire, sid, scenario_prompt("echo", "recovered"))
        with pytest.raises(AcpRequestError) as info:
            await _prompt(conn, wire, "5a7c3a7e-0000-4000-8000-000000000000", "hi")
        out["unknown_session"] = info.value
    out["client"], out["wire"] = client, wire
    return out


def test_llm_failure_is_a_clear_error_and_the_session_survives():
    out = _run(_errors)
    assert out["relative_cwd"].code == -32602
    err = out["llm_error"]
    assert err.code == -32603
    assert "failed" in str(err) and "\n" not in str(err.args[0] if err.args else err)
    assert out["after"].stop_reason == "end_turn"
    assert "recovered" in out["client"].text()
    assert out["unknown_session"].code == -32002
    errors, _ = out["wire"].schema_errors()
    assert errors == []


async def _unconfigured(home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_")}
    env["OPENHANDS_PERSISTENCE_DIR"] = home
    async with acp.spawn_agent_process(
        Client(), sys.executable, "-m", "trio_acp", env=env, transport_kwargs={"stderr": None}
    ) as (conn, process):
        init = await _initialize(conn)
        with pytest.raises(AcpRequestError) as info:
            await conn.new_session(cwd=home, mcp_servers=[])
        return init, info.value


def test_no_model_configured_says_what_to_set():
    with tempfile.TemporaryDirectory() as home:
        init, err = asyncio.run(_unconfigured(home))
    assert init.auth_methods and init.auth_methods[0].id == "openhands-settings"
    assert err.code == -32000
    message = str(err)
    assert "LLM_MODEL" in message and "agent_settings.json" in message
    # The one step that needs no knowledge of variables comes first; this client offers no
    # terminal sign-in, so the message does not name one.
    assert "Run `trio-acp setup` in a terminal" in message
    assert "Set up a model in a terminal" not in message
