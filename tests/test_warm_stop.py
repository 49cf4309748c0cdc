"""`trio-acp warm stop` always stops; `warm start` and `warm status` agree (src/trio_acp/warm.py).

The server here is a stand-in that holds a warm server's lock the way `warm serve` does
(`warm-<key>.lock`, its pid written in it) and misbehaves on purpose: it ignores SIGTERM,
and has no socket, or one that never answers. `warm stop` must end it all the same
(SIGKILL in the end) and say so; `warm status` must list it as not answering, and `warm
start` must say the same instead of starting another. No SDK import: seconds per case.
The real server's own stop (SIGSTOP, then `warm stop`) is in tests/e2e/test_warm_start.py.
"""

from __future__ import annotations

import json
import os
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

GUARD = 60.0

#: Holds the lock like a server, ignores SIGTERM, optionally listens without ever answering.
STAND_IN = """
import fcntl, json, os, signal, socket, sys, time
lock_path, sock_path = sys.argv[1], sys.argv[2]
lock = open(lock_path, "a+")
fcntl.flock(lock, fcntl.LOCK_EX)
lock.seek(0); lock.truncate(); lock.write(json.dumps({"pid": os.getpid()})); lock.flush()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if sock_path:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(sock_path)
    listener.listen(8)  # never accepts: a connection waits in the backlog
print("ready", flush=True)
time.sleep(600)
"""


def _env(directory: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRIO_ACP_WARM"}
    env["TRIO_ACP_WARM_DIR"] = str(directory)
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trio_acp", "warm", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD,
    )


@pytest.fixture(params=["no socket", "a socket that never answers"])
def stand_in(request, tmp_path: Path) -> Iterator[tuple[dict[str, str], psutil.Process, str]]:
    directory = tmp_path / "warm"
    directory.mkdir(mode=0o700)
    env = _env(directory)
    key = subprocess.run(
        [sys.executable, "-c", "from trio_acp import warm; print(warm.current_key())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=GUARD,
    ).stdout.strip()
    sock = str(directory / warm.socket_name(key)) if request.param != "no socket" else ""
    # `warm serve` in its command line, as the real server's: what `warm stop` checks
    # before it signals a pid.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            STAND_IN,
            str(directory / warm.lock_name(key)),
            sock,
            "warm",
            "serve",
        ],
        stdout=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    try:
        yield env, psutil.Process(proc.pid), request.param
    finally:
        proc.kill()
        proc.wait(GUARD)


def test_warm_stop_ends_a_server_that_ignores_sigterm(stand_in) -> None:
    env, server, _ = stand_in
    stopped = _cli(env, "stop")
    assert stopped.returncode == 0, stopped
    assert f"warm server {server.pid}" in stopped.stdout and "killed" in stopped.stdout
    assert server.wait(GUARD) == -signal.SIGKILL
    assert _cli(env, "status").returncode == 3
    assert list(Path(env["TRIO_ACP_WARM_DIR"]).glob("warm-*")) == []  # nothing stale left


def test_status_and_start_agree_on_a_server_that_does_not_answer(stand_in) -> None:
    env, server, case = stand_in
    shown = _cli(env, "status")
    assert shown.returncode == 0, shown
    (listed,) = json.loads(shown.stdout)["servers"]
    assert listed["pid"] == server.pid and listed["answering"] is False
    if case == "a socket that never answers":
        # (With no socket the server may still be importing: `warm start` waits for it.)
        started = _cli(env, "start")
        assert started.returncode == 1
        assert f"{server.pid}" in started.stderr and "does not answer" in started.stderr
        assert server.is_running()  # not a second server: the lock is still its
    assert _cli(env, "stop").returncode == 0
    assert _cli(env, "status").returncode == 3


def test_warm_stop_with_no_server(tmp_path: Path) -> None:
    directory = tmp_path / "warm"
    directory.mkdir(mode=0o700)
    # A stale socket and lock (a SIGKILLed server's): removed, and nothing else happens.
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(directory / warm.socket_name("0" * 16)))
    (directory / warm.lock_name("0" * 16)).write_text('{"pid": 1}')
    stopped = _cli(_env(directory), "stop")
    assert stopped.returncode == 0 and "no warm server running" in stopped.stdout
    assert list(directory.glob("warm-*")) == []
