"""The terminal tool running commands in the editor's terminals (`terminal/*`)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import attrs
import psutil
import pytest
import trio

from trio_acp.openhands.editor.client_calls import ClientCalls
from trio_acp.openhands.editor.terminal import client_reason, make_executor
from trio_acp.openhands.editor.terminal_launch import setup_script
from trio_acp.rpc import RequestError
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


def script_launch(line: str, tmp_path: Path, **kw) -> tuple[list[str], dict[str, str], Path]:
    """`bash -c <command>` with the set-up through BASH_ENV, as a client would get it:
    (argv, environment, the directory file)."""
    cwd_file = tmp_path / "cwd"
    cwd_file.write_text("")
    setup = tmp_path / "setup.sh"
    setup.write_text(setup_script(str(cwd_file), **kw))
    return ["bash", "-c", line], {**os.environ, "BASH_ENV": str(setup)}, cwd_file


def run_script(line: str, tmp_path: Path, **kw) -> tuple[subprocess.CompletedProcess[bytes], str]:
    argv, env, cwd_file = script_launch(line, tmp_path, **kw)
    proc = subprocess.run(
        argv, cwd=tmp_path, env=env, input=b"from stdin\n", capture_output=True, timeout=30
    )
    try:
        return proc, cwd_file.read_text().strip()
    except FileNotFoundError:
        return proc, ""


def test_the_script_keeps_the_commands_status_streams_and_directory(tmp_path):
    (tmp_path / "sub").mkdir()
    done, cwd = run_script("cat; echo to-stderr >&2; cd sub; (exit 7)", tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (7, b"from stdin\n", b"to-stderr\n")
    assert cwd == str((tmp_path / "sub").resolve())
    # `exit` keeps the directory too (the set-up writes it on the shell's exit).
    done, cwd = run_script("cd sub && exit 4", tmp_path)
    assert done.returncode == 4 and cwd == str((tmp_path / "sub").resolve())
    # A syntax error stops the command's text where bash stops it, as a plain `bash -c`.
    broken, cwd = run_script("echo before\nif then", tmp_path)
    plain = subprocess.run(["bash", "-c", "echo before\nif then"], capture_output=True)
    assert (
        (broken.returncode, broken.stdout, broken.stderr)
        == (plain.returncode, plain.stdout, plain.stderr)
        and broken.returncode == 2
        and broken.stdout == b"before\n"
    )
    # Nothing of the script's own is visible to the command: no extra descriptor, none of
    # our variables, and the command is what `bash -c` was given.
    seen, _ = run_script(
        'ls /proc/self/fd; env | grep -c "BASH_ENV\\|TRIO_ACP"; echo "$BASH_EXECUTION_STRING"',
        tmp_path,
    )
    plain = subprocess.run(
        [
            "bash",
            "-c",
            'ls /proc/self/fd; env | grep -c "BASH_ENV\\|TRIO_ACP"; echo "$BASH_EXECUTION_STRING"',
        ],
        capture_output=True,
    )
    assert seen.stdout.split() == plain.stdout.split()


def test_a_shell_the_client_wraps_around_the_command_does_not_take_the_set_up(tmp_path):
    """Toad runs `$SHELL -c "bash -c '<the command>'"`: with bash as $SHELL, the outer shell
    reads BASH_ENV too; the set-up must run in the command's own bash, where `cd` happens."""
    (tmp_path / "sub").mkdir()
    command = "cd sub && echo in-sub"
    argv, env, cwd_file = script_launch(command, tmp_path, command=command)
    wrapped = ["bash", "-c", shlex.join(argv)]
    done = subprocess.run(wrapped, cwd=tmp_path, env=env, capture_output=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, b"in-sub\n")
    assert cwd_file.read_text().strip() == str((tmp_path / "sub").resolve())
    # The command as the client was asked for it, unwrapped, takes it as before.
    (tmp_path / "sub" / "deeper").mkdir()
    done, cwd = run_script("cd sub/deeper", tmp_path, command="cd sub/deeper")
    assert done.returncode == 0 and cwd == str((tmp_path / "sub" / "deeper").resolve())


def test_a_command_deaf_to_sigterm_is_killed_after_the_grace(tmp_path):
    pids = tmp_path / "pids"
    argv, env, _ = script_launch(
        f"trap '' TERM; sleep 30 & echo $$ $! > {pids}; wait", tmp_path, kill_grace=0.3
    )
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
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


# ----------------------------------------------- what the client is asked, and its refusal


async def test_the_client_is_asked_for_the_command_the_model_wrote(tmp_path):
    """`terminal/create` is `bash -c <the command>`, exactly what the model asked for (what
    acpx asks the user to approve, what Zed and Toad head the terminal with); the set-up is
    in `env` (BASH_ENV, a private file, gone once the command is over)."""
    (tmp_path / "sub").mkdir()
    (first, after), client, _ = await run_commands(
        tmp_path, {"command": "cd sub && echo in sub"}, {"command": "pwd"}
    )
    assert "in sub" in first.text and after.text.strip() == str((tmp_path / "sub").resolve())
    creates = [params for method, params in client.calls if method == "terminal/create"]
    assert [(c.command, c.args) for c in creates] == [
        ("bash", ["-c", "cd sub && echo in sub"]),
        ("bash", ["-c", "pwd"]),
    ]
    env = {v.name: v.value for v in creates[0].env}
    setup = Path(env["BASH_ENV"])
    assert setup.parent.stat().st_mode & 0o077 == 0  # private to us
    assert not setup.exists()  # removed once its command was over


class EnvDroppingClient(EditorClient):
    """A client that spawns the command without the `env` it was given."""

    async def create_terminal(self, params):
        return await super().create_terminal(attrs.evolve(params, env=None))


async def test_a_client_that_drops_env_gets_the_set_up_on_the_command_line(tmp_path):
    (tmp_path / "sub").mkdir()
    (first, second, third), client, _ = await run_commands(
        tmp_path,
        {"command": "cd sub"},
        {"command": "cd sub"},
        {"command": "pwd"},
        client=EnvDroppingClient(),
    )
    creates = [params for method, params in client.calls if method == "terminal/create"]
    assert creates[0].args == ["-c", "cd sub"]  # ran bare: the `cd` was lost
    # Seen: from then on BASH_ENV goes on the command line, and `cd` holds again.
    assert creates[1].args[1].startswith("BASH_ENV=") and creates[1].args[1].endswith(
        "exec bash -c 'cd sub'"
    )
    assert third.text.strip() == str((tmp_path / "sub").resolve())


class RefusingClient(EditorClient):
    """acpx's answer when its user (or `--deny-all`) refuses a terminal."""

    async def create_terminal(self, params):
        self.calls.append(("terminal/create", params))
        raise RequestError(
            -32603, "Internal error", {"details": "Permission denied for terminal/create"}
        )


async def test_a_refused_terminal_reaches_the_model_with_the_clients_reason(tmp_path):
    (obs,), client, announced = await run_commands(
        tmp_path, {"command": "echo never"}, client=RefusingClient()
    )
    assert obs.is_error
    assert obs.text == "The editor did not run the command: Permission denied for terminal/create"
    assert obs.exit_code is None  # it never started: no exit code, not "still running"
    assert client.methods() == ["terminal/create"] and announced == []


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            {"details": "Permission denied for terminal/create"},
            "Permission denied for terminal/create",
        ),
        ("no shell here", "no shell here"),
        ({"message": "quota\n exceeded"}, "quota exceeded"),
        (None, "Internal error"),
        ({"details": "  "}, "Internal error"),
    ],
)
def test_the_clients_reason_is_its_details_else_its_message(data, reason):
    assert client_reason(RequestError(-32603, "Internal error", data)) == reason


# ------------------------------------------------------------------ the agent's death

AGENT = """
import json, sys, time
from trio_acp.openhands.editor.terminal_launch import _Private
private = _Private.open()
launch = private.launch(sys.argv[1], 1, None)
print(json.dumps([launch.command, *launch.args, launch.env["BASH_ENV"]]), flush=True)
time.sleep(600)
"""


def ours(*figures: str) -> list[int]:
    """The pids of running `sleep <figure>` processes."""
    return [
        proc.pid
        for proc in psutil.process_iter(["cmdline", "status"])
        if proc.info["cmdline"] in [["sleep", f] for f in figures]
        and proc.info["status"] != psutil.STATUS_ZOMBIE
    ]


@pytest.mark.parametrize("when", ["before-the-terminal-starts", "while-it-runs", "after-it-ended"])
def test_the_agents_death_stops_the_command_and_its_background(tmp_path, when):
    """kill -9 of the agent, with a client that keeps its terminals: the command and
    what it started in the background end (their watcher reads the lifeline's end)."""
    # `sleep` figures no other test uses, so that what is found running is this test's.
    figures = {"before-the-terminal-starts": "31.1", "while-it-runs": "31.2"}
    background = figures.get(when, "31.3")
    foreground = "32." + background[-1]
    if when == "after-it-ended":
        command = f"sleep {background} >/dev/null 2>&1 &"
    else:
        # A background job, and the command's shell waiting on a foreground `sleep`.
        command = f"sleep {background} >/dev/null 2>&1 & sleep {foreground}"
    agent = subprocess.Popen(
        [sys.executable, "-c", AGENT, command], stdout=subprocess.PIPE, text=True
    )
    try:
        assert agent.stdout is not None
        *argv, bash_env = json.loads(agent.stdout.readline())
        if when == "before-the-terminal-starts":
            agent.kill()
            agent.wait()
        # The client: a process of its own, which outlives the agent.
        terminal = subprocess.Popen(
            argv,
            cwd=tmp_path,
            env={**os.environ, "BASH_ENV": bash_env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        if when == "before-the-terminal-starts":
            # Stopped as soon as its watcher finds the lifeline ended, maybe before its
            # `sleep`s were started: the terminal ends, and nothing of it is left.
            terminal.wait(timeout=15)
        else:
            expected = 1 if when == "after-it-ended" else 2
            deadline = time.monotonic() + 15
            while len(ours(background, foreground)) < expected:
                assert time.monotonic() < deadline, "the command never started"
                time.sleep(0.02)
            if when == "after-it-ended":
                assert terminal.wait(timeout=15) == 0
            agent.kill()
            agent.wait()
        assert wait_gone(ours(background, foreground)) == []
        terminal.wait(timeout=15)  # the client sees its terminal end
    finally:
        agent.kill()
        agent.wait()
        for pid in ours(background, foreground):
            os.kill(pid, signal.SIGKILL)


OPENS_PRIVATE = """
from trio_acp.openhands.editor.terminal_launch import _Private
private = _Private.open()
print(private.directory, flush=True)
input()
"""


def test_a_killed_agents_private_directory_is_removed_by_the_next_one(tmp_path):
    """Issue 22.3: kill -9 leaves the session's private directory (its lifeline, its
    commands' set-up files) in the temporary directory; the next trio-acp process that
    opens one removes it. A live process's directory is kept."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}

    def open_private() -> tuple[subprocess.Popen[str], Path]:
        proc = subprocess.Popen(
            [sys.executable, "-c", OPENS_PRIVATE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None
        return proc, Path(proc.stdout.readline().strip())

    killed, killed_dir = open_private()
    live, live_dir = open_private()
    try:
        killed.kill()
        killed.wait(timeout=15)
        assert killed_dir.is_dir() and (killed_dir / "lifeline").exists()
        third, third_dir = open_private()
        third.communicate("", timeout=15)
        assert not killed_dir.exists()
        assert live_dir.is_dir()  # its process lives
        assert third_dir.parent == killed_dir.parent == tmp_path
    finally:
        for proc in (killed, live):
            proc.kill()
            proc.wait()
