"""The warm hand-over, step by step (src/trio_acp/warm.py, `_hand_over`): a real launcher
(`warm.launch` in a subprocess) against a scripted server in this process, so that each
step can be stalled, failed or delayed exactly where a test wants it.

What must hold: the launcher's stdin, stdout and stderr go to the server's side only with
its "go", sent only to a child that claimed the launch while the launcher still waited; a
launcher that stopped waiting closes its end, so a late child reads end-of-file and never
gets them; whatever the server does (nothing, refuse, close, claim late), the launcher
waits at most its budget and then starts cold, saying why on stderr. No SDK here: each
case costs one small subprocess.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from trio_acp import warm

pytestmark = [
    pytest.mark.skipif(not warm.supported(), reason="warm start needs Linux"),
    pytest.mark.timeout(120),
]

#: The launcher: what `trio-acp` does before its ordinary start.
LAUNCHER = (
    "import sys\n"
    "from trio_acp import warm\n"
    "code = warm.launch(['--log-level', 'WARNING'])\n"
    "if code is None:\n"
    "    print('COLD', flush=True)\n"
    "    sys.exit(0)\n"
    "sys.exit(code)\n"
)
GUARD = 60.0  # bounds every wait below; none is a timing check


def _env(directory: Path, wait: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRIO_ACP_WARM"}
    env.update(TRIO_ACP_WARM_DIR=str(directory), TRIO_ACP_WARM_WAIT=str(wait))
    return env


class ScriptedServer:
    """A listening socket where the warm server's would be; the test plays the server."""

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        key = subprocess.run(
            [sys.executable, "-c", "from trio_acp import warm; print(warm.current_key())"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=GUARD,
        ).stdout.strip()
        directory.mkdir(mode=0o700, exist_ok=True)
        self.dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(warm.address(directory, warm.socket_name(key), self.dir_fd))
        self.listener.listen(8)
        self.listener.settimeout(GUARD)

    def take_launch(self) -> tuple[socket.socket, dict, socket.socket, int]:
        """Accept and read a launch: (connection, message, the child's channel, how many
        fds came with it)."""
        conn, _ = self.listener.accept()
        conn.settimeout(GUARD)
        message, fds = warm._recv(conn, max_fds=8)
        assert message["op"] == "launch"
        channel = socket.socket(fileno=fds[0])
        channel.settimeout(GUARD)
        for extra in fds[1:]:
            os.close(extra)
        return conn, message, channel, len(fds)

    def close(self) -> None:
        self.listener.close()
        os.close(self.dir_fd)


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "warm"


def _launcher(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCHER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _went_cold(proc: subprocess.Popen[bytes]) -> str:
    out, err = proc.communicate(timeout=GUARD)
    assert out == b"COLD\n", (out, err)
    assert proc.returncode == 0
    lines = [line for line in err.decode().splitlines() if "warm start:" in line]
    assert len(lines) == 1, err  # said once, on stderr
    return lines[0]


def _late_claim_gets_nothing(channel: socket.socket) -> None:
    """A child that claims after its launcher went cold: end-of-file, and no fd."""
    try:
        warm._send(channel, {"claim": 1})
    except OSError:
        return  # the launcher's end is closed: the claim cannot even be sent
    data, ancdata, _, _ = channel.recvmsg(4096, socket.CMSG_SPACE(3 * 4))
    assert data == b"" and ancdata == []


@pytest.fixture
def server(directory: Path) -> Iterator[tuple[ScriptedServer, dict[str, str]]]:
    env = _env(directory, wait=0.3)
    scripted = ScriptedServer(directory, env)
    yield scripted, env
    scripted.close()


def test_a_server_that_never_reads_the_launch(server) -> None:
    """Stalled before accepting (the launch waits in the backlog, as with SIGSTOP)."""
    scripted, env = server
    proc = _launcher(env)
    assert "did not hand over within 0.3 s" in _went_cold(proc)
    # The server wakes up: the launch it reads carries the child's channel, never the stdio.
    conn, message, channel, nfds = scripted.take_launch()
    assert nfds == 1
    _late_claim_gets_nothing(channel)
    conn.close()


def test_a_child_that_claims_after_the_launcher_gave_up(server) -> None:
    """The server answers at once, its child is slow: the launcher goes cold, the child's
    claim afterwards finds the channel closed."""
    scripted, env = server
    proc = _launcher(env)
    conn, message, channel, nfds = scripted.take_launch()
    warm._send(conn, {"ok": True, "pid": 1})
    assert "did not hand over" in _went_cold(proc)
    _late_claim_gets_nothing(channel)


@pytest.mark.parametrize(
    ("step", "said"),
    [
        ("refuse", "refused the launch (not today)"),
        ("server closes", "closed the launch"),
        ("child ends before claiming", "ended before it served"),
        ("child refuses", "refused the launch (RLIMIT_NOFILE"),
    ],
)
def test_a_launch_that_fails_at_each_step_goes_cold(server, step: str, said: str) -> None:
    scripted, env = server
    proc = _launcher(env)
    conn, message, channel, _ = scripted.take_launch()
    if step == "refuse":
        warm._send(conn, {"ok": False, "reason": "not today"})
    elif step == "server closes":
        conn.close()
    elif step == "child ends before claiming":
        warm._send(conn, {"ok": True, "pid": 1})
        channel.close()
    else:
        warm._send(channel, {"refuse": "RLIMIT_NOFILE cannot be raised"})
    assert said in _went_cold(proc)


def test_a_claim_in_time_hands_over_the_stdio_and_relays_signals_and_the_exit(
    directory: Path,
) -> None:
    env = _env(directory, wait=GUARD)  # the claim comes at once: no deadline in play
    scripted = ScriptedServer(directory, env)
    try:
        proc = _launcher(env)
        conn, message, channel, _ = scripted.take_launch()
        assert message["env"]["TRIO_ACP_WARM_DIR"] == str(directory)
        assert "RLIMIT_NOFILE" in message["rlimits"]
        assert message["environ_block"] and message["cmdline"]
        warm._send(conn, {"ok": True, "pid": 1})
        warm._send(channel, {"claim": 1})
        go, fds = warm._recv(channel, max_fds=3)
        assert go == {"go": True} and len(fds) == 3
        # These are the launcher's own stdio: what the child writes, its client reads.
        os.write(fds[1], b"from the child\n")
        for fd in fds:
            os.close(fd)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"from the child\n"
        proc.send_signal(signal.SIGTERM)  # for the child now
        relayed, _ = warm._recv(channel)
        assert relayed == {"signal": signal.SIGTERM}
        warm._send(channel, {"exit": 7})
        assert proc.wait(GUARD) == 7
        assert proc.stdout.read() == b""  # nothing of the launcher's own on the pipe
        channel.close()
        conn.close()
    finally:
        scripted.close()


def test_a_launch_with_no_server_starts_one_and_says_so(directory: Path) -> None:
    """The launch goes cold at once, says why, and leaves a server starting for the next
    ones (killed here: its import is not what this tests)."""
    env = _env(directory, wait=0.3)
    proc = _launcher(env)
    line = _went_cold(proc)
    assert "no warm server for this installation and environment yet; started one" in line
    pid = int(re.search(r"started one \(pid (\d+)\)", line).group(1))
    os.kill(pid, signal.SIGKILL)
    psutil.wait_procs([psutil.Process(pid)], timeout=GUARD) if psutil.pid_exists(pid) else None
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
