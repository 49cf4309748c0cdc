"""The exit's memory handed to a keeper (trio_acp/exit_handoff.py, cli.py `_exit_now`).

What must hold, whatever the timing: the agent exits with its own status; when the editor
has reaped it, no process holds its stdout or stderr any longer (the keeper keeps no
descriptor of the agent's); the keeper then exits by itself, and nothing is left.

A watcher script is the editor here, in a process of its own: it makes itself a child
subreaper (prctl), so that the keeper, once the agent is gone, becomes its child and it can
wait for it (never the test runner's process: it would inherit every other test's orphans).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="clone(2) and prctl: Linux")

WATCHER = textwrap.dedent(
    r"""
    import ctypes, json, os, signal, subprocess, sys

    signal.alarm(60)  # bounded, whatever happens
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    argv, stdin = json.loads(sys.argv[1]), sys.argv[2].encode()
    child = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    child.stdin.write(stdin)
    child.stdin.close()  # the editor went away
    out = b""
    while True:  # read what it says until it exits (never let a pipe fill)
        os.set_blocking(child.stdout.fileno(), False)
        try:
            part = os.read(child.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            part = None
        if part:
            out += part
        if child.poll() is not None:
            break
        if part is None:
            signal.sigtimedwait([signal.SIGCHLD], 0.01)
    status = child.returncode
    pipes = {}
    # Reaped: whoever still holds a write end of its pipes keeps them from ending.
    for name, pipe in (("stdout", child.stdout), ("stderr", child.stderr)):
        os.set_blocking(pipe.fileno(), False)
        try:
            while os.read(pipe.fileno(), 1 << 16):
                pass
            pipes[name] = "ended"
        except BlockingIOError:
            pipes[name] = "still open"
    keepers = []
    while True:  # the keeper is ours now, if there is one: wait for it to leave
        try:
            pid, code = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        keepers.append(os.waitstatus_to_exitcode(code))
    print(json.dumps({"status": status, "pipes": pipes, "keepers": keepers, "out": out.decode()}))
    """
)

LEAVER = textwrap.dedent(
    """
    import os, sys
    from trio_acp.exit_handoff import hand_off_memory
    sys.stdout.write("leaving\\n")
    sys.stdout.flush()
    os._exit(7 if hand_off_memory() else 3)
    """
)


def watch(argv: list[str], stdin: bytes = b"", **env: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", WATCHER, json.dumps(argv), stdin.decode()],
        capture_output=True,
        timeout=120,
        env={**os.environ, "TRIO_ACP_WARM": "0", **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    return json.loads(done.stdout.decode().splitlines()[-1])


def test_a_keeper_takes_the_memory_and_holds_no_pipe_of_the_agents():
    seen = watch([sys.executable, "-c", LEAVER])
    assert seen["status"] == 7  # the keeper started, and the exit status is the agent's
    assert seen["out"] == "leaving\n"
    assert seen["pipes"] == {"stdout": "ended", "stderr": "ended"}
    assert seen["keepers"] == [0]  # it left by itself, and it was the only one


def test_no_keeper_when_turned_off():
    seen = watch([sys.executable, "-c", LEAVER], TRIO_ACP_EXIT_HANDOFF="0")
    assert seen["status"] == 3
    assert seen["keepers"] == []


def test_the_agent_leaves_through_it_on_stdin_eof(tmp_path):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    seen = watch(
        [sys.executable, "-m", "trio_acp"],
        json.dumps(init).encode() + b"\n",
        OPENHANDS_PERSISTENCE_DIR=str(tmp_path),
    )
    assert seen["status"] == 0
    assert json.loads(seen["out"].splitlines()[0])["id"] == 1  # initialize was answered
    assert seen["pipes"] == {"stdout": "ended", "stderr": "ended"}
    assert seen["keepers"] == [0]
