"""End to end through a real agent-server, a prompt turn's concerns: streaming, a tool
call with permission, cancel (mid-stream, mid-tool, and while the server is still taking
a session's first message in, held there by a SessionStart hook: the user's hooks run on
the server). Fixtures: conftest.py; helpers: _remote_e2e.py.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import psutil
import pytest
from _remote_e2e import (
    answer_permission,
    assert_key_nowhere,
    cancel,
    send_prompt,
    server_has,
    text_of,
    updates,
    wait_for_sleep,
)

from trio_acp.testing import scenario_prompt

pytestmark = pytest.mark.timeout(300)


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
    # Killed but not yet reaped by its shell (a zombie) is gone too: it runs nothing.
    alive = [p for p in alive if _running(p)]
    assert not alive, "the remote `sleep 30` outlived the cancel"
    # The terminal survived and runs the next command.
    start = len(proc.frames)
    reply = proc.prompt(sid, scenario_prompt("terminal", command="echo terminal-still-works"))
    assert reply["result"]["stopReason"] == "end_turn"
    assert "terminal-still-works" in json.dumps(updates(proc, sid, start))


def write_hooks(project: Path, hooks: dict) -> None:
    (project / ".openhands").mkdir(exist_ok=True)
    (project / ".openhands" / "hooks.json").write_text(json.dumps(hooks))


def wait_for_file(agent, path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        agent.drain(0.1)


def test_a_cancel_while_the_server_takes_the_first_message_answers_at_once(agent, llm, cwd):
    """The server takes a conversation's first message only once it has started the tools
    and run the SessionStart hooks (seconds, more on a loaded machine): a cancel meanwhile
    must not wait for that. A hook that waits for a file holds the server there as long
    as the test likes; the hook running at all shows the user's hooks reach the server."""
    project = Path(cwd)
    started, release, finished = (project / n for n in ("started", "release", "finished"))
    wait = f"i=0; while [ ! -f {release} ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done"
    write_hooks(
        project,
        {
            "SessionStart": [
                {
                    "matcher": "*",
                    "hooks": [
                        {
                            "type": "command",
                            "command": f"touch {started}; {wait}; touch {finished}",
                            "timeout": 120,
                        }
                    ],
                }
            ]
        },
    )
    proc = agent.proc
    sid = proc.new_session(cwd)
    rid = send_prompt(proc, sid, "the first request [scenario:echo]")
    wait_for_file(proc, started)  # the server is taking the message in, held by the hook
    cancel(proc, sid)
    try:
        reply = proc.response(rid, timeout=60)
        assert reply["result"]["stopReason"] == "cancelled"
        assert not finished.exists(), "the cancel waited for the server to take the message"
    finally:
        release.touch()
    wait_for_file(proc, finished)
    # The message reached the server all the same, unanswered: the next one says so, and
    # the model answers that one only.
    start = len(proc.frames)
    again = proc.prompt(sid, "the second request [scenario:echo]", timeout=120)
    assert again["result"]["stopReason"] == "end_turn", again
    assert "the second request" in text_of(updates(proc, sid, start))
    sent = json.dumps(llm.requests[-1].body["messages"])
    assert "the first request" in sent and "interrupted the previous request" in sent, sent


def test_the_key_is_in_no_frame_log_or_file(agent, server):
    """After everything above, at DEBUG level."""
    assert_key_nowhere(agent, server)


def test_a_cancel_note_replays_as_the_agents_never_as_the_users_words(agent, cwd):
    """On an agent-server the note a cancelled turn leaves opens the next user message
    (remote.py, INTERRUPTION_NOTE); session/load shows it as the agent's, marked, and the
    user's message as they typed it (issue 26.6)."""
    proc = agent.proc
    sid = proc.new_session(cwd)
    rid = send_prompt(proc, sid, scenario_prompt("slow", chunks=400, delay_ms=50))
    proc.read_until(
        lambda f: (
            f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        ),
        what="the first chunk",
    )
    cancel(proc, sid)
    assert proc.response(rid, timeout=30)["result"]["stopReason"] == "cancelled"
    assert (
        proc.prompt(sid, "after the cancel [scenario:echo]")["result"]["stopReason"] == "end_turn"
    )
    start = len(proc.frames)
    proc.result("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []}, timeout=300)
    replay = updates(proc, sid, start)
    users = [
        u["content"].get("text", "") for u in replay if u["sessionUpdate"] == "user_message_chunk"
    ]
    assert users[-1] == "after the cancel [scenario:echo]"
    assert not any("interrupted" in u.lower() for u in users)
    marked = [u for u in replay if (u.get("_meta") or {}).get("trioAcp", {}).get("interrupted")]
    assert [u["sessionUpdate"] for u in marked] == ["agent_message_chunk"]


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("mode", ["always-approve", "llm-approve"])
def test_a_credential_read_stops_on_the_server_in_the_modes_that_ask_less(agent, cwd, mode):
    # The server cannot load our credential guard: in these modes it stops before every
    # action and this side runs what the mode would run unasked, asking for the read of
    # trio-acp's own credential file (remote_conversation.py, confirm.py).
    proc = agent.proc
    sid = proc.new_session(cwd)
    proc.result("session/set_mode", {"sessionId": sid, "modeId": mode})
    marker = Path(cwd) / "read-the-key"
    settings = Path(agent.home) / "agent_settings.json"
    command = f"cat {settings} > {marker}"
    rid = send_prompt(proc, sid, scenario_prompt("terminal", command=command))
    request = answer_permission(proc, "reject_once")
    title = request["params"]["toolCall"]["title"]
    assert str(settings) in title and "the model's API key" in title
    assert "allow_always" not in {o["kind"] for o in request["params"]["options"]}
    assert proc.response(rid)["result"]["stopReason"] in ("end_turn", "cancelled")
    assert not marker.exists(), "the credential read ran on the server unasked"
    # Any other action runs unasked, as the mode says (the model rates it LOW).
    start = len(proc.frames)
    reply = proc.prompt(sid, scenario_prompt("terminal", command="echo ran-unasked"))
    assert reply["result"]["stopReason"] == "end_turn"
    asked = [f for f in proc.frames[start:] if f.get("method") == "session/request_permission"]
    assert asked == []
    outputs = json.dumps(
        [u for u in updates(proc, sid, start) if u["sessionUpdate"] == "tool_call_update"]
    )
    assert "ran-unasked" in outputs
