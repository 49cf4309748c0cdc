"""The OpenHands agent in-process (the SDK imported once for the module): the session rules.

Subprocess end-to-end tests live in tests/e2e; these drive the same agent over an
in-memory connection to check what is cheaper to check here.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import uuid

import psutil
import pytest
import trio
import trio.testing

from _inprocess import agent_env, loader
from trio_acp import schema
from trio_acp.connection import open_agent_connection
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.setup.settings import load_settings
from trio_acp.rpc import RequestError
from trio_acp.testing import Reply, Scenario, ScriptedLLM, ToolCall, scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair


@pytest.fixture(scope="module")
def llm():
    def shout_steps(ctx):
        # The MCP tool's name as the SDK registered it, found in the request's tool list.
        names = [t["function"]["name"] for t in ctx.body.get("tools", [])]
        name = next((n for n in names if "shout" in n), "shout")
        return [
            Reply(tool_calls=[ToolCall(name, {"text": "hello mcp"})]),
            Reply(text="Shouted."),
        ]

    extra = [
        Scenario("mcp-shout", shout_steps, "call the shout MCP tool"),
        Scenario("cutoff", [Reply(text="This reply is cut", finish_reason="length")], "max tokens"),
        Scenario(
            "loop",
            [
                Reply(
                    tool_calls=[
                        ToolCall(
                            "terminal",
                            {"command": "echo same", "summary": "Again", "security_risk": "LOW"},
                        )
                    ]
                )
            ]
            * 12,
            "the same command over and over (the SDK's stuck detector stops it)",
        ),
        Scenario(
            "refuse",
            [Reply(text="I can't help with that.", finish_reason="content_filter")],
            "refusal",
        ),
    ]
    with ScriptedLLM(scenarios=extra) as server:
        yield server


@pytest.fixture
def env(llm, tmp_path):
    # Always approve (agent_env): these tests are about turns, not permissions (tests/e2e
    # covers those).
    return agent_env(llm, tmp_path / "home", LLM_MAX_INPUT_TOKENS="128000")


class Client:
    def __init__(self) -> None:
        self.updates: list = []
        self.got = trio.Event()

    async def session_update(self, params):
        self.updates.append(params.update)
        if isinstance(params.update, schema.AgentMessageChunk):  # the turn is streaming
            self.got.set()

    async def request_permission(self, params):
        raise AssertionError("no permission requests in these tests")

    def text(self) -> str:
        return "".join(
            u.content.text for u in self.updates if isinstance(u, schema.AgentMessageChunk)
        )


async def _start(conn, cwd) -> str:
    await conn.agent.initialize(protocol_version=1)
    return (await conn.agent.new_session(cwd=str(cwd), mcp_servers=[])).session_id


def _text(t: str) -> list:
    return [schema.TextContent(text=t)]


async def test_a_prompt_sent_while_a_turn_runs_is_queued_and_a_cancel_ends_both(env, tmp_path):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _start(conn, tmp_path)
            result = {}

            async def prompt(name, text):
                result[name] = await conn.agent.prompt(session_id=sid, prompt=_text(text))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt, "first", scenario_prompt("slow", chunks=40, delay_ms=50))
                await client.got.wait()
                nursery.start_soon(prompt, "queued", scenario_prompt("echo", "queued"))
                while agent._sessions[uuid.UUID(sid)].queued == 0:
                    await trio.sleep(0.01)
                assert "queued" not in result  # waiting behind the running turn, not refused
                await conn.agent.cancel(session_id=sid)
            assert result["first"].stop_reason == "cancelled"
            assert result["queued"].stop_reason == "cancelled"  # received before the cancel
            assert "Echo: " not in client.text()
            after = await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("echo", "after"))
            )
            assert after.stop_reason == "end_turn"


async def test_prompt_content_kinds_reach_the_model(env, tmp_path, llm):
    # The SDK answers images itself for models without vision; say this one has it
    # (JSON-shaped LLM_* variables are parsed, like the SDK's own LLM.load_from_env).
    env["LLM_CAPABILITY_OVERRIDES"] = '{"supports_vision": true}'
    client = Client()
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
    blocks = [
        schema.TextContent(text=scenario_prompt("echo", "look at these")),
        schema.ResourceLink(
            uri=f"file://{tmp_path}/notes.md", name="notes.md", mime_type="text/markdown"
        ),
        schema.EmbeddedResource(
            resource=schema.TextResourceContents(
                uri=f"file://{tmp_path}/a.py", text="print('embedded')", mime_type="text/x-python"
            )
        ),
        schema.ImageContent(data=png, mime_type="image/png"),
    ]
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _start(conn, tmp_path)
            before = len(llm.requests)
            response = await conn.agent.prompt(session_id=sid, prompt=blocks)
    assert response.stop_reason == "end_turn"
    body = llm.requests[before].body
    user = [m for m in body["messages"] if m["role"] == "user"][-1]
    parts = (
        user["content"]
        if isinstance(user["content"], list)
        else [{"type": "text", "text": user["content"]}]
    )
    flat = "\n".join(p.get("text", "") or p.get("image_url", {}).get("url", "") for p in parts)
    assert "notes.md" in flat and f"{tmp_path}/notes.md" in flat
    assert "print('embedded')" in flat
    assert "data:image/png;base64," in flat


async def test_close_session_cancels_and_forgets_it(env, tmp_path):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _start(conn, tmp_path)
            async with trio.open_nursery() as nursery:
                result = {}

                async def run():
                    result["r"] = await conn.agent.prompt(
                        session_id=sid,
                        prompt=_text(scenario_prompt("slow", chunks=40, delay_ms=50)),
                    )

                nursery.start_soon(run)
                await client.got.wait()
                await conn.agent.close_session(session_id=sid)
            assert result["r"].stop_reason == "cancelled"
            with pytest.raises(RequestError) as info:
                await conn.agent.prompt(session_id=sid, prompt=_text("hello"))
            assert info.value.code == -32002


async def test_a_load_or_resume_refused_for_its_cwd_leaves_the_live_session_alone(env, tmp_path):
    # The cwd used to be checked after the live session was closed for the reopen: a
    # refused load cost the session ("unknown session" on its next prompt).
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, Client()) as (_, conn):
            sid = await _start(conn, tmp_path)
            (tmp_path / "file").write_text("")
            for bad in ["relative", str(tmp_path / "missing"), str(tmp_path / "file")]:
                for call in (conn.agent.load_session, conn.agent.resume_session):
                    with pytest.raises(RequestError) as info:
                        await call(session_id=sid, cwd=bad, mcp_servers=[])
                    assert info.value.code == -32602
            reply = await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("echo", "still here"))
            )
            assert reply.stop_reason == "end_turn"


async def test_invalid_session_ids_never_reach_a_path(env, tmp_path):
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, Client()) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            for bad in ["../../etc/passwd", "", "x" * 300]:
                with pytest.raises(RequestError) as info:
                    await conn.agent.prompt(session_id=bad, prompt=_text("hi"))
                assert info.value.code == -32002


async def test_initialize_answers_any_version_with_1_and_advertises_what_works(env):
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, Client()) as (_, conn):
            init = await conn.agent.initialize(protocol_version=65535)
    assert init.protocol_version == 1
    caps = init.agent_capabilities
    assert caps.prompt_capabilities.image and caps.prompt_capabilities.embedded_context
    assert not caps.prompt_capabilities.audio  # the scripted model takes none (test_audio.py)
    assert caps.load_session
    sc = caps.session_capabilities
    assert (
        sc.close is not None
        and sc.list is not None
        and sc.resume is not None
        and sc.delete is not None
    )
    # A model is configured: the agent method just confirms it (the way back in after a
    # logout); no terminal method for a client that did not advertise auth.terminal.
    assert [(type(m).__name__, m.name) for m in init.auth_methods] == [
        ("AuthMethodAgent", "Use the configured model")
    ]
    assert caps.auth.logout is not None


def test_settings_file_then_env_override(tmp_path):
    home = tmp_path / "oh"
    home.mkdir()
    (home / "agent_settings.json").write_text(
        '{"llm": {"model": "anthropic/claude", "api_key": "k1", "base_url": "http://x"}, "tools": []}'
    )
    s = load_settings({"OPENHANDS_PERSISTENCE_DIR": str(home)})
    assert s.llm["model"] == "anthropic/claude" and s.llm["api_key"] == "k1"
    s = load_settings(
        {"OPENHANDS_PERSISTENCE_DIR": str(home), "LLM_MODEL": "openai/gpt", "LLM_NUM_RETRIES": "2"}
    )
    assert (
        s.llm["model"] == "openai/gpt" and s.llm["api_key"] == "k1" and s.llm["num_retries"] == "2"
    )
    assert s.conversations_dir == home / "conversations"
    empty = load_settings({"OPENHANDS_PERSISTENCE_DIR": str(tmp_path / "none")})
    assert empty.llm is None and "LLM_MODEL" in empty.missing_model_message()
    assert "trio-acp setup" in empty.missing_model_message()
    assert '"Set up a model in a terminal"' in empty.missing_model_message(terminal_auth=True)


async def test_stop_reasons_follow_the_models_finish_reason(env, tmp_path):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _start(conn, tmp_path)
            cut = await conn.agent.prompt(session_id=sid, prompt=_text(scenario_prompt("cutoff")))
            refused = await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("refuse"))
            )
            normal = await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("echo", "ok"))
            )
    assert (cut.stop_reason, refused.stop_reason, normal.stop_reason) == (
        "max_tokens",
        "refusal",
        "end_turn",
    )
    assert "This reply is cut" in client.text()


async def test_a_stuck_agent_ends_its_turn_saying_so(env, tmp_path, llm):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _start(conn, tmp_path)
            before = len(llm.requests)
            r = await conn.agent.prompt(session_id=sid, prompt=_text(scenario_prompt("loop")))
            assert r.stop_reason == "end_turn"
            # Stopped by the SDK's detector, well before the script ran out.
            assert len(llm.requests) - before < 12
            assert "going around in circles" in client.text()
            # The session goes on.
            r = await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("echo", "next"))
            )
            assert r.stop_reason == "end_turn"


async def test_max_iterations_is_max_turn_requests(env, tmp_path):
    env["TRIO_ACP_MAX_ITERATIONS"] = "1"
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _start(conn, tmp_path)
            # The terminal scenario needs two LLM calls (command, then finish).
            r = await conn.agent.prompt(session_id=sid, prompt=_text(scenario_prompt("terminal")))
            assert r.stop_reason == "max_turn_requests"
            again = await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("echo", "still ok"))
            )
            assert again.stop_reason == "end_turn"


async def test_slash_commands(env, tmp_path, llm):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _start(conn, tmp_path)
            session = agent._sessions[uuid.UUID(sid)]
            await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("echo", "remember me"))
            )

            async def say(text):
                client.updates.clear()
                r = await conn.agent.prompt(session_id=sid, prompt=_text(text))
                assert r.stop_reason == "end_turn"
                return client.text()

            assert "/condense" in await say("/help") and "/rules" in await say("/help")
            status = await say("/status")
            assert "openai/scripted" in status and "always-approve" in status and "tokens" in status
            assert "No 'always' rules" in await say("/rules")
            assert "Choose one of" in await say("/confirm")
            events_before = [
                type(e).__name__ for e in session.conversation.sdk_conversation.state.events
            ]
            assert "condensed" in await say("/condense")
            events_after = [
                type(e).__name__ for e in session.conversation.sdk_conversation.state.events
            ]
            assert "Condensation" in events_after and "Condensation" not in events_before
            # Not one of ours: it goes to the model as text.
            requests = len(llm.requests)
            reply = await say("/frobnicate now")
            assert reply.startswith("Echo:") and reply.endswith("/frobnicate now")
            assert len(llm.requests) == requests + 1
            assert "always-ask" in await say("/confirm always-ask")
            assert session.options.mode == "always-ask"
            kinds = [type(u).__name__ for u in client.updates]
            assert "CurrentModeUpdate" in kinds and "ConfigOptionUpdate" in kinds


def test_rules_persist_and_reject_wins(tmp_path):
    from trio_acp.openhands.permissions.policy import Rule, RuleBook, action_scope

    path = tmp_path / "rules.json"
    book = RuleBook(path)
    scope = action_scope("terminal", {"command": "rm  -rf build"}, "/w")
    assert scope.target == "rm -rf build"
    book.add(Rule("terminal", "rm -rf build", allow=True))
    book.add(Rule("terminal", "rm -rf build", allow=False))
    again = RuleBook(path)
    assert again.rules == book.rules
    assert again.match(scope).allow is False  # fail closed when both apply
    assert again.match(action_scope("terminal", {"command": "ls"}, "/w")) is None
    edit = action_scope("file_editor", {"command": "create", "path": "a/b.txt"}, "/w")
    assert edit.target == "/w/a/b.txt"
    path.write_text("{not json")
    assert RuleBook(path).rules == []  # a damaged file costs the rules, not the session


class RawClient:
    """Raw JSON lines on the client end: to send exactly the frames a test needs."""

    def __init__(self, stream):
        self.stream, self.buffer = stream, b""

    async def send(self, frame):
        await self.stream.send_all(json.dumps(frame).encode() + b"\n")

    async def receive(self):
        while b"\n" not in self.buffer:
            self.buffer += await self.stream.receive_some()
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    async def until(self, predicate):
        while True:
            frame = await self.receive()
            if predicate(frame):
                return frame

    async def open_session(self, cwd) -> str:
        """initialize (ids 1) and session/new (id 2); returns the session id."""
        await self.send(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        )
        await self.until(lambda f: f.get("id") == 1)
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(cwd), "mcpServers": []},
            }
        )
        return (await self.until(lambda f: f.get("id") == 2))["result"]["sessionId"]

    async def prompt(self, request_id, sid: str, text: str) -> None:
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
            }
        )


async def test_cancel_request_for_a_prompt_waiting_on_permission_ends_cancelled(env, tmp_path):
    # `$/cancel_request` for the prompt while its permission request is pending: handled
    # like session/cancel — the turn answers `cancelled` (a result) and nothing runs.
    env["TRIO_ACP_DEFAULT_MODE"] = "always-ask"
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = RawClient(client_stream)
    target = tmp_path / "never-made"
    with trio.fail_after(60):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                sid = await raw.open_session(tmp_path)
                prompt = scenario_prompt("terminal", command=f"touch {target}")
                await raw.prompt("p-1", sid, prompt)
                ask = await raw.until(lambda f: f.get("method") == "session/request_permission")
                await raw.send(
                    {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "p-1"}}
                )
                # The agent withdraws its own question, then answers the prompt.
                frames = []
                response = await raw.until(lambda f: frames.append(f) or f.get("id") == "p-1")
                assert response["result"] == {"stopReason": "cancelled"}
                assert any(
                    f.get("method") == "$/cancel_request" and f["params"]["requestId"] == ask["id"]
                    for f in frames
                )
                # The client's late answer to the withdrawn question is ignored, safely.
                await raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": ask["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
                    }
                )
                await raw.prompt(3, sid, scenario_prompt("echo", "after"))
                after = await raw.until(lambda f: f.get("id") == 3)
                assert after["result"]["stopReason"] == "end_turn"
                await client_stream.aclose()
    assert not target.exists()


async def test_config_options_full_list_and_reasoning_effort(env, tmp_path, llm):
    env["LLM_CAPABILITY_OVERRIDES"] = '{"supports_reasoning_effort": true}'
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            new = await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])
            ids = [o.id for o in new.config_options]
            assert ids == ["mode", "model", "thought_level"]
            assert [o.category for o in new.config_options] == ["mode", "model", "thought_level"]
            result = await conn.agent.set_session_config_option(
                session_id=new.session_id, config_id="thought_level", value="low"
            )
            assert [o.id for o in result.config_options] == ids  # the complete list
            assert {o.id: o.current_value for o in result.config_options}["thought_level"] == "low"
            before = len(llm.requests)
            await conn.agent.prompt(
                session_id=new.session_id, prompt=_text(scenario_prompt("echo", "x"))
            )
            assert llm.requests[before].body.get("reasoning_effort") == "low"
            for bad in [
                ("thought_level", "extreme"),
                ("model", "other/model"),
                ("nope", "x"),
                ("mode", True),
            ]:
                with pytest.raises(RequestError) as info:
                    await conn.agent.set_session_config_option(
                        session_id=new.session_id, config_id=bad[0], value=bad[1]
                    )
                assert info.value.code == -32602
            # No boolean options are offered, advertised or not.
            assert all(
                o.type == "select" if hasattr(o, "type") else True for o in result.config_options
            )


async def test_no_reasoning_option_for_models_without_it(env, tmp_path):
    env["LLM_CAPABILITY_OVERRIDES"] = '{"supports_reasoning_effort": false}'
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, Client()) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            new = await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])
    assert [o.id for o in new.config_options] == ["mode", "model"]
    assert new.modes.current_mode_id == "always-approve"  # TRIO_ACP_DEFAULT_MODE


async def test_a_retried_model_call_is_announced_and_a_final_failure_is_an_error(env, tmp_path):
    env.update(
        LLM_NUM_RETRIES="2",
        LLM_RETRY_MIN_WAIT="0",
        LLM_RETRY_MAX_WAIT="0",
        LLM_RETRY_MULTIPLIER="0",
    )
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _start(conn, tmp_path)
            with pytest.raises(RequestError) as info:
                await conn.agent.prompt(session_id=sid, prompt=_text(scenario_prompt("error500")))
            assert info.value.code == -32603 and "failed" in info.value.message
            thoughts = "".join(
                u.content.text for u in client.updates if isinstance(u, schema.AgentThoughtChunk)
            )
            assert "Retrying now, attempt 2 of 2" in thoughts
            ok = await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("echo", "fine"))
            )
            assert ok.stop_reason == "end_turn"


async def test_load_resume_list_delete_across_agent_restarts(env, tmp_path, llm):
    ws = tmp_path / "ws"
    ws.mkdir()
    first = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, first) as (_, conn):
            sid = await _start(conn, ws)
            await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("terminal", "Say [word:heron] hello"))
            )
            other = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
    titles = [u.title for u in first.updates if isinstance(u, schema.SessionInfoUpdate)]
    assert titles == ["Say hello"]

    # A new agent process (same persistence dir): list, load with replay, resume, delete.
    loaded = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, loaded) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            listed = await conn.agent.list_sessions()
            assert {s.session_id for s in listed.sessions} == {sid, other}
            only_ws = await conn.agent.list_sessions(cwd=str(ws))
            [entry] = only_ws.sessions
            assert entry.session_id == sid and entry.cwd == str(ws) and entry.title == "Say hello"
            assert entry.updated_at.endswith("Z")
            with pytest.raises(RequestError) as info:
                await conn.agent.list_sessions(cursor="not-a-cursor")
            assert info.value.code == -32602

            response = await conn.agent.load_session(session_id=sid, cwd=str(ws), mcp_servers=[])
            assert response.modes.current_mode_id == "always-approve"
            kinds = [type(u).__name__ for u in loaded.updates]
            assert (
                "UserMessageChunk" in kinds
                and "ToolCallStart" in kinds
                and "AgentMessageChunk" in kinds
            )
            user_text = "".join(
                u.content.text for u in loaded.updates if isinstance(u, schema.UserMessageChunk)
            )
            assert "heron" in user_text
            [call] = [u for u in loaded.updates if isinstance(u, schema.ToolCallStart)]
            assert call.status == "completed" and call.kind == "execute"
            # The conversation goes on where it was: the model sees the earlier prompt.
            again = await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("remember"))
            )
            assert again.stop_reason == "end_turn"
            assert "You said earlier: heron" in loaded.text()

            loaded.updates.clear()
            await conn.agent.resume_session(session_id=sid, cwd=str(ws), mcp_servers=[])
            assert not [
                u for u in loaded.updates if isinstance(u, schema.UserMessageChunk)
            ]  # no replay

            await conn.agent.delete_session(session_id=sid)
            await conn.agent.delete_session(session_id=sid)  # again: silently fine
            await conn.agent.delete_session(session_id="../../etc")  # never a path
            assert [s.session_id for s in (await conn.agent.list_sessions()).sessions] == [other]
            for call in (conn.agent.load_session, conn.agent.resume_session):
                with pytest.raises(RequestError) as info:
                    await call(session_id=sid, cwd=str(ws), mcp_servers=[])
                assert info.value.code == -32002


async def test_stdio_mcp_servers_from_session_new_become_tools(env, tmp_path, llm):
    # MCP servers the client passes must not be silently ignored (agy-acp#136, zcode-acp#42).
    server = os.path.join(os.path.dirname(__file__), "mcp", "shout_server.py")
    mcp = schema.McpServerStdio(
        name="shouter",
        command=sys.executable,
        args=[server],
        env=[schema.EnvVariable(name="SHOUT_SUFFIX", value="!!")],
    )
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[mcp])).session_id
            before = len(llm.requests)
            r = await conn.agent.prompt(session_id=sid, prompt=_text(scenario_prompt("mcp-shout")))
            assert r.stop_reason == "end_turn"
    tools = [t["function"]["name"] for t in llm.requests[before].body.get("tools", [])]
    assert any("shout" in name for name in tools), tools
    outputs = [
        c.content.text
        for u in client.updates
        if isinstance(u, schema.ToolCallProgress) and u.status == "completed"
        for c in (u.content or [])
        if isinstance(c, schema.ContentToolCallContent)
    ]
    assert any("HELLO MCP!!" in text for text in outputs), outputs
    # Closing the agent closed the session, and the MCP server with it (zed#56747).
    with trio.fail_after(10):
        while [p for p in psutil.process_iter(["cmdline"]) if server in (p.info["cmdline"] or [])]:
            await trio.sleep(0.1)


async def test_a_malformed_permission_answer_fails_closed_now_and_later(env, tmp_path):
    # Regression: a schema-invalid answer used to leave the action pending, and the next
    # prompt's run took it as approved.
    env["TRIO_ACP_DEFAULT_MODE"] = "always-ask"
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = RawClient(client_stream)
    marker = tmp_path / "never-made"
    with trio.fail_after(60):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                sid = await raw.open_session(tmp_path)
                text = scenario_prompt("terminal", command=f"touch {marker}")
                await raw.prompt(3, sid, text)
                ask = await raw.until(lambda f: f.get("method") == "session/request_permission")
                await raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": ask["id"],
                        "result": {"outcome": {"outcome": "selected"}},
                    }
                )
                failed = await raw.until(lambda f: f.get("id") == 3)
                assert (
                    failed["error"]["code"] == -32603
                    and "nothing was run" in failed["error"]["message"]
                )
                await raw.prompt(4, sid, scenario_prompt("echo", "next"))
                after = await raw.until(lambda f: f.get("id") == 4)
                assert after["result"]["stopReason"] == "end_turn"
                await client_stream.aclose()
    assert not marker.exists()


async def test_an_action_left_pending_on_disk_is_not_run_after_a_reload(env, tmp_path):
    # Regression: agent 1 dies while asking permission (its state on disk: waiting for
    # confirmation); a restarted agent that loads the session must not run that action.
    env["TRIO_ACP_DEFAULT_MODE"] = "always-ask"
    marker = tmp_path / "never-made"
    asked = trio.Event()

    class Hanging(Client):
        async def request_permission(self, params):
            asked.set()
            await trio.sleep_forever()

    class Rejecting(Client):
        async def request_permission(self, params):
            return schema.RequestPermissionResponse(
                outcome=schema.SelectedPermissionOutcome(option_id="reject_once")
            )

    with trio.fail_after(90):
        async with (
            open_openhands_agent(env=env, sdk_loader=loader()) as a1,
            open_openhands_agent(env=env, sdk_loader=loader()) as a2,
        ):
            async with (
                open_in_memory_pair(a1, Hanging()) as (_, c1),
                open_in_memory_pair(a2, Rejecting()) as (_, c2),
            ):
                sid = await _start(c1, tmp_path)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(
                        lambda: c1.agent.prompt(
                            session_id=sid,
                            prompt=_text(scenario_prompt("terminal", command=f"touch {marker}")),
                        )
                    )
                    await asked.wait()
                    await c2.agent.initialize(protocol_version=1)
                    await c2.agent.load_session(session_id=sid, cwd=str(tmp_path), mcp_servers=[])
                    r = await c2.agent.prompt(
                        session_id=sid, prompt=_text(scenario_prompt("echo", "hello"))
                    )
                    assert r.stop_reason == "end_turn"
                    assert not marker.exists()
                    nursery.cancel_scope.cancel()
    assert not marker.exists()
