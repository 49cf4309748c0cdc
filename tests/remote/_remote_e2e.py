"""What the end-to-end files of tests/remote share (test_e2e_*.py): the `trio-acp
--agent-server URL` process over stdio (`Agent`; the key in
`TRIO_ACP_AGENT_SERVER_API_KEY`, the scripted model) and helpers to drive and read it.

The fixtures (`agent`, `llm`, `cwd`: one process and one scripted model per file,
the agent-server per test worker) are in conftest.py; the files are split by concern so
parallel workers (pytest-xdist, whole files each) can spread them.
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
from pathlib import Path
from typing import Any

import psutil

from trio_acp.openhands.backends.remote import MARKER_VAR
from trio_acp.testing import ScriptedLLM, scripted_env
from trio_acp.testing.agent_server import AgentServer
from trio_acp.testing.raw_agent import RawAgent


class Agent:
    """A test file's `trio-acp --agent-server URL` process; `restart()` replaces it."""

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


def assert_key_nowhere(agent: Agent, server: AgentServer) -> None:
    """The key in no frame, no log line (the process logs at DEBUG) and no file."""
    key = server.api_key
    assert all(key not in json.dumps(f) for f in agent.proc.frames)
    # The log is written by the agent's threads as they go: a module whose tests ran quickly
    # may get here before the SDK import's first lines (bounded wait, not a timing check).
    deadline = time.monotonic() + 120
    stderr = agent.stderr_path.read_text(errors="replace")
    while " DEBUG " not in stderr and time.monotonic() < deadline:
        time.sleep(0.2)
        stderr = agent.stderr_path.read_text(errors="replace")
    assert " DEBUG " in stderr, f"the log the check relies on is not there: {stderr[-3000:]!r}"
    assert key not in stderr
    for path in Path(agent.home).rglob("*"):
        if path.is_file() and path != agent.stderr_path:
            assert key.encode() not in path.read_bytes(), f"the key is in {path}"
