"""Many sessions prompting at once in one `trio-acp` process (figures: bench/concurrency.py).

Eight sessions each run a `terminal` tool call at the same time: every prompt ends its turn
with its own tool result, and once the sessions are closed the agent is back to where it
started — no tool process left, no thread left over, nothing in its private TMPDIR (the file
editor's `oh_editor_history_*` directories among what it must not leave).
"""

from __future__ import annotations

import os
import time

import psutil
import pytest

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.raw_agent import RawAgent

SESSIONS = 8


def live_children(pid: int) -> list[psutil.Process]:
    return [
        c
        for c in psutil.Process(pid).children(recursive=True)
        if c.status() != psutil.STATUS_ZOMBIE
    ]


@pytest.mark.timeout(300)  # the first session/new imports the SDK: slow on a loaded machine
def test_eight_sessions_prompting_at_once_complete_and_clean_up(tmp_path):
    persist, ws, tmp = tmp_path / "persist", tmp_path / "ws", tmp_path / "tmp"
    for d in (persist, ws, tmp):
        d.mkdir()
    with ScriptedLLM() as llm:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=str(persist),
            # Eight shells start at once: not under the developer's ~/.bashrc, whose
            # start-up tools may serialize (pyenv's rehash lock) past the tool's timeout.
            HOME=str(tmp_path),
            TMPDIR=str(tmp),
            LLM_NUM_RETRIES="1",
            LLM_TIMEOUT="60",
            TRIO_ACP_DEFAULT_MODE="always-approve",
        )
        with RawAgent.spawn(env, cwd=str(ws)) as agent:
            agent.initialize()
            first = agent.new_session(str(ws))  # the SDK is imported: the baseline after it
            assert "result" in agent.request("session/close", {"sessionId": first})
            baseline_threads = psutil.Process(agent.pid).num_threads()
            sids = [agent.new_session(str(ws)) for _ in range(SESSIONS)]
            ids = {}
            for i, sid in enumerate(sids):
                ids[sid] = agent.new_id()
                agent.send(
                    {
                        "jsonrpc": "2.0",
                        "id": ids[sid],
                        "method": "session/prompt",
                        "params": {
                            "sessionId": sid,
                            "prompt": [
                                {
                                    "type": "text",
                                    "text": scenario_prompt(
                                        "terminal", f"s{i}", command=f"echo concurrent-{i}"
                                    ),
                                }
                            ],
                        },
                    }
                )
            for rid in ids.values():
                reply = agent.response(rid, timeout=90)
                assert reply.get("result", {}).get("stopReason") == "end_turn", reply
            for i, sid in enumerate(sids):
                outputs = [
                    f
                    for f in agent.frames
                    if f.get("method") == "session/update"
                    and f["params"]["sessionId"] == sid
                    and f["params"]["update"].get("sessionUpdate") == "tool_call_update"
                    and f["params"]["update"].get("status") == "completed"
                ]
                assert f"concurrent-{i}" in str(outputs), (i, outputs)
            for sid in sids:
                assert "result" in agent.request("session/close", {"sessionId": sid})
            # Trio's idle worker threads end 10 s after their last job (its thread cache):
            # a bound past that, not a figure.
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and (
                live_children(agent.pid)
                or psutil.Process(agent.pid).num_threads() > baseline_threads
            ):
                agent.drain(0.2)
            assert live_children(agent.pid) == []
            assert psutil.Process(agent.pid).num_threads() <= baseline_threads
            assert agent.bad_lines == []
            assert agent.close() == 0
    assert sorted(p.name for p in tmp.iterdir()) == []
