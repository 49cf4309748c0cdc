"""End to end: the echo agent as a subprocess, driven by the official TypeScript ACP SDK.

`tests/js/echo_client.mjs` (on `@agentclientprotocol/sdk` from npm, installed in
tests/js/node_modules) spawns `python examples/echo_agent.py`, runs the scenario and
prints one JSON summary line; it also dumps every frame, which is checked here against
the official JSON Schema from both ends.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from _ts_client import JS_DIR, NEEDS_TS_SDK, NODE, ROOT

from trio_acp.testing.wire_check import FrameChecker

CLIENT = JS_DIR / "echo_client.mjs"
ECHO_AGENT = ROOT / "examples" / "echo_agent.py"

pytestmark = NEEDS_TS_SDK


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict[str, Any]:
    frames_path = tmp_path_factory.mktemp("ts-e2e") / "frames.jsonl"
    proc = subprocess.run(
        [NODE, str(CLIENT), "--frames", str(frames_path), sys.executable, str(ECHO_AGENT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"echo_client.mjs failed:\n{proc.stderr}"
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, (
        f"expected one summary line, got:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    frames = [
        json.loads(line) for line in frames_path.read_text(encoding="utf-8").splitlines() if line
    ]
    return {"summary": json.loads(lines[0]), "frames": frames, "stderr": proc.stderr}


def test_initialize(run):
    summary = run["summary"]
    assert summary["protocolVersion"] == 1
    assert summary["agentInfo"]["name"] == "trio-acp-echo"
    assert summary["agentInfo"]["version"]


def test_prompt_updates_arrive_before_the_response(run):
    summary = run["summary"]
    assert summary["flood"] == {"stopReason": "end_turn", "updatesAtReturn": 200, "inOrder": True}
    assert summary["hello"] == {"stopReason": "end_turn", "last": "hello world"}


def test_cancel_mid_slow(run):
    cancel = run["summary"]["cancel"]
    assert cancel["stopReason"] == "cancelled"
    assert 1 <= cancel["updatesAtReturn"] < 1000
    assert cancel["updatesLater"] == cancel["updatesAtReturn"]
    assert cancel["againStopReason"] == "end_turn"
    assert cancel["againLast"] == "hello again"


def test_permission_flow(run):
    summary = run["summary"]
    ask = summary["ask"]
    assert ask["stopReason"] == "end_turn"
    assert ask["permissionRequests"] == [
        {"sessionId": summary["sessionId"], "toolCallId": "t1", "options": ["yes", "no"]}
    ]
    assert ask["toolCalls"] == ["t1"]
    assert "selected" in ask["last"] and "yes" in ask["last"]


def test_extension_and_unknown_methods(run):
    summary = run["summary"]
    assert summary["ping"] == {"pong": {"x": 1, "s": "é"}}
    assert summary["unknown"] == -32601
    assert summary["unknownExt"] == -32601


def test_agent_exits_after_stdin_eof(run):
    assert run["summary"]["agentExit"] == {"code": 0, "signal": None}


def test_every_frame_matches_the_official_schema(run):
    frames = run["frames"]
    assert len(frames) == run["summary"]["frames"]
    agent_side, client_side = FrameChecker(), FrameChecker()
    # Register every request first (ids never repeat within a direction here).
    for f in frames:
        (agent_side if f["dir"] == "to_agent" else client_side).received(f["msg"])
    for f in frames:
        (agent_side if f["dir"] == "from_agent" else client_side).sent(f["msg"])
    assert agent_side.errors == []
    assert client_side.errors == []
    assert agent_side.checked >= 200 + 10
    assert client_side.checked >= 13


def test_nothing_for_the_cancelled_session_after_its_response(run):
    frames = run["frames"]
    prompts = [
        f["msg"]
        for f in frames
        if f["dir"] == "to_agent"
        and f["msg"].get("method") == "session/prompt"
        and "slow" in f["msg"]["params"]["prompt"][0]["text"]
    ]
    assert len(prompts) == 1
    slow_sid, slow_id = prompts[0]["params"]["sessionId"], prompts[0]["id"]
    answered_at = next(
        i
        for i, f in enumerate(frames)
        if f["dir"] == "from_agent" and f["msg"].get("id") == slow_id and "method" not in f["msg"]
    )
    assert frames[answered_at]["msg"]["result"] == {"stopReason": "cancelled"}
    after = [
        f["msg"]["params"]["update"]
        for f in frames[answered_at + 1 :]
        if f["dir"] == "from_agent"
        and f["msg"].get("method") == "session/update"
        and f["msg"]["params"]["sessionId"] == slow_sid
    ]
    assert [u["content"]["text"] for u in after] == ["hello again"]
