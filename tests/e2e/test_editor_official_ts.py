"""End to end: `trio-acp` over stdio under the official TypeScript client acting as an editor.

`tests/js/editor_client.mjs` (on `@agentclientprotocol/sdk`) implements `fs/*` (buffers
that differ from the disk) and `terminal/*` (real processes) itself and records every call;
the model is the scripted server. With the editor's capabilities, files and commands go
through the editor (docs/editor-workspace.md); with none, nothing of it is called.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _ts_client import JS_DIR, NEEDS_TS_SDK, NODE, ROOT

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env

CLIENT = JS_DIR / "editor_client.mjs"

pytestmark = NEEDS_TS_SDK

BUFFER = "greeting = 'unsaved'\n"
ON_DISK = "greeting = 'on disk'\n"


def run_editor(caps: str, tmp: Path) -> tuple[dict[str, Any], Path]:
    home, ws = tmp / "home", tmp / "ws"
    home.mkdir()
    ws.mkdir()
    path = ws / "app.py"
    path.write_text(ON_DISK)
    # The buffer's text is what the edit replaces: with the disk's, str_replace would fail.
    old = "'unsaved'" if caps == "editor" else "'on disk'"
    prompts = [
        {
            "name": "review",
            "text": scenario_prompt("review", "", path=str(path), old=old, new="'edited'"),
        },
        {
            "name": "echo",
            "text": scenario_prompt("terminal", "", command="echo hello from the editor"),
        },
        {
            "name": "sleep",
            "text": scenario_prompt("sleep", "", seconds=30),
            "cancelAfter": "terminal/create" if caps == "editor" else None,
            "cancelDelayMs": 300,
        },
    ]
    if caps != "editor":
        prompts.pop()  # a local `sleep 30` has its own cancel tests (tests/e2e)
    config = {
        "caps": caps,
        "cwd": os.path.realpath(ws),
        "buffers": {os.path.realpath(path): BUFFER} if caps == "editor" else {},
        "prompts": prompts,
    }
    with ScriptedLLM() as llm:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(OPENHANDS_PERSISTENCE_DIR=str(home), LLM_NUM_RETRIES="1", LLM_TIMEOUT="30")
        proc = subprocess.run(
            [NODE, str(CLIENT), json.dumps(config), sys.executable, "-m", "trio_acp"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert proc.returncode == 0, f"editor_client.mjs failed:\n{proc.stderr[-5000:]}"
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, f"expected one summary line:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return json.loads(lines[0]), path


@pytest.fixture(scope="module")
def editor(tmp_path_factory) -> tuple[dict[str, Any], Path]:
    return run_editor("editor", tmp_path_factory.mktemp("editor"))


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> tuple[dict[str, Any], Path]:
    return run_editor("none", tmp_path_factory.mktemp("plain"))


def methods(calls: list[Any]) -> list[str]:
    return [c[0] for c in calls]


def tool_updates(prompt: dict[str, Any]) -> list[dict[str, Any]]:
    return [u for u in prompt["updates"] if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


def test_the_view_reads_the_buffer_and_the_edit_goes_to_the_editor(editor):
    summary, path = editor
    review = summary["prompts"]["review"]
    assert review["stopReason"] == "end_turn"
    # What the model was shown is the buffer, not the disk.
    texts = json.dumps(tool_updates(review))
    assert "unsaved" in texts and "on disk" not in texts
    writes = [c[1] for c in review["calls"] if c[0] == "fs/write_text_file"]
    assert writes == [{"path": os.path.realpath(path), "content": "greeting = 'edited'\n"}]
    assert summary["buffers"][os.path.realpath(path)] == "greeting = 'edited'\n"
    assert path.read_text() == ON_DISK  # the agent never wrote the disk
    # The permission preview's diff is against the buffer the user sees.
    diffs = [
        c for p in summary["permissions"] for c in p.get("content") or [] if c["type"] == "diff"
    ]
    assert diffs and diffs[-1]["oldText"] == BUFFER


def test_a_command_runs_in_an_editor_terminal_embedded_and_released(editor):
    summary, _ = editor
    echo = summary["prompts"]["echo"]
    assert echo["stopReason"] == "end_turn"
    terminal_calls = [m for m in methods(echo["calls"]) if m.startswith("terminal/")]
    assert terminal_calls == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    tid = echo["calls"][0][1]["terminalId"]
    embedded = [
        u
        for u in tool_updates(echo)
        if {"type": "terminal", "terminalId": tid} in (u.get("content") or [])
    ]
    assert embedded, "the tool call never embedded the editor's terminal"
    last = [u for u in tool_updates(echo) if u.get("status") == "completed"][-1]
    assert last["content"] == [{"type": "terminal", "terminalId": tid}]
    assert "hello from the editor" in last["rawOutput"]["output"]
    assert last["rawOutput"]["exit_code"] == 0


def test_cancelling_a_command_kills_and_releases_its_terminal_before_the_response(editor):
    summary, _ = editor
    sleep = summary["prompts"]["sleep"]
    assert sleep["stopReason"] == "cancelled"
    names = methods(sleep["calls"])
    assert names[0] == "terminal/create"
    after_cancel = names[names.index("session/cancel (sent)") :]
    # The pending wait was cancelled, then the terminal killed and released — all before
    # the `cancelled` response (the calls were recorded before the prompt returned).
    assert "$/cancel_request" in after_cancel
    assert after_cancel.index("terminal/kill") < after_cancel.index("terminal/release")
    assert summary["liveTerminals"] == []
    assert sleep["cancelMs"] is not None


def test_without_capabilities_nothing_goes_through_the_client(plain):
    summary, path = plain
    assert summary["prompts"]["review"]["stopReason"] == "end_turn"
    assert summary["prompts"]["echo"]["stopReason"] == "end_turn"
    assert summary["calls"] == []
    assert path.read_text() == "greeting = 'edited'\n"  # the disk, as before
    echo = summary["prompts"]["echo"]
    assert "hello from the editor" in json.dumps(tool_updates(echo))
    assert not any(
        c.get("type") == "terminal" for u in tool_updates(echo) for c in u.get("content") or []
    )


def test_the_agent_advertises_additional_directories(editor):
    summary, _ = editor
    assert summary["agentCapabilities"]["sessionCapabilities"]["additionalDirectories"] == {}
