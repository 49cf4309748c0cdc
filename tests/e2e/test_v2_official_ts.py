"""ACP v2 (draft) with a real v2 client: the official TypeScript SDK's experimental v2 API
(`@agentclientprotocol/sdk/experimental/v2`, tests/js/v2_client.mjs) drives `trio-acp`.

The SDK parses every frame it receives with its v2 types, so a frame it cannot read fails
the run. What the client *shows* is checked: the negotiated version, the prompt's
`messageId`, the states of the turn (a permission question in between: always-ask), the
text it collected, and the idle that ends the turn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _ts_client import JS_DIR, NEEDS_TS_SDK, NODE, ROOT

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env

pytestmark = [*NEEDS_TS_SDK, pytest.mark.timeout(300)]


def test_the_official_v2_client_runs_a_turn_with_a_question(tmp_path: Path) -> None:
    persist, ws, tmp = tmp_path / "persist", tmp_path / "ws", tmp_path / "tmp"
    for d in (persist, ws, tmp):
        d.mkdir()
    with ScriptedLLM() as llm:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=str(persist),
            TMPDIR=str(tmp),
            TRIO_ACP_DEFAULT_MODE="always-ask",
            TRIO_ACP_WARM="0",
        )
        prompt = scenario_prompt("terminal", "run it", command="echo via-official-v2")
        proc = subprocess.run(
            [
                NODE,
                str(JS_DIR / "v2_client.mjs"),
                str(ws),
                prompt,
                sys.executable,
                "-m",
                "trio_acp",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=280,
        )
    assert proc.returncode == 0, f"v2_client.mjs failed:\n{proc.stderr[-3000:]}"
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["protocolVersion"] == 2 and summary["agent"] == "trio-acp"
    assert summary["messageId"]
    assert summary["questions"] == ["echo via-official-v2"]
    assert summary["states"] == ["running", "requires_action", "running", "idle"]
    assert summary["stopReason"] == "end_turn"
    assert summary["kinds"][0] == "user_message"
    assert "tool_call_update" in summary["kinds"]
    assert summary["text"] == "I'll run a command.I ran the command in the terminal."
    assert summary["exitCode"] == 0
