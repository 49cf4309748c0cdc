"""The client dies, or the agent is killed, in the middle of a turn.

`trio-acp` as a subprocess with raw frames on its stdio (what an editor's process does);
the model is the scripted server. What must hold:

- the client closes stdin (or dies) while `sleep 60` runs: the agent exits, leaves no tool
  process behind, and the turn so far is on disk — a new process's `session/load` replays it;
- the agent is killed with SIGKILL while a permission question is pending: a new process
  loads the session with everything persisted before the kill, and the action that was
  awaiting permission never runs unasked;
- the agent gets SIGHUP (the editor's terminal or SSH session went away) or SIGTERM while
  a prompt runs: the prompt is answered `cancelled`, the process exits 0, and the turn is
  on disk.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import psutil
import pytest
import trio

from trio_acp.testing import scenario_prompt, scripted_env


class Agent:
    """`python -m trio_acp` with raw JSON lines on its stdio."""

    def __init__(self, process: trio.Process) -> None:
        self.process, self.buffer, self.frames = process, b"", []

    @classmethod
    async def spawn(cls, env: dict[str, str]) -> Agent:
        return cls(
            await trio.lowlevel.open_process(
                [sys.executable, "-m", "trio_acp"], stdin=-1, stdout=-1, env=env
            )
        )

    async def send(self, frame: dict) -> None:
        await self.process.stdin.send_all(json.dumps(frame).encode() + b"\n")

    async def until(self, predicate) -> dict:
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                frame = json.loads(line)
                self.frames.append(frame)
                if predicate(frame):
                    return frame
            data = await self.process.stdout.receive_some(1 << 16)
            assert data, "the agent closed its stdout"
            self.buffer += data

    async def request(self, rid, method: str, params: dict) -> dict:
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return await self.until(lambda f: f.get("id") == rid and "method" not in f)

    async def start(self, ws: str, *, load: str | None = None) -> str:
        await self.request(1, "initialize", {"protocolVersion": 1})
        if load is None:
            return (await self.request(2, "session/new", {"cwd": ws, "mcpServers": []}))["result"][
                "sessionId"
            ]
        reply = await self.request(
            2, "session/load", {"sessionId": load, "cwd": ws, "mcpServers": []}
        )
        assert "result" in reply, reply
        return load

    def replayed(self) -> list[tuple[str, str | None]]:
        return [
            (f["params"]["update"]["sessionUpdate"], f["params"]["update"].get("status"))
            for f in self.frames
            if f.get("method") == "session/update"
        ]


def _env(llm, home, mode: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(scripted_env(llm.base_url))
    env.update(OPENHANDS_PERSISTENCE_DIR=str(home), LLM_NUM_RETRIES="1", TRIO_ACP_DEFAULT_MODE=mode)
    return env


def _prompt(sid: str, text: str) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
    }


async def test_stdin_closed_mid_tool_exits_cleanly_and_the_turn_is_on_disk(llm, tmp_path):
    ws = str(tmp_path)
    env = _env(llm, tmp_path / "home", "always-approve")
    with trio.fail_after(120):
        agent = await Agent.spawn(env)
        sid = await agent.start(ws)
        await agent.send(_prompt(sid, scenario_prompt("sleep", "wait a minute", seconds=60)))
        await agent.until(
            lambda f: (
                f.get("method") == "session/update"
                and f["params"]["update"].get("status") == "in_progress"
            )
        )
        tree = psutil.Process(agent.process.pid)
        while not any(p.name() == "sleep" for p in tree.children(recursive=True)):
            await trio.sleep(0.05)
        children = tree.children(recursive=True)
        await agent.process.stdin.aclose()  # the editor went away
        with trio.fail_after(15):
            await agent.process.wait()
        left = [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert left == [], f"left behind: {[(p.pid, p.name()) for p in left]}"

        again = await Agent.spawn(env)
        await again.start(ws, load=sid)
        replay = again.replayed()
        await again.process.stdin.aclose()
        await again.process.wait()
    kinds = [kind for kind, _ in replay]
    assert kinds[0] == "user_message_chunk"
    assert ("tool_call", "failed") in replay  # the interrupted `sleep`, closed as failed


async def test_killed_while_asking_permission_the_action_never_runs_unasked(llm, tmp_path):
    ws = str(tmp_path)
    marker = tmp_path / "ran"
    env = _env(llm, tmp_path / "home", "always-ask")
    with trio.fail_after(120):
        agent = await Agent.spawn(env)
        sid = await agent.start(ws)
        await agent.send(
            _prompt(sid, scenario_prompt("terminal", "touch it", command=f"touch {marker}"))
        )
        await agent.until(lambda f: f.get("method") == "session/request_permission")
        os.kill(agent.process.pid, signal.SIGKILL)
        await agent.process.wait()

        again = await Agent.spawn(env)
        await again.start(ws, load=sid)
        replay = again.replayed()
        # The session is usable, and the question that was never answered did not become a yes.
        reply = await again.request(
            3,
            "session/prompt",
            {
                "sessionId": sid,
                "prompt": [{"type": "text", "text": scenario_prompt("echo", "still there?")}],
            },
        )
        await again.process.stdin.aclose()
        await again.process.wait()
    assert replay[0] == ("user_message_chunk", None)
    assert any(kind == "tool_call" for kind, _ in replay)  # persisted before the kill
    assert reply["result"]["stopReason"] == "end_turn"
    assert not Path(marker).exists()


def _runs_sleep(tree: psutil.Process) -> bool:
    # The scenario's `sleep 60`, not any sleep: a shell's start-up can run short ones (pyenv's
    # rehash waits on its lock with `sleep 0.1`), and a signal then would come before the tool.
    for child in tree.children(recursive=True):
        try:
            if child.name() == "sleep" and child.cmdline()[1:] == ["60"]:
                return True
        except psutil.Error:  # gone meanwhile (the tool's start-up runs short commands)
            continue
    return False


@pytest.mark.timeout(400)  # two launches, each importing the SDK
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM])
async def test_hangup_mid_tool_answers_the_prompt_and_saves_the_turn(llm, tmp_path, signum):
    ws = str(tmp_path)
    env = _env(llm, tmp_path / "home", "always-approve")
    with trio.fail_after(360):
        agent = await Agent.spawn(env)
        sid = await agent.start(ws)
        await agent.send(_prompt(sid, scenario_prompt("sleep", "wait a minute", seconds=60)))
        tree = psutil.Process(agent.process.pid)
        while not _runs_sleep(tree):
            await trio.sleep(0.05)
        agent.process.send_signal(signum)  # stdin stays open: the signal alone ends it
        answer = await agent.until(lambda f: f.get("id") == 3)
        with trio.fail_after(15):
            code = await agent.process.wait()
        await agent.process.stdin.aclose()

        again = await Agent.spawn(env)
        await again.start(ws, load=sid)
        replay = again.replayed()
        await again.process.stdin.aclose()
        await again.process.wait()
    assert answer.get("result") == {"stopReason": "cancelled"}, answer
    assert code == 0
    assert replay[0] == ("user_message_chunk", None)
    assert any(kind == "tool_call" for kind, _ in replay)  # the turn was saved
