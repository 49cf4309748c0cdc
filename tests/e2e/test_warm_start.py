"""Warm start (src/trio_acp/warm.py, warm_server.py): launches served by a fork server that imported the SDK.

`python -m trio_acp` as an editor launches it, raw frames on its stdio, with a warm server
in a private directory of the test's own (never the user's). What must hold: a whole
session works through the server and stdout carries only frames; the child has the
launcher's cwd, environment (its very `/proc` block, never the server's) and resource
limits, with `LLM_API_KEY` withheld from its tools; a launch the server cannot take (no
server, a stale socket, other import-time settings) starts the ordinary way and starts the
server it lacked; a stopped server (SIGSTOP, then SIGCONT) never puts a second agent on
a launch's pipe; a silent connection delays no launch; killing the launcher ends its
child; a signal to the launcher reaches the child; status, stop and the idle timeout.
Every server a test starts is stopped by it. Linux only, like warm start itself.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
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
#: In the warm server's environment only: no child may show it.
SERVER_SECRET = "server-only-secret-0123456789"
#: The launches' budget for the server: generous (the machine may be loaded); the tests
#: of a stalled server set their own.
WAIT = "20"


def _base_env(directory: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TRIO_ACP_WARM",) and not k.startswith("LLM_")
    }
    env.update({"TRIO_ACP_WARM_DIR": str(directory), "TRIO_ACP_WARM_WAIT": WAIT, **extra})
    return env


def _cli(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trio_acp", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _wait_ready(env: dict[str, str], key: str | None = None, within: float = 300) -> dict:
    """The server's status once it answers (its SDK import first: a bound, not a figure)."""
    deadline = time.monotonic() + within
    while True:
        try:
            return warm.request("status", env=env, key=key, timeout=2.0)
        except (OSError, EOFError, ValueError, warm.WarmError):
            assert time.monotonic() < deadline, "the warm server did not come up"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A warm server run as `trio-acp warm serve` with secrets in its own environment,
    stopped with `warm stop`."""
    directory = tmp_path_factory.mktemp("warm") / "run"
    env = _base_env(directory, LLM_API_KEY=CANARY, AWS_SECRET_ACCESS_KEY=SERVER_SECRET)
    directory.mkdir(mode=0o700)
    with open(directory / "serve.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "trio_acp", "warm", "serve"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd="/",
        )
    try:
        status = _wait_ready(env)
        assert status["pid"] == proc.pid
        yield directory, proc.pid
    finally:
        # (The last test stops it already, the way a user would.)
        stopped = _cli(env, "warm", "stop")
        proc.wait(30)
    assert stopped.returncode == 0, stopped
    assert list(directory.glob("warm-*.sock")) == []
    assert _cli(env, "warm", "status").returncode == 3


def _kill_started_server(stderr: str) -> None:
    """A launch that went cold started a server (its line on stderr says which): gone."""
    found = re.search(r"started one \(pid (\d+)\)", stderr)
    if found:
        try:
            os.kill(int(found.group(1)), signal.SIGKILL)
        except ProcessLookupError:
            pass


class Launch:
    """`python -m trio_acp` with raw JSON lines on its stdio; every stdout line must be a frame."""

    def __init__(self, process: trio.Process, stderr: Path) -> None:
        self.process, self.buffer, self.frames, self.stderr_path = process, b"", [], stderr

    @classmethod
    async def spawn(cls, env: dict[str, str], cwd: str, nofile: int | None = None) -> Launch:
        def limit() -> None:  # in the launcher, before exec: `ulimit -Sn`
            if nofile is not None:
                resource.setrlimit(
                    resource.RLIMIT_NOFILE, (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
                )

        stderr = Path(cwd) / f"launch-{time.monotonic_ns()}.err"
        with open(stderr, "wb") as err:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "trio_acp"],
                stdin=-1,
                stdout=-1,
                stderr=err,
                env=env,
                cwd=cwd,
                preexec_fn=limit,
            )
        return cls(process, stderr)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

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


def _launches(directory: Path) -> int:
    return json.loads(_cli(_base_env(directory), "warm", "status").stdout)["launches"]


def _environ_names(block: bytes) -> set[bytes]:
    return {entry.partition(b"=")[0] for entry in block.split(b"\0") if entry}


async def test_a_session_through_the_warm_server_has_the_launchers_cwd_env_and_limits(
    server, llm, tmp_path
):
    directory, server_pid = server
    ws = tmp_path / "ws"
    ws.mkdir()
    before = _launches(directory)
    env = _agent_env(llm, directory, tmp_path / "home")
    nofile = 777  # the launcher's `ulimit -Sn`, not the server's
    launch = await Launch.spawn(env, cwd=str(ws), nofile=nofile)
    with trio.fail_after(120):
        assert "result" in await launch.initialize()
        (child,) = _children(server_pid)  # served by a child of the server, not in the launcher
        assert psutil.Process(launch.process.pid).children() == []
        # What the child holds is the launcher's: its limits, its command line and its
        # environment block as the kernel shows them, never the server's.
        assert child.rlimit(psutil.RLIMIT_NOFILE)[0] == nofile
        assert psutil.Process(server_pid).rlimit(psutil.RLIMIT_NOFILE)[0] != nofile
        if os.geteuid() == 0:  # the child is non-dumpable: only root reads its environ
            block = Path(f"/proc/{child.pid}/environ").read_bytes()
            assert SERVER_SECRET.encode() not in block
            assert b"WARM_TEST_MARK=launcher-env-42" in block
            assert _environ_names(block) == {name.encode() for name in env}
        launcher_cmdline = Path(f"/proc/{launch.process.pid}/cmdline").read_bytes()
        assert Path(f"/proc/{child.pid}/cmdline").read_bytes() == launcher_cmdline
        new = await launch.request(2, "session/new", {"cwd": str(ws), "mcpServers": []})
        sid = new["result"]["sessionId"]
        command = (
            "pwd; echo mark=$WARM_TEST_MARK; echo key=$LLM_API_KEY.; "
            "echo server=$AWS_SECRET_ACCESS_KEY.; echo nofile=$(ulimit -Sn)"
        )
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
    assert "warm start:" not in launch.stderr  # served warm: nothing said
    output = json.dumps([f for f in launch.frames if f.get("method") == "session/update"])
    assert str(ws) in output  # pwd: the launcher's cwd
    assert "mark=launcher-env-42" in output  # the launcher's environment
    assert "key=." in output and CANARY not in output  # withheld from the tool
    assert "server=." in output and SERVER_SECRET not in output
    assert f"nofile={nofile}" in output  # the tools inherit the launcher's limits
    assert _launches(directory) == before + 1
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


async def _whole_session(launch: Launch, cwd: Path, prompts: int) -> None:
    """session/new and `prompts` prompts, each answered by this launch's one agent."""
    new = await launch.request(2, "session/new", {"cwd": str(cwd), "mcpServers": []})
    sid = new["result"]["sessionId"]
    for n in range(prompts):
        reply = await launch.request(
            10 + n,
            "session/prompt",
            {
                "sessionId": sid,
                "prompt": [{"type": "text", "text": scenario_prompt("echo", f"n{n}")}],
            },
        )
        assert reply.get("result", {}).get("stopReason") == "end_turn", reply


async def test_a_warm_child_answers_session_new_before_building_the_session(server, llm, tmp_path):
    """As a cold launch does while the SDK imports (sessions/deferred_build.py): the answer
    first, then what only the built model tells (the scripted model has a reasoning
    effort) as a config_option_update; the prompt waits for the build."""
    directory, server_pid = server
    env = _agent_env(llm, directory, tmp_path / "home")
    launch = await Launch.spawn(env, cwd=str(tmp_path))
    with trio.fail_after(120):
        assert "result" in await launch.initialize()
        (_child,) = _children(server_pid)
        new = await launch.request(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        answered = {o["id"] for o in new["result"]["configOptions"]}
        assert "thought_level" not in answered
        update = await launch.until(
            lambda f: (
                f.get("method") == "session/update"
                and f["params"]["update"]["sessionUpdate"] == "config_option_update"
            )
        )
        later = {o["id"] for o in update["params"]["update"]["configOptions"]}
        assert later == answered | {"thought_level"}
        reply = await launch.request(
            3,
            "session/prompt",
            {
                "sessionId": new["result"]["sessionId"],
                "prompt": [{"type": "text", "text": scenario_prompt("echo", "warm")}],
            },
        )
        assert reply.get("result", {}).get("stopReason") == "end_turn", reply
        code, rest = await launch.close()
    assert code == 0 and rest == b""


async def test_a_stopped_server_never_puts_a_second_agent_on_the_pipe(server, llm, tmp_path):
    """SIGSTOP the server, launch (it goes cold after its wait), SIGCONT: the server reads
    the launch and forks a child for it, which finds its launcher gone and exits without
    ever holding the pipe; every answer comes from the one cold agent."""
    directory, server_pid = server
    env = _agent_env(llm, directory, tmp_path / "home", TRIO_ACP_WARM_WAIT="0.5")
    before = _launches(directory)
    os.kill(server_pid, signal.SIGSTOP)
    try:
        with trio.fail_after(120):
            launch = await Launch.spawn(env, cwd=str(tmp_path))
            assert "result" in await launch.initialize()
            assert "did not hand over within 0.5 s" in launch.stderr
    finally:
        os.kill(server_pid, signal.SIGCONT)
    with trio.fail_after(120):
        # The server takes the stale launch, its child claims it and finds the launcher gone.
        while _launches(directory) == before:
            await trio.sleep(0.05)
        while _children(server_pid):
            await trio.sleep(0.05)
        await _whole_session(launch, tmp_path, prompts=6)
        assert psutil.Process(launch.process.pid).num_threads() > 1  # the cold agent serves
        code, rest = await launch.close()
    assert code == 0 and rest == b""
    assert not [f for f in launch.frames if "error" in f]
    assert launch.stderr.count("warm start:") == 1


async def test_silent_connections_delay_no_launch(server, llm, tmp_path):
    """Three same-user connections that never send a byte (or half a request): a launch
    meanwhile is served warm, within its wait."""
    directory, server_pid = server
    env = _agent_env(llm, directory, tmp_path / "home", TRIO_ACP_WARM_WAIT="5")
    key = warm.current_key(env)
    silent = []
    try:
        for n in range(3):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(warm.address(directory, warm.socket_name(key)))
            if n == 2:
                sock.send(b"\0\0\1\0{")  # a header, then nothing more
            silent.append(sock)
        with trio.fail_after(120):
            launch = await Launch.spawn(env, cwd=str(tmp_path))
            assert "result" in await launch.initialize()
            (child,) = _children(server_pid)
            await _whole_session(launch, tmp_path, prompts=1)
            code, rest = await launch.close()
        assert code == 0 and rest == b""
        assert "warm start:" not in launch.stderr
    finally:
        for sock in silent:
            sock.close()


@pytest.mark.parametrize("case", ["absent", "stale socket", "import-time settings differ"])
async def test_a_launch_the_server_cannot_take_starts_the_ordinary_way(server, llm, tmp_path, case):
    directory, server_pid = server
    if case == "absent":
        env = _agent_env(llm, tmp_path / "nothing-here", tmp_path / "home")
    elif case == "stale socket":
        stale = tmp_path / "stale"
        stale.mkdir(mode=0o700)
        env = _agent_env(llm, stale, tmp_path / "home")
        with socket.socket(socket.AF_UNIX) as sock:
            # bound, never listening: refused
            sock.bind(warm.address(stale, warm.socket_name(warm.current_key(env))))
    else:
        env = _agent_env(llm, directory, tmp_path / "home", LITELLM_USER_AGENT="warm-test")
    before = _launches(directory)
    try:
        with trio.fail_after(60):
            launch = await Launch.spawn(env, cwd=str(tmp_path))
            assert "result" in await launch.initialize()
            assert _children(server_pid) == []
            # The SDK's import, in-process: its thread starts once `initialize` is answered
            # (openhands/front.py).
            while psutil.Process(launch.process.pid).num_threads() == 1:
                await trio.sleep(0.02)
            code, rest = await launch.close()
    finally:
        _kill_started_server(launch.stderr)
    assert code == 0 and rest == b""
    assert _launches(directory) == before
    # Said once, with the reason, and the missing server was started.
    (said,) = [line for line in launch.stderr.splitlines() if "warm start:" in line]
    assert "no warm server for this installation and environment yet; started one" in said
    if case == "import-time settings differ":
        assert f"server {server_pid} was started with other values of LITELLM_USER_AGENT" in said


async def test_another_import_time_environment_gets_its_own_server(server, llm, tmp_path):
    """A launch whose import-time variables differ starts a server of its own, which the
    next such launch attaches to; variables read later (TMPDIR, PATH) share the server."""
    directory, server_pid = server
    other = _agent_env(llm, directory, tmp_path / "home", LITELLM_USER_AGENT="warm-test-2")
    launch = await Launch.spawn(other, cwd=str(tmp_path))
    with trio.fail_after(60):
        assert "result" in await launch.initialize()
        await launch.close()
    said = launch.stderr
    pid = int(re.search(r"started one \(pid (\d+)\)", said).group(1))
    try:
        key = warm.current_key(other)
        assert _wait_ready(other, key=key)["pid"] == pid
        launch = await Launch.spawn(other, cwd=str(tmp_path))
        with trio.fail_after(120):
            assert "result" in await launch.initialize()
            (child,) = _children(pid)
            await _whole_session(launch, tmp_path, prompts=1)
            await launch.close()
        assert "warm start:" not in launch.stderr
        listed = json.loads(_cli(other, "warm", "status").stdout)
        assert listed["pid"] == pid and {s["pid"] for s in listed["servers"]} == {pid, server_pid}
    finally:
        _kill_started_server(said)
    same = _agent_env(llm, directory, tmp_path / "home", TMPDIR=str(tmp_path), COLUMNS="7")
    same["PATH"] = "/usr/bin:/bin"
    launch = await Launch.spawn(same, cwd=str(tmp_path))
    with trio.fail_after(120):
        assert "result" in await launch.initialize()
        (child,) = _children(server_pid)
        await launch.close()
    assert "warm start:" not in launch.stderr


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
    assert list(directory.glob("warm-*.sock")) == []
    assert (directory.stat().st_mode & 0o777) == 0o700

    directory.chmod(0o755)
    with pytest.raises(warm.WarmError, match="0700"):
        warm.private_dir(env)
    assert _cli(env, "warm", "serve").returncode != 0


def test_warm_stop_ends_a_stopped_server_and_status_and_start_agree(server):
    """Last (it stops the module's server): SIGSTOP it. `warm status` lists it as not
    answering, `warm start` says the same instead of starting a second one, and `warm
    stop` ends it (SIGTERM, SIGCONT: a signal, whatever the server was doing)."""
    directory, server_pid = server
    env = _base_env(directory)
    os.kill(server_pid, signal.SIGSTOP)
    try:
        shown = _cli(env, "warm", "status", timeout=60)
        assert shown.returncode == 0
        assert json.loads(shown.stdout)["servers"] == [
            {
                "pid": server_pid,
                "answering": False,
                "key": warm.current_key(env),
                "this_environment": True,
            }
        ]
        started = _cli(env, "warm", "start", timeout=60)
        assert started.returncode == 1 and f"{server_pid}" in started.stderr
        assert "does not answer" in started.stderr
        stopped = _cli(env, "warm", "stop", timeout=60)
        assert stopped.returncode == 0 and f"warm server {server_pid}" in stopped.stdout
    finally:
        try:
            os.kill(server_pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert not psutil.pid_exists(server_pid) or psutil.Process(server_pid).status() == (
        psutil.STATUS_ZOMBIE
    )
    assert _cli(env, "warm", "status").returncode == 3
