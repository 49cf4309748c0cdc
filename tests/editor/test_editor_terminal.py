"""The terminal tool running commands in the editor's terminals (`terminal/*`)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import trio

from trio_acp.openhands.client_calls import ClientCalls
from trio_acp.openhands.editor_terminal import command_script, make_executor
from trio_acp.testing.editor import SESSION, EditorClient, editor_pair

pytest.importorskip("openhands.tools.terminal")
from openhands.tools.terminal.definition import TerminalAction


async def run_commands(tmp_path, *actions, cancel_when=None, client=None):
    """Run terminal actions in a tool thread; (observations, client, announced ids)."""
    client = client or EditorClient()
    calls = ClientCalls()
    announced = []
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        executor = make_executor(
            calls, proxy, SESSION, str(tmp_path), announce=lambda a, tid: announced.append((a, tid))
        )
        if cancel_when is not None:

            async def canceller():
                with trio.fail_after(20):
                    while not cancel_when(client):
                        await trio.sleep(0.02)
                await calls.cancel_turn_and_wait()

            nursery.start_soon(canceller)
        with trio.fail_after(30):
            results = await trio.to_thread.run_sync(
                lambda: [executor(TerminalAction(**a)) for a in actions]
            )
        calls.close()
    return results, client, announced


async def test_a_command_runs_in_an_editor_terminal_which_is_announced_and_released(tmp_path):
    (sub := tmp_path / "sub").mkdir()
    (obs, after_cd, failing), client, announced = await run_commands(
        tmp_path,
        {"command": "echo hello from the editor && cd sub"},
        {"command": "pwd"},
        {"command": "exit 3"},
    )
    assert not obs.is_error and "hello from the editor" in obs.text and obs.exit_code == 0
    assert after_cd.text.strip() == str(sub.resolve())  # the directory carried over
    assert failing.exit_code == 3
    create = client.calls[0][1]
    assert create.cwd == str(tmp_path) and create.output_byte_limit > 0
    first = [m for m in client.methods()][:4]
    assert first == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    assert [tid for _, tid in announced] == ["term-1", "term-2", "term-3"]
    assert announced[0][0].command == "echo hello from the editor && cd sub"
    assert client.terminals == {}  # every terminal released


async def test_cancel_kills_and_releases_the_terminal(tmp_path):
    (obs,), client, _ = await run_commands(
        tmp_path,
        {"command": "sleep 30"},
        cancel_when=lambda c: "terminal/wait_for_exit" in c.methods(),
    )
    assert obs.is_error and "cancelled" in obs.text
    # The pending wait got `$/cancel_request`; then kill, then release.
    assert "terminal/wait_for_exit" in client.cancelled
    assert client.methods()[-2:] == ["terminal/kill", "terminal/release"]
    assert client.terminals == {}


async def test_a_command_past_its_timeout_is_killed_and_its_output_kept(tmp_path):
    (obs,), client, _ = await run_commands(
        tmp_path, {"command": "echo started; sleep 30", "timeout": 0.5}
    )
    assert obs.is_error and obs.timeout
    assert "started" in obs.text and "did not finish within 0.5 s" in obs.text
    assert client.methods() == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/output",
        "terminal/release",
    ]


async def test_input_to_a_running_process_is_refused_with_a_reason(tmp_path):
    (obs,), client, _ = await run_commands(tmp_path, {"command": "C-c", "is_input": True})
    assert obs.is_error and "runs to completion" in obs.text
    assert client.calls == []


async def test_the_sdks_interrupt_of_the_executor_stops_the_command(tmp_path):
    """`executor.interrupt()` (the SDK calls it from its thread on an interrupt) alone is
    enough: the wait ends, the terminal is killed and released; later commands run."""
    client = EditorClient()
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        executor = make_executor(calls, proxy, SESSION, str(tmp_path))

        async def interrupter():
            with trio.fail_after(20):
                while "terminal/wait_for_exit" not in client.methods():
                    await trio.sleep(0.02)
            await trio.to_thread.run_sync(executor.interrupt)

        nursery.start_soon(interrupter)
        with trio.fail_after(30):
            obs = await trio.to_thread.run_sync(executor, TerminalAction(command="sleep 30"))
            with trio.fail_after(10):
                while "terminal/release" not in client.methods():
                    await trio.sleep(0.02)
            again = await trio.to_thread.run_sync(executor, TerminalAction(command="echo after"))
        calls.close()
    assert obs.is_error and "cancelled" in obs.text
    assert client.methods()[:4] == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    ]
    assert "after" in again.text


async def test_a_cancel_while_the_client_decides_withdraws_the_terminal(tmp_path):
    """The client asks its user before it creates a terminal (acpx does) and nobody has
    answered: the cancel does not wait for that answer. `$/cancel_request` withdraws the
    request, so nothing is created and nothing is left to release."""
    deciding = EditorClient()
    deciding.create_gate = trio.Event()  # never set: the person does not answer
    (obs,), client, _ = await run_commands(
        tmp_path,
        {"command": "sleep 30"},
        cancel_when=lambda c: "terminal/create" in c.methods(),
        client=deciding,
    )
    assert obs.is_error and "cancelled" in obs.text
    assert client.methods() == ["terminal/create"]
    assert client.terminals == {}


async def test_a_terminal_created_after_the_cancel_is_killed_and_released(tmp_path):
    """A client that ignores `$/cancel_request` (acpx 0.15 does not answer it) creates the terminal once its user
    says yes, after the turn was cancelled: the late answer still gets it killed and
    released, and nothing keeps running."""
    client = EditorClient()
    client.create_gate = trio.Event()
    client.ignore_cancel = True
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        executor = make_executor(calls, proxy, SESSION, str(tmp_path))

        async def cancel_once_asked():
            await client.create_received.wait()
            await calls.cancel_turn_and_wait()

        nursery.start_soon(cancel_once_asked)
        with trio.fail_after(30):
            obs = await trio.to_thread.run_sync(
                lambda: executor(TerminalAction(command="sleep 30"))
            )
        assert obs.is_error and "cancelled" in obs.text
        assert client.methods() == ["terminal/create"]  # the cancel did not wait for it
        client.create_gate.set()  # the user says yes, too late
        with trio.fail_after(30):  # a guard against a hang, not a timing check
            while client.methods()[-1:] != ["terminal/release"]:
                await trio.sleep(0.01)
        assert client.methods() == ["terminal/create", "terminal/kill", "terminal/release"]
        assert client.terminals == {}
        calls.close()


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids: list[int], within: float = 15.0) -> list[int]:
    """The pids still running after `within` seconds (a bound on waiting, not a figure)."""
    deadline = time.monotonic() + within
    while (alive := [p for p in pids if not gone(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in alive:  # not ours to leave behind, whatever the assertion says
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return alive


def started_pids(path: Path) -> list[int]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return [int(p) for p in text.split()] if text.endswith("\n") else []


@pytest.mark.parametrize(
    "kill",
    [None, signal.SIGTERM, signal.SIGKILL],
    ids=["the-group-killed", "sigterm-to-bash-only", "sigkill-to-bash-only"],
)
async def test_a_cancelled_command_leaves_no_process_whatever_the_editor_signals(tmp_path, kill):
    """Some clients (acpx 0.15) signal only the bash they spawned on `terminal/kill`: the
    command's processes (its shell, what it started) still go."""
    client = EditorClient()
    client.kill_spawned_only = kill
    pids = tmp_path / "pids"
    (obs,), client, _ = await run_commands(
        tmp_path,
        {"command": f"sleep 30 & echo $$ $! > {pids}; wait"},
        cancel_when=lambda c: bool(started_pids(pids)),
        client=client,
    )
    assert obs.is_error and "cancelled" in obs.text
    assert client.methods()[-2:] == ["terminal/kill", "terminal/release"]
    started = started_pids(pids)
    assert len(started) == 2
    assert await trio.to_thread.run_sync(wait_gone, started) == []


def run_script(
    command: str, tmp_path: Path, **kw
) -> tuple[subprocess.CompletedProcess[bytes], str]:
    cwd_file = tmp_path / "cwd"
    cwd_file.write_text("")
    proc = subprocess.run(
        ["bash", "-c", command_script(command, str(cwd_file), **kw)],
        cwd=tmp_path,
        input=b"from stdin\n",
        capture_output=True,
        timeout=30,
    )
    return proc, cwd_file.read_text().strip()


def test_the_script_keeps_the_commands_status_streams_and_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    done, cwd = run_script("cat; echo to-stderr >&2; cd sub; (exit 7)", tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (7, b"from stdin\n", b"to-stderr\n")
    assert cwd == str((tmp_path / "sub").resolve())
    # A syntax error stops the command's text where bash stops it, as a plain `bash -c`.
    broken, cwd = run_script("echo before\nif then", tmp_path)
    plain = subprocess.run(["bash", "-c", "echo before\nif then"], capture_output=True)
    assert (
        (broken.returncode, broken.stdout) == (plain.returncode, plain.stdout) == (2, b"before\n")
    )
    assert cwd == ""
    # Nothing of the script's own is visible to the command: no extra descriptor.
    fds, _ = run_script("ls /proc/self/fd", tmp_path)
    assert (
        fds.stdout.split()
        == subprocess.run(["bash", "-c", "ls /proc/self/fd"], capture_output=True).stdout.split()
    )


def test_a_command_deaf_to_sigterm_is_killed_after_the_grace(tmp_path):
    pids = tmp_path / "pids"
    script = command_script(
        f"trap '' TERM; sleep 30 & echo $$ $! > {pids}; wait", str(tmp_path / "cwd"), kill_grace=0.3
    )
    proc = subprocess.Popen(["bash", "-c", script], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while not started_pids(pids):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)  # the spawned bash only
    assert proc.wait(timeout=15) == -signal.SIGTERM  # reported as before: killed by SIGTERM
    assert wait_gone(started_pids(pids)) == []


async def test_what_a_finished_command_left_in_the_background_ends_with_the_session(tmp_path):
    """As in the SDK's own terminal, `server &` outlives its command, for the next commands
    to use, and is stopped when the session's conversation closes its tools."""
    client = EditorClient()
    client.kill_spawned_only = signal.SIGTERM  # acpx-like: release signals the bash alone
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        executor = make_executor(calls, proxy, SESSION, str(tmp_path))
        with trio.fail_after(30):
            started = await trio.to_thread.run_sync(
                executor, TerminalAction(command="sleep 30 >/dev/null 2>&1 & echo $!")
            )
            pid = int(started.text.strip())
            seen = await trio.to_thread.run_sync(
                executor, TerminalAction(command=f"kill -0 {pid} && echo still-there")
            )
        calls.close()
    try:
        assert "still-there" in seen.text
        assert not gone(pid)
    finally:
        executor.close()
    assert await trio.to_thread.run_sync(wait_gone, [pid]) == []


def test_without_a_lifeline_what_a_finished_command_leaves_keeps_running(tmp_path):
    """Only a command that did not finish is stopped; with no session to end (no lifeline,
    e.g. the terminal runs elsewhere), what it left in the background is left alone."""
    done, _ = run_script("sleep 30 >/dev/null 2>&1 & echo $!", tmp_path)
    pid = int(done.stdout)
    try:
        time.sleep(0.3)  # what a watcher would need to act (it must not)
        assert not gone(pid)
    finally:
        os.kill(pid, signal.SIGKILL)
