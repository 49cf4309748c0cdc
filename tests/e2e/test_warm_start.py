"""Warm start (src/trio_acp/warm.py, warm_server.py): launches served by a fork server that imported the SDK.

`python -m trio_acp` as an editor launches it, raw frames on its stdio, with a warm server
in a private directory of the test's own (never the user's). What must hold: a whole
session works through the server and stdout carries only frames; the child has the
launcher's cwd and environment, with `LLM_API_KEY` withheld from its tools; a launch the
server cannot take (no server, a stale socket, different import-time settings) starts the
ordinary way; killing the launcher ends its child; a signal to the launcher reaches the
child; status, stop and the idle timeout. Linux only, like warm start itself.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import trio

from trio_acp import warm
from trio_acp.testing import scenario_prompt, scripted_env

pytestmark = [
    pytest.mark.skipif(not warm.supported(), reason="warm start needs Linux"),
    # The server's start (one SDK import, ~7 s) is in the first test's setup: on a loaded
    # machine that import alone has taken over a minute.
    pytest.mark.timeout(400),
]

CANARY = "sk-warm-canary-0123456789abcdef"


def _base_env(directory: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TRIO_ACP_WARM",) and not k.startswith("LLM_")
    }
    env.update(TRIO_ACP_WARM_DIR=str(directory), **extra)
    return env


def _cli(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trio_acp", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A warm server started with `trio-acp warm start`, stopped with `warm stop`."""
    directory = tmp_path_factory.mktemp("warm") / "run"
    env = _base_env(directory, LLM_API_KEY=CANARY)  # the server drops it at start
    started = _cli(env, "warm", "start")
    assert started.returncode == 0, started.stderr
    status = json.loads(_cli(env, "warm", "status").stdout)
    yield directory, status["pid"]
    stopped = _cli(env, "warm", "stop")
    assert "stopping" in stopped.stdout
    psutil.Process(status["pid"]).wait(30)
    assert not (directory / warm.SOCKET_NAME).exists()
    assert _cli(env, "warm", "status").returncode == 3


class Launch:
    """`python -m trio_acp` with raw JSON lines on its stdio; every stdout line must be a frame."""

    def __init__(self, process: trio.Process) -> None:
        self.process, self.buffer, self.frames = process, b"", []

    @classmethod
    async def spawn(cls, env: dict[str, str], cwd: str) -> Launch:
        return cls(
            await trio.lowlevel.open_process(
                [sys.executable, "-m", "trio_acp"], stdin=-1, stdout=-1, env=env, cwd=cwd
            )
        )

    async def send(self, frame: dict) -> None:
        await self.process.stdin.send_all(json.dumps(frame).encode() + b"\n")

    async def until(self, predicate) -> dict:
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                frame = json.loads(line)  # stdout carries frames and nothing else
                assert frame.get("jsonrpc") == "2.0", frame
                self.frames.append(frame)
                if predicate(frame):
                    return frame
            data = await self.process.stdout.receive_some(1 << 16)
            assert data, "the agent closed its stdout"
            self.buffer += data

    async def request(self, rid, method: str, params: dict) -> dict:
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return await self.until(lambda f: f.get("id") == rid and "method" not in f)

    async def initialize(self) -> dict:
        return await self.request(1, "initialize", {"protocolVersion": 1})

    async def close(self) -> int:
        await self.process.stdin.aclose()
        with trio.fail_after(30):
            rest = await _read_all(self.process.stdout)
            return await self.process.wait(), rest


async def _read_all(stream) -> bytes:
    data = b""
    while chunk := await stream.receive_some(1 << 16):
        data += chunk
    return data


def _children(server_pid: int) -> list[psutil.Process]:
    return [p for p in psutil.Process(server_pid).children() if p.status() != psutil.STATUS_ZOMBIE]


def _agent_env(llm, directory: Path, home: Path, **extra: str) -> dict[str, str]:
    env = _base_env(directory, **extra)
    env.update(scripted_env(llm.base_url))
    env.update(
        OPENHANDS_PERSISTENCE_DIR=str(home),
        LLM_NUM_RETRIES="1",
        LLM_API_KEY=CANARY,
        TRIO_ACP_DEFAULT_MODE="always-approve",
        WARM_TEST_MARK="launcher-env-42",
    )
    return env


async def test_a_session_through_the_warm_server_has_the_launchers_cwd_and_env(
    server, llm, tmp_path
):
    directory, server_pid = server
    ws = tmp_path / "ws"
    ws.mkdir()
    before = json.loads(_cli(_base_env(directory), "warm", "status").stdout)["launches"]
    launch = await Launch.spawn(_agent_env(llm, directory, tmp_path / "home"), cwd=str(ws))
    with trio.fail_after(120):
        assert "result" in await launch.initialize()
        (child,) = _children(server_pid)  # served by a child of the server, not in the launcher
        assert psutil.Process(launch.process.pid).children() == []
        new = await launch.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
        sid = new["result"]["sessionId"]
        command = "pwd; echo mark=$WARM_TEST_MARK; echo key=$LLM_API_KEY."
        reply = await launch.request(
            3,
            "session/prompt",
            {
                "sessionId": sid,
                "prompt": [{"type": "text", "text": scenario_prompt("terminal", command=command)}],
            },
        )
        assert reply["result"]["stopReason"] == "end_turn"
        # The launcher's /proc environ no longer shows the key (as the ordinary start's).
        environ = Path(f"/proc/{launch.process.pid}/environ")
        try:
            assert CANARY.encode() not in environ.read_bytes()
        except PermissionError:
            pass  # non-dumpable: other processes cannot read it at all
        code, rest = await launch.close()
    assert code == 0 and rest == b""
    output = json.dumps([f for f in launch.frames if f.get("method") == "session/update"])
    assert str(ws) in output  # pwd: the launcher's cwd
    assert "mark=launcher-env-42" in output  # the launcher's environment
    assert "key=." in output and CANARY not in output  # withheld from the tool
    assert json.loads(_cli(_base_env(directory), "warm", "status").stdout)["launches"] == before + 1
    with trio.fail_after(10):
        while _children(server_pid):
            await trio.sleep(0.05)


async def test_killing_the_launcher_ends_its_child_and_signals_are_relayed(server, llm, tmp_path):
    directory, server_pid = server
    env = _agent_env(llm, directory, tmp_path / "home")
    with trio.fail_after(60):
        launch = await Launch.spawn(env, cwd=str(tmp_path))
        assert "result" in await launch.initialize()
        (child,) = _children(server_pid)
        launch.process.kill()  # SIGKILL: the launcher cannot tell anyone
        await launch.process.wait()
        child.wait(15)

        launch = await Launch.spawn(env, cwd=str(tmp_path))
        assert "result" in await launch.initialize()
        (child,) = _children(server_pid)
        launch.process.send_signal(signal.SIGTERM)  # relayed: the child shuts down gracefully
        assert await launch.process.wait() == 0
        child.wait(15)


@pytest.mark.parametrize("case", ["absent", "stale socket", "import-time settings differ"])
async def test_a_launch_the_server_cannot_take_starts_the_ordinary_way(server, llm, tmp_path, case):
    directory, server_pid = server
    if case == "absent":
        env = _agent_env(llm, tmp_path / "nothing-here", tmp_path / "home")
    elif case == "stale socket":
        stale = tmp_path / "stale"
        stale.mkdir(mode=0o700)
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(stale / warm.SOCKET_NAME))  # bound, never listening: refused
        env = _agent_env(llm, stale, tmp_path / "home")
    else:
        env = _agent_env(llm, directory, tmp_path / "home", LITELLM_WARM_TEST="other")
    before = json.loads(_cli(_base_env(directory), "warm", "status").stdout)["launches"]
    with trio.fail_after(60):
        launch = await Launch.spawn(env, cwd=str(tmp_path))
        assert "result" in await launch.initialize()
        assert _children(server_pid) == []
        assert psutil.Process(launch.process.pid).num_threads() > 1  # the SDK import, in-process
        code, rest = await launch.close()
    assert code == 0 and rest == b""
    assert json.loads(_cli(_base_env(directory), "warm", "status").stdout)["launches"] == before


def test_an_idle_server_exits_and_a_world_readable_directory_is_refused(tmp_path):
    directory = tmp_path / "idle"
    env = _base_env(directory)
    with subprocess.Popen(
        [sys.executable, "-m", "trio_acp", "warm", "serve", "--idle", "1"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert out == b""
    assert b"ready" in err and b"idle" in err
    assert not (directory / warm.SOCKET_NAME).exists()
    assert (directory.stat().st_mode & 0o777) == 0o700

    directory.chmod(0o755)
    with pytest.raises(warm.WarmError, match="0700"):
        warm.private_dir(env)
    assert _cli(env, "warm", "serve").returncode != 0
