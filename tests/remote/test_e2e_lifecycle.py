"""End to end through a real agent-server, a session's lifecycle: load, list and delete
after the agent restarts, delete while the server is gone, and the server killed mid-turn
then restarted. The tests that kill the server run last, in file order, and start it
again before they end. Fixtures: conftest.py; helpers: _remote_e2e.py.
"""

from __future__ import annotations

import json

import pytest
from _remote_e2e import (
    assert_key_nowhere,
    send_prompt,
    server_has,
    text_of,
    updates,
    wait_for_sleep,
)

from trio_acp.testing import scenario_prompt

pytestmark = pytest.mark.timeout(300)


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
    # The first request that needs the SDK waits for its import (minutes when loaded).
    proc.result("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []}, timeout=300)
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
    """Late: it restarts the module's server. While the server is down, a session on it
    is deleted: here it goes, with a warning that says where its conversation stays."""
    proc = agent.proc
    other = proc.new_session(cwd)
    assert proc.prompt(other, "keep me [scenario:echo]")["result"]["stopReason"] == "end_turn"
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

    deleted = proc.result("session/delete", {"sessionId": other})
    warning = deleted["_meta"]["trioAcp"]["warning"]
    assert server.url in warning and other in warning and "stays" in warning, warning
    assert server.api_key not in warning
    listed = {s["sessionId"] for s in proc.result("session/list", {"cwd": cwd})["sessions"]}
    assert listed == {sid}

    server.start()
    assert server_has(server, other), "the server lost the conversation the warning names"
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
    assert_key_nowhere(agent, server)
