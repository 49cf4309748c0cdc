"""End to end through a real agent-server, a session's options and copies: model and
streaming switches, a failing model, /condense, and forks (of an open session, and of a
stored one not open in this process). Fixtures: conftest.py; helpers: _remote_e2e.py.
"""

from __future__ import annotations

import json

import pytest
from _remote_e2e import (
    assert_key_nowhere,
    server_has,
    text_of,
    updates,
)

from trio_acp.testing import scenario_prompt

pytestmark = pytest.mark.timeout(300)


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
    # The fork runs: its model has its key (the server's fork does not copy it), and the
    # parent's choices (the model "next", unstreamed).
    start = len(proc.frames)
    reply = proc.prompt(fork, "in the fork [scenario:echo]")
    assert "result" in reply and reply["result"]["stopReason"] == "end_turn", reply
    assert llm.requests[-1].body["model"] == "next"
    assert [text_of(updates(proc, fork, start))] == ["Echo: in the fork [scenario:echo]"]


def test_a_stored_session_not_open_here_forks_on_its_server(agent, server, llm, cwd):
    proc = agent.proc
    sid = proc.new_session(cwd)
    assert proc.prompt(sid, "remember the heron [scenario:echo]")["result"]["stopReason"] == (
        "end_turn"
    )
    agent.restart()  # the session is only stored now: its index here, its conversation there
    proc = agent.proc

    # The first request after a restart waits for the SDK's import (minutes when loaded).
    forked = proc.result(
        "session/fork", {"sessionId": sid, "cwd": cwd, "mcpServers": []}, timeout=300
    )
    fork = forked["sessionId"]
    assert fork != sid and server_has(server, fork)
    start = len(proc.frames)
    reply = proc.prompt(fork, "and in the fork [scenario:echo]")
    assert "result" in reply, reply
    assert reply["result"]["stopReason"] == "end_turn", reply
    assert text_of(updates(proc, fork, start)) == "Echo: and in the fork [scenario:echo]"
    # The fork's model saw the parent's history; the parent did not get the fork's.
    assert "remember the heron" in json.dumps(llm.requests[-1].body["messages"])
    listed = {s["sessionId"] for s in proc.result("session/list", {"cwd": cwd})["sessions"]}
    assert listed == {sid, fork}
    start = len(proc.frames)
    proc.result("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    said = text_of(updates(proc, sid, start), "user_message_chunk")
    assert "remember the heron" in said and "and in the fork" not in said, said


def test_the_key_is_in_no_frame_log_or_file(agent, server):
    """After everything above (errors, a restart), at DEBUG level."""
    assert_key_nowhere(agent, server)
