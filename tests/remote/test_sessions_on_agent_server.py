"""End to end through a real agent-server: the `trio-acp` process, over stdio, with
`--agent-server URL` (the key in `TRIO_ACP_AGENT_SERVER_API_KEY`), the scripted model.

One agent-server, one scripted model and one `trio-acp` process for the module (each start
imports the whole SDK). The last two tests restart the agent, then kill and restart the
server: they run last, in file order.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from trio_acp.openhands.remote import MARKER_VAR
from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.agent_server import AgentServer
from trio_acp.testing.raw_agent import RawAgent

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def llm():
    with ScriptedLLM() as server:
        yield server


class Agent:
    """The module's `trio-acp --agent-server URL` process; `restart()` replaces it."""

    def __init__(self, llm: ScriptedLLM, server: AgentServer) -> None:
        self.server = server
        self.home = tempfile.mkdtemp(prefix="trio-acp-remote-home-")
        self.stderr_path = Path(self.home) / "stderr.log"
        self.env = dict(os.environ)
        self.env.update(scripted_env(llm.base_url))
        self.env.update(
            OPENHANDS_PERSISTENCE_DIR=self.home,
            TRIO_ACP_AGENT_SERVER_API_KEY=server.api_key,
            # Everything trio-acp and the libraries under it log goes to stderr.
            TRIO_ACP_LOG_LEVEL="DEBUG",
            LLM_NUM_RETRIES="1",
            TRIO_ACP_MODELS="openai/next",
            LLM_TIMEOUT="30",
        )
        self.proc = self._spawn()

    def _spawn(self) -> RawAgent:
        stderr = open(self.stderr_path, "ab")
        try:
            agent = RawAgent.spawn(
                self.env,
                argv=[sys.executable, "-m", "trio_acp", "--agent-server", self.server.url],
                stderr=stderr,
            )
        finally:
            stderr.close()
        agent.initialize()
        return agent

    def restart(self) -> None:
        self.proc.close()
        self.proc = self._spawn()

    def close(self) -> None:
        try:
            self.proc.close()
        finally:
            shutil.rmtree(self.home, ignore_errors=True)


@pytest.fixture(scope="module")
def agent(llm, server):
    running = Agent(llm, server)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def cwd(server):
    # The session's directory must exist on the server: the same machine here.
    path = server.workspace / f"project-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    return str(path)


def updates(agent: RawAgent, sid: str, since: int = 0) -> list[dict[str, Any]]:
    return [
        f["params"]["update"]
        for f in agent.frames[since:]
        if f.get("method") == "session/update" and f["params"]["sessionId"] == sid
    ]


def text_of(ups: list[dict[str, Any]], kind: str = "agent_message_chunk") -> str:
    return "".join(
        u["content"].get("text", "")
        for u in ups
        if u["sessionUpdate"] == kind and isinstance(u.get("content"), dict)
    )


def send_prompt(agent: RawAgent, sid: str, text: str) -> int:
    rid = agent.new_id()
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
        }
    )
    return rid


def answer_permission(agent: RawAgent, kind: str) -> dict[str, Any]:
    request = agent.read_until(
        lambda f: f.get("method") == "session/request_permission", what="a permission request"
    )
    option = next(o for o in request["params"]["options"] if o["kind"] == kind)
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": request["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": option["optionId"]}},
        }
    )
    return request


def cancel(agent: RawAgent, sid: str) -> None:
    agent.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})


def marked_sleeps() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] != "sleep":
            continue
        try:
            if MARKER_VAR in proc.environ():
                found.append(proc)
        except psutil.Error:
            continue
    return found


def wait_for_sleep(agent: RawAgent, timeout: float = 60.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = marked_sleeps()
        if found:
            return found
        agent.drain(0.1)
    raise AssertionError("the remote `sleep` never started")


def server_has(server: AgentServer, sid: str) -> bool:
    request = urllib.request.Request(
        f"{server.url}/api/conversations/{sid}", headers={"X-Session-API-Key": server.api_key}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status == 200
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return False
        raise


def test_streamed_reply_runs_on_the_server(agent, server, cwd):
    proc = agent.proc
    sid = proc.new_session(cwd)
    start = len(proc.frames)
    # Paced like a real model: the server's token deltas come well before the final message.
    reply = proc.prompt(sid, scenario_prompt("slow", chunks=30, delay_ms=30))
    assert reply["result"]["stopReason"] == "end_turn"
    chunks = [u for u in updates(proc, sid, start) if u["sessionUpdate"] == "agent_message_chunk"]
    assert len(chunks) > 1, "the reply came as one piece: no streaming through the server"
    # Streamed, then the final message: the text once, not twice.
    assert text_of(updates(proc, sid, start)) == "".join(f"w{i:04d} " for i in range(1, 31))
    # The conversation is the server's, under the session's id; here, only our index.
    assert server_has(server, sid)
    local = Path(agent.home) / "conversations" / uuid.UUID(sid).hex
    assert sorted(p.name for p in local.iterdir()) == ["trio_acp_session.json"]
    assert json.loads((local / "trio_acp_session.json").read_text())["agentServer"] == server.url
    start = len(proc.frames)
    assert proc.prompt(sid, "/status")["result"]["stopReason"] == "end_turn"
    status = text_of(updates(proc, sid, start))
    assert f"runs on: the agent-server at {server.url}" in status
    assert "tokens: unknown" not in status, "no usage from the server's stats"


def test_tool_call_with_permission_allow_then_reject(agent, server, cwd):
    proc = agent.proc
    sid = proc.new_session(cwd)
    start = len(proc.frames)
    rid = send_prompt(proc, sid, scenario_prompt("terminal", command="echo approved-remotely"))
    request = answer_permission(proc, "allow_once")
    assert request["params"]["toolCall"]["kind"] == "execute"
    assert proc.response(rid)["result"]["stopReason"] == "end_turn"
    ups = updates(proc, sid, start)
    outputs = json.dumps([u for u in ups if u["sessionUpdate"] == "tool_call_update"])
    assert "approved-remotely" in outputs

    refused = Path(cwd) / "refused.txt"
    start = len(proc.frames)
    rid = send_prompt(proc, sid, scenario_prompt("terminal", command=f"touch {refused}"))
    answer_permission(proc, "reject_once")
    assert proc.response(rid)["result"]["stopReason"] in ("end_turn", "cancelled")
    assert not refused.exists(), "the rejected command ran on the server"


def test_cancel_mid_stream_then_next_prompt(agent, cwd):
    proc = agent.proc
    sid = proc.new_session(cwd)
    start = len(proc.frames)
    rid = send_prompt(proc, sid, scenario_prompt("slow", chunks=400, delay_ms=50))
    proc.read_until(
        lambda f: (
            f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ),
        what="the first chunk",
    )
    cancel(proc, sid)
    reply = proc.response(rid, timeout=30)
    assert reply["result"]["stopReason"] == "cancelled"
    streamed = text_of(updates(proc, sid, start))
    assert "w0400" not in streamed, "the cancelled reply was completed anyway"

    again = proc.prompt(sid, "after the cancel [scenario:echo]")
    assert again["result"]["stopReason"] == "end_turn"


def test_cancel_mid_tool_stops_the_remote_command(agent, cwd):
    proc = agent.proc
    sid = proc.new_session(cwd)
    proc.result("session/set_mode", {"sessionId": sid, "modeId": "always-approve"})
    rid = send_prompt(proc, sid, scenario_prompt("sleep", seconds=30))
    sleeping = wait_for_sleep(proc)
    cancel(proc, sid)
    assert proc.response(rid, timeout=30)["result"]["stopReason"] == "cancelled"
    _, alive = psutil.wait_procs(sleeping, timeout=10)
    assert not alive, "the remote `sleep 30` outlived the cancel"
    # The terminal survived and runs the next command.
    start = len(proc.frames)
    reply = proc.prompt(sid, scenario_prompt("terminal", command="echo terminal-still-works"))
    assert reply["result"]["stopReason"] == "end_turn"
    assert "terminal-still-works" in json.dumps(updates(proc, sid, start))


def test_options_errors_condense_and_fork_go_to_the_server(agent, server, llm, cwd):
    proc = agent.proc
    sid = proc.new_session(cwd)
    # The model's options are the server's LLM's (switch_llm): unstreamed, one chunk.
    # And the model (TRIO_ACP_MODELS): the server's next call names it.
    proc.result(
        "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "openai/next"}
    )
    proc.result(
        "session/set_config_option",
        {"sessionId": sid, "configId": "stream", "type": "boolean", "value": False},
    )
    start = len(proc.frames)
    assert proc.prompt(sid, "in one piece [scenario:echo]")["result"]["stopReason"] == "end_turn"
    assert llm.requests[-1].body["model"] == "next"
    chunks = [u for u in updates(proc, sid, start) if u["sessionUpdate"] == "agent_message_chunk"]
    assert [text_of(chunks)] == ["Echo: in one piece [scenario:echo]"]
    assert len(chunks) == 1, "still streaming: the switch did not reach the server"

    # A failing model call on the server: the turn answers with the server's error event.
    failed = proc.prompt(sid, scenario_prompt("error500"))
    assert "error" in failed, failed
    assert failed["error"]["data"]["code"], failed["error"]
    assert proc.prompt(sid, "still here [scenario:echo]")["result"]["stopReason"] == "end_turn"

    start = len(proc.frames)
    assert proc.prompt(sid, "/condense")["result"]["stopReason"] == "end_turn"
    said = text_of(updates(proc, sid, start))
    assert said.startswith(("Conversation condensed", "Could not condense")), said

    forked = proc.result("session/fork", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    fork = forked["sessionId"]
    assert fork != sid and server_has(server, fork)
    start = len(proc.frames)
    proc.result("session/load", {"sessionId": fork, "cwd": cwd, "mcpServers": []})
    assert "still here" in text_of(updates(proc, fork, start), "user_message_chunk")


def test_load_list_and_delete_after_an_agent_restart(agent, server, cwd):
    proc = agent.proc
    sid = proc.new_session(cwd)
    assert proc.prompt(sid, "remember the pelican [scenario:echo]")["result"]["stopReason"] == (
        "end_turn"
    )
    agent.restart()
    proc = agent.proc

    listed = proc.result("session/list", {"cwd": cwd})["sessions"]
    assert [s["sessionId"] for s in listed] == [sid]
    start = len(proc.frames)
    proc.result("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    replayed = updates(proc, sid, start)
    assert "remember the pelican" in text_of(replayed, "user_message_chunk")
    assert "Echo: remember the pelican" in text_of(replayed)

    start = len(proc.frames)
    assert proc.prompt(sid, "and now [scenario:echo]")["result"]["stopReason"] == "end_turn"
    assert text_of(updates(proc, sid, start)) == "Echo: and now [scenario:echo]"

    proc.result("session/delete", {"sessionId": sid})
    assert not server_has(server, sid)
    assert proc.result("session/list", {"cwd": cwd})["sessions"] == []
    gone = proc.request("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    assert "error" in gone


def test_server_killed_mid_turn_then_restarted(agent, server, cwd):
    """Late: it restarts the module's server."""
    proc = agent.proc
    sid = proc.new_session(cwd)
    proc.result("session/set_mode", {"sessionId": sid, "modeId": "always-approve"})
    rid = send_prompt(proc, sid, scenario_prompt("sleep", seconds=30))
    wait_for_sleep(proc)
    server.kill()
    # Within the driver's grace (5 s) and a poll: a clear error, no hang.
    lost = proc.response(rid, timeout=60)
    assert "error" in lost, lost
    message = lost["error"]["message"]
    assert "lost the agent-server" in message and server.url in message
    assert server.api_key not in json.dumps(lost)

    server.start()
    start = len(proc.frames)
    reply = proc.prompt(sid, "after the restart [scenario:echo]", timeout=120)
    assert reply["result"]["stopReason"] == "end_turn", reply
    after = updates(proc, sid, start)
    assert text_of(after).endswith("Echo: after the restart [scenario:echo]")
    # Nothing handed on twice: every tool call announced once, in the whole session.
    starts = [u["toolCallId"] for u in updates(proc, sid) if u["sessionUpdate"] == "tool_call"]
    assert len(starts) == len(set(starts)), starts


def test_the_key_is_in_no_frame_log_or_file(agent, server):
    """After everything above (errors, a restart, a server crash), at DEBUG level."""
    key = server.api_key
    assert all(key not in json.dumps(f) for f in agent.proc.frames)
    stderr = agent.stderr_path.read_text(errors="replace")
    assert " DEBUG " in stderr, "the log the check relies on is not there"
    assert key not in stderr
    for path in Path(agent.home).rglob("*"):
        if path.is_file() and path != agent.stderr_path:
            assert key.encode() not in path.read_bytes(), f"the key is in {path}"
