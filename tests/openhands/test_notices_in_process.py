"""Notices and compactions reach only the clients that asked for them; the rest get the
fallback they always had. Raw frames on an in-memory connection, every frame the agent sends
checked against the official schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil
import pytest
import trio
import trio.testing

from _inprocess import agent_env, loader
from trio_acp import schema
from trio_acp.connection import open_agent_connection
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.testing import Reply, Scenario, ScriptedLLM, ToolCall, Turn, scenario_prompt
from trio_acp.testing.scripted_llm import message_text
from trio_acp.testing.wire_check import FrameChecker

BOTH = {"session": {"notices": {}, "compaction": {}}}
MCP = Path(__file__).parent / "mcp"
SHOUT = MCP / "shout_server.py"
HUNG = MCP / "hung_server.py"


def _summarizing(ctx) -> bool:
    # The SDK's summarizing condenser asks with its own system prompt.
    messages = ctx.messages
    return bool(messages) and "state summary" in message_text(messages[0])


def _shout_steps(ctx):
    names = [t["function"]["name"] for t in ctx.body.get("tools", [])]
    name = next((n for n in names if "shout" in n), "shout")
    return [Turn(tool_calls=[ToolCall(name, {"text": "from the test"})]), Turn(text="Shouted.")]


@pytest.fixture(scope="module")
def llm():
    extra = [
        Scenario(
            "summary-fails",
            lambda ctx: [Reply(fault="http500") if _summarizing(ctx) else Reply(text="Noted.")],
        ),
        Scenario("mcp-shout", _shout_steps, "call the shout MCP tool"),
    ]
    with ScriptedLLM(scenarios=extra) as server:
        yield server


@pytest.fixture
def env(llm, tmp_path):
    return agent_env(
        llm,
        tmp_path / "home",
        LLM_RETRY_MIN_WAIT="0",
        LLM_RETRY_MAX_WAIT="0",
        LLM_RETRY_MULTIPLIER="0",
        LLM_MAX_INPUT_TOKENS="128000",
    )


class Wire:
    """The client end in raw JSON lines; checks every frame the agent sends."""

    def __init__(self, stream) -> None:
        self.stream, self.buffer = stream, b""
        self.checker = FrameChecker()
        self.frames: list[dict] = []
        self.next_id = 0

    async def send(self, frame) -> None:
        self.checker.received(frame)
        await self.stream.send_all(json.dumps(frame).encode() + b"\n")

    async def receive(self) -> dict:
        while b"\n" not in self.buffer:
            self.buffer += await self.stream.receive_some()
        line, self.buffer = self.buffer.split(b"\n", 1)
        frame = json.loads(line)
        self.checker.sent(frame)
        self.frames.append(frame)
        return frame

    async def until(self, predicate) -> dict:
        while True:
            frame = await self.receive()
            if predicate(frame):
                return frame

    async def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        rid = self.next_id
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return await self.until(lambda f: f.get("id") == rid and "method" not in f)

    def updates(self, kind: str | None = None) -> list[dict]:
        return [
            f["params"]["update"]
            for f in self.frames
            if f.get("method") == "session/update"
            and (kind is None or f["params"]["update"]["sessionUpdate"] == kind)
        ]


async def _open(wire: Wire, cwd, capabilities: dict, mcp_servers=()) -> str:
    await wire.call("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
    new = await wire.call("session/new", {"cwd": str(cwd), "mcpServers": list(mcp_servers)})
    return new["result"]["sessionId"]


async def _prompt(wire: Wire, sid: str, text: str) -> dict:
    return await wire.call(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    )


async def _session(env, tmp_path, capabilities, body, mcp_servers=()):
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    wire = Wire(client_stream)
    with trio.fail_after(90):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                sid = await _open(wire, tmp_path, capabilities, mcp_servers)
                await body(wire, sid)
                await client_stream.aclose()
    assert wire.checker.errors == []
    return wire


def _text(updates: list[dict]) -> str:
    return "".join(u["content"]["text"] for u in updates if u["content"].get("type") == "text")


@pytest.mark.parametrize("capabilities", [BOTH, {}], ids=["advertised", "not-advertised"])
async def test_condense_is_a_compaction_only_for_a_client_that_advertised_it(
    env, tmp_path, capabilities
):
    async def body(wire, sid):
        await _prompt(wire, sid, scenario_prompt("echo", "remember the heron"))
        wire.frames.clear()
        response = await _prompt(wire, sid, "/condense")
        assert response["result"]["stopReason"] == "end_turn"

    wire = await _session(env, tmp_path, capabilities, body)
    compactions = wire.updates("compaction_update")
    if capabilities:
        assert [c["status"] for c in compactions] == ["in_progress", "completed"]
        assert compactions[0]["compactionId"] == compactions[1]["compactionId"]
        # The summary is what the condenser's model said (the echo scenario echoes its input).
        summary = compactions[1]["summary"]
        assert summary[0]["type"] == "text" and summary[0]["text"].startswith("Echo:")
        assert "heron" in summary[0]["text"]
        assert "condensed" not in _text(wire.updates("agent_thought_chunk"))
    else:
        assert compactions == [] and wire.updates("compaction_summary_chunk") == []
        assert "(conversation condensed: " in _text(wire.updates("agent_thought_chunk"))
    assert "Conversation condensed" in _text(wire.updates("agent_message_chunk"))


@pytest.mark.parametrize("capabilities", [BOTH, {}], ids=["advertised", "not-advertised"])
async def test_a_failed_condense_fails_its_compaction_and_retries_are_notices(
    env, tmp_path, capabilities
):
    env["LLM_NUM_RETRIES"] = "2"

    async def body(wire, sid):
        await _prompt(wire, sid, scenario_prompt("summary-fails", "hello"))
        wire.frames.clear()
        response = await _prompt(wire, sid, "/condense")
        assert response["result"]["stopReason"] == "end_turn"

    wire = await _session(env, tmp_path, capabilities, body)
    assert "Could not condense" in _text(wire.updates("agent_message_chunk"))
    thoughts = _text(wire.updates("agent_thought_chunk"))
    notices = wire.updates("notice")
    if capabilities:
        compactions = wire.updates("compaction_update")
        assert [c["status"] for c in compactions] == ["in_progress", "failed"]
        assert compactions[0]["compactionId"] == compactions[1]["compactionId"]
        assert compactions[1]["error"]
        # The summarizing model's failed calls were retried: notices, not thought notes.
        assert notices and all(
            n["severity"] == "warning" and "retrying" in n["title"] for n in notices
        )
        assert "Retrying" not in thoughts
    else:
        assert wire.updates("compaction_update") == [] and notices == []
        assert "The model call failed" in thoughts and "attempt 2 of 2" in thoughts


def _is_notice(frame: dict) -> bool:
    return (
        frame.get("method") == "session/update"
        and frame["params"]["update"]["sessionUpdate"] == "notice"
    )


def _stdio(name: str, *args: str) -> dict:
    return {"name": name, "command": sys.executable, "args": list(args), "env": []}


def _running(script: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if str(script) in (proc.info["cmdline"] or []) and proc.status() != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


@pytest.mark.parametrize("capabilities", [BOTH, {}], ids=["advertised", "not-advertised"])
async def test_an_mcp_server_that_did_not_start_is_a_notice(env, tmp_path, capabilities):
    broken = _stdio("broken", "-c", "raise SystemExit(3)")

    async def body(wire, sid):
        if capabilities:
            notice = await wire.until(_is_notice)
            update = notice["params"]["update"]
            assert notice["params"]["sessionId"] == sid
            assert update["severity"] == "error" and "'broken'" in update["title"]
            assert update["description"]
        # The session works without the server's tools; a client without notices reads
        # the failure in this turn.
        response = await _prompt(wire, sid, scenario_prompt("echo", "still here"))
        assert response["result"]["stopReason"] == "end_turn"
        await wire.call("session/close", {"sessionId": sid})

    wire = await _session(env, tmp_path, capabilities, body, mcp_servers=[broken])
    thoughts = _text(wire.updates("agent_thought_chunk"))
    if not capabilities:
        assert wire.updates("notice") == []
        assert "MCP server 'broken' did not start" in thoughts
    else:
        assert "did not start" not in thoughts


async def test_a_hung_mcp_server_is_named_within_its_bound_and_stopped(env, tmp_path):
    # A stdio server that never answers `initialize`: given TRIO_ACP_MCP_TIMEOUT (1 s
    # here), it is named in a notice, then stopped in the background.
    env["TRIO_ACP_MCP_TIMEOUT"] = "1"

    async def body(wire, sid):
        notice = (await wire.until(_is_notice))["params"]["update"]
        assert "'hung'" in notice["title"] and "did not start" in notice["title"]
        assert "within 1 s" in notice["description"]
        assert "TRIO_ACP_MCP_TIMEOUT" in notice["description"]
        response = await _prompt(wire, sid, scenario_prompt("echo", "still here"))
        assert response["result"]["stopReason"] == "end_turn"
        await wire.call("session/close", {"sessionId": sid})

    await _session(env, tmp_path, BOTH, body, mcp_servers=[_stdio("hung", str(HUNG))])
    with trio.fail_after(30):
        while _running(HUNG):
            await trio.sleep(0.1)


async def test_an_mcp_server_that_fails_costs_only_its_own_tools(env, tmp_path, llm):
    # Two servers: one fails (it hangs, then goes away without a word), the other's tools
    # are there, named as the SDK names them with two servers.
    release = tmp_path / "release"
    env["TRIO_ACP_MCP_TIMEOUT"] = "600"
    servers = [_stdio("hung", str(HUNG), str(release)), _stdio("shouter", str(SHOUT))]

    async def body(wire, sid):
        while not _running(HUNG):
            await trio.sleep(0.05)
        release.touch()
        notice = (await wire.until(_is_notice))["params"]["update"]
        assert "'hung'" in notice["title"] and "did not start" in notice["title"]
        before = len(llm.requests)
        response = await _prompt(wire, sid, scenario_prompt("mcp-shout"))
        assert response["result"]["stopReason"] == "end_turn"
        tools = [t["function"]["name"] for t in llm.requests[before].body.get("tools", [])]
        assert "shouter_shout" in tools, tools
        assert not [name for name in tools if name.startswith("hung")]
        await wire.call("session/close", {"sessionId": sid})

    wire = await _session(env, tmp_path, BOTH, body, mcp_servers=servers)
    assert len(wire.updates("notice")) == 1  # the shouter started
    assert "FROM THE TEST" in json.dumps(wire.updates("tool_call_update"))


async def test_a_cancel_does_not_wait_for_mcp_servers_starting(env, tmp_path):
    # The first prompt waits for the MCP servers to start (the SDK's lock); a cancel meanwhile
    # answers at once. The server here hangs until the test releases it, long after the
    # cancel was answered: no bound, no timing.
    release = tmp_path / "release"
    env["TRIO_ACP_MCP_TIMEOUT"] = "600"

    async def body(wire, sid):
        await wire.send(
            {
                "jsonrpc": "2.0",
                "id": 50,
                "method": "session/prompt",
                "params": {
                    "sessionId": sid,
                    "prompt": [{"type": "text", "text": scenario_prompt("echo", "first")}],
                },
            }
        )
        # The turn has begun (its first update, the title, is posted right before the
        # message is sent, with no wait between), and the start-up is under way: it holds
        # the SDK's lock the send needs, and cannot end by itself.
        await wire.until(
            lambda f: (
                f.get("method") == "session/update"
                and f["params"]["update"]["sessionUpdate"] == "session_info_update"
            )
        )
        while not _running(HUNG):
            await trio.sleep(0.05)
        await wire.send(
            {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        )
        answer = await wire.until(lambda f: f.get("id") == 50)
        assert answer["result"]["stopReason"] == "cancelled"
        assert _running(HUNG) and not release.exists()  # answered while it still hung
        release.touch()
        notice = (await wire.until(_is_notice))["params"]["update"]
        assert "'hung'" in notice["title"]
        # The session goes on: the cancelled message landed, then the note that it was
        # interrupted, and the next prompt is answered on its own.
        response = await _prompt(wire, sid, scenario_prompt("echo", "second"))
        assert response["result"]["stopReason"] == "end_turn"
        assert "Echo: [scenario:echo] second" in _text(wire.updates("agent_message_chunk"))
        await wire.call("session/close", {"sessionId": sid})

    await _session(env, tmp_path, BOTH, body, mcp_servers=[_stdio("hung", str(HUNG), str(release))])


async def test_the_connection_refuses_notices_and_compactions_nobody_asked_for():
    # The library's guard under the agent's own checks: what the spec says the agent MUST
    # NOT send is never written.
    from trio_acp.connection._agent_side import CapabilityError, ClientProxy

    proxy = ClientProxy(None)
    for update in (
        schema.NoticeUpdate(severity="info", title="hi"),
        schema.CompactionUpdate(compaction_id="c", status="in_progress"),
        schema.CompactionSummaryChunk(compaction_id="c", content=schema.TextContent(text="s")),
    ):
        with pytest.raises(CapabilityError):
            await proxy.session_update(session_id="s", update=update)
