"""The terminal tool's shell starts on first use, ready once its prompt shows
(sdk/terminal_start.py); an idle session keeps no shell, and a turn starts one while the
model thinks (backends/local_conversation.py) without waiting for it.

The SDK is imported once for the module; every test's shells run in `tmp_path`, so the
shells of a test are the children of this process with that working directory.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest
import trio

from _inprocess import RecordingClient, agent_env, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.sdk import import_sdk
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair


@pytest.fixture(scope="module")
def patched() -> None:
    import_sdk()
    from trio_acp.openhands.sdk.terminal_gate import gate_terminals

    gate_terminals()  # what every conversation of trio-acp's installs (terminal_start too)


def shells_in(cwd: Path) -> list[psutil.Process]:
    """This process's live children running in `cwd`: the shells (what a user's ~/.bashrc
    starts in the background, below them, comes and goes)."""
    found = []
    for child in psutil.Process().children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE and Path(child.cwd()) == cwd:
                found.append(child)
        except psutil.Error:
            continue
    return found


def executor_in(cwd: Path, **env: str):
    from openhands.tools.terminal.impl import TerminalExecutor

    # A HOME of the test's own unless one is given: these tests end shells while they start,
    # and the developer's ~/.bashrc may run tools that hold a lock meanwhile (pyenv's rehash
    # left one behind in CI, and every later shell on the machine then waited 60 s on it).
    env.setdefault("HOME", str(cwd))
    return TerminalExecutor(
        working_dir=str(cwd), terminal_type="subprocess", env={"HISTFILE": "", **env}
    )


def test_a_terminal_tool_starts_its_shell_on_its_first_command(patched, tmp_path, monkeypatch):
    """No shell until the first command; then it is started and waited for by its prompt,
    not the SDK's fixed second (every sleep on the way is recorded)."""
    from openhands.tools.terminal import TerminalAction

    sleeps: list[float] = []
    sleep = time.sleep

    def recorded(seconds: float) -> None:
        sleeps.append(seconds)
        sleep(seconds)

    executor = executor_in(tmp_path)
    try:
        terminal = executor._session.terminal
        assert terminal.process is None
        assert shells_in(tmp_path) == []
        monkeypatch.setattr(time, "sleep", recorded)
        observation = executor(TerminalAction(command="echo first-command; echo !!"))
        monkeypatch.undo()
        assert sleeps and max(sleeps) < 0.5, sleeps
        # Its own output, history expansion off (the SDK's set-up line ran first).
        assert "first-command\n!!" in observation.text
        assert observation.metadata.exit_code == 0
        shell = terminal.process.pid
        assert [p.pid for p in shells_in(tmp_path)] == [shell]
    finally:
        executor.close()
    assert shells_in(tmp_path) == []


def test_a_terminal_closed_before_its_first_command_never_starts_a_shell(patched, tmp_path):
    from trio_acp.openhands.sdk.terminal_start import started

    executor = executor_in(tmp_path)
    executor.close()
    terminal = executor._session.terminal
    assert started(terminal) is False
    assert terminal.process is None
    assert shells_in(tmp_path) == []


def test_the_first_command_waits_for_a_slow_bashrc(patched, tmp_path):
    """A ~/.bashrc slower than the SDK's fixed second: the start waits for the prompt as
    long as it takes, and the first command gets its own output."""
    from openhands.tools.terminal import TerminalAction

    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("sleep 1.5\n")
    executor = executor_in(tmp_path, HOME=str(home))
    try:
        observation = executor(TerminalAction(command="echo after-bashrc"))
        assert "after-bashrc" in observation.text
        assert observation.metadata.exit_code == 0
    finally:
        executor.close()


def test_closing_while_the_shell_starts_leaves_no_shell(patched, tmp_path, monkeypatch):
    """A close that comes while another thread starts the shell, just before the shell is
    spawned: it waits for the start, then closes the shell (or the start would spawn a
    shell after the close, which nothing would ever stop)."""
    from trio_acp.openhands.sdk import terminal_start

    executor = executor_in(tmp_path)
    terminal = executor._session.terminal
    closer = threading.Thread(target=executor.close)
    build_env = terminal_start.build_terminal_env

    def close_now(extra):
        closer.start()
        # Bounded: with the start lock the close waits for the start, which is this.
        closer.join(timeout=0.5)
        return build_env(extra)

    monkeypatch.setattr(terminal_start, "build_terminal_env", close_now)
    starter = threading.Thread(target=terminal_start.started, args=(terminal,))
    starter.start()
    starter.join(timeout=30)
    closer.join(timeout=30)
    assert not starter.is_alive() and not closer.is_alive()
    assert shells_in(tmp_path) == []


def test_a_command_that_comes_while_the_shell_starts_waits_for_it(patched, tmp_path, monkeypatch):
    """The turn's thread is starting the shell when the tool's first command comes: the
    command waits until the shell is ready, and gets its own output (sent into the shell
    mid-start, it was lost to the start's screen clearing)."""
    from openhands.tools.terminal import TerminalAction

    from trio_acp.openhands.sdk import terminal_start

    executor = executor_in(tmp_path)
    terminal = executor._session.terminal
    results = []
    command = threading.Thread(
        target=lambda: results.append(executor(TerminalAction(command="echo while-starting")))
    )
    write = terminal._write_pty

    def command_now(data):
        # The shell is spawned, its set-up line not typed yet: the command comes now.
        if not command.is_alive() and not results:
            command.start()
            command.join(timeout=0.5)  # bounded: it waits for this start
        write(data)

    terminal._write_pty = command_now
    starter = threading.Thread(target=terminal_start.started, args=(terminal,))
    try:
        starter.start()
        starter.join(timeout=30)
        command.join(timeout=60)
        assert results and "while-starting" in results[0].text, results
        assert results[0].metadata.exit_code == 0
    finally:
        executor.close()


def test_a_close_during_a_bashrc_that_never_ends_hangs_the_shell_up_after_the_bound(
    patched, tmp_path, monkeypatch
):
    """A close while the shell is still reading a ~/.bashrc that never ends: the close
    returns at once, and the start hangs the shell up once `READY_WAIT` has passed."""
    from trio_acp.openhands.sdk import shell_starts, terminal_start

    monkeypatch.setattr(terminal_start, "READY_WAIT", 1.0)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("sleep 600\n")
    executor = executor_in(tmp_path, HOME=str(home))
    terminal = executor._session.terminal
    failures: list[BaseException] = []
    starter = threading.Thread(target=_recording(failures, terminal_start.started, terminal))
    starter.start()
    deadline = time.monotonic() + 30
    while terminal.process is None and time.monotonic() < deadline:
        time.sleep(0.01)
    shell = terminal.process
    assert shell is not None
    executor.close()
    starter.join(timeout=30)
    assert not starter.is_alive()
    assert [type(f) for f in failures] == [terminal_start.ClosedWhileStarting]
    assert shell.poll() is not None
    assert shells_in(tmp_path) == []
    assert shell_starts.count() == 0


def test_closing_hangs_up_a_shell_that_does_not_take_the_exit_line(patched, tmp_path):
    """The SDK's close types `exit`, and when the shell does not take it (here it is inside
    an open quote; after a Ctrl-C the terminal may drop it) sends SIGTERM, which `bash -i`
    ignores, then SIGKILL 3 s later. Closing hangs the shell up first: it ends at once."""
    from trio_acp.openhands.sdk.terminal_start import started

    executor = executor_in(tmp_path)
    terminal = executor._session.terminal
    assert started(terminal)
    terminal.send_keys('echo "an open quote', enter=True)
    shell = terminal.process
    executor.close()
    assert shell.returncode == -signal.SIGHUP
    assert shells_in(tmp_path) == []


# --- sessions ------------------------------------------------------------------------------


class Client(RecordingClient):
    def tool_outputs(self) -> str:
        """The text of the completed tool calls."""
        return "".join(
            c.content.text
            for u in self.updates
            if isinstance(u, schema.ToolCallProgress) and u.status == "completed"
            for c in (u.content or [])
            if isinstance(c, schema.ContentToolCallContent)
        )


@pytest.fixture
def env(llm, tmp_path):
    return agent_env(llm, tmp_path / "home", TRIO_ACP_PUBLIC_SKILLS="0")


async def _prompt(conn, sid: str, text: str) -> str:
    with trio.fail_after(120):
        reply = await conn.agent.prompt(session_id=sid, prompt=[schema.TextContent(text=text)])
    return reply.stop_reason


async def test_idle_sessions_keep_no_shell_and_a_terminal_command_starts_one(env, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            sids = [
                (await conn.agent.new_session(cwd=str(ws), mcp_servers=[])).session_id
                for _ in range(3)
            ]
            with trio.fail_after(120):
                for sid in sids:
                    await agent._sessions[uuid.UUID(sid)].warmed.wait()
            # The warm-up built every session's tools: none started a shell.
            assert shells_in(ws) == []
            prompt = scenario_prompt("terminal", command="echo from-the-terminal")
            assert await _prompt(conn, sids[0], prompt) == "end_turn"
            assert "from-the-terminal" in client.tool_outputs()
            assert len(shells_in(ws)) == 1
            for sid in sids:
                await conn.agent.close_session(session_id=sid)
            assert shells_in(ws) == []


async def test_a_turn_without_commands_never_waits_for_the_shell(env, tmp_path, monkeypatch):
    """The turn starts the shell on a thread of its own (ahead of a command): held there,
    the turn still answers, and closing the session afterwards stops the shell."""
    from trio_acp.openhands.sdk import terminal_start

    ws = tmp_path / "ws"
    ws.mkdir()
    reached, release = threading.Event(), threading.Event()
    wait_ready = terminal_start._wait_ready

    def held(terminal, token):
        reached.set()
        release.wait(60)
        return wait_ready(terminal, token)

    monkeypatch.setattr(terminal_start, "_wait_ready", held)
    try:
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, Client()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(ws), mcp_servers=[])).session_id
                assert await _prompt(conn, sid, scenario_prompt("echo", "hi")) == "end_turn"
                # The turn asked for the shell, which is still starting.
                assert await trio.to_thread.run_sync(reached.wait, 60)
                release.set()
                await conn.agent.close_session(session_id=sid)
                # The start ends the shell once its start-up is over (never mid-way).
                from trio_acp.openhands.sdk import shell_starts

                assert await trio.to_thread.run_sync(shell_starts.wait, 60)
                assert shells_in(ws) == []
    finally:
        release.set()


def test_a_session_closed_while_its_shell_starts_never_signals_its_start_up(
    patched, tmp_path, monkeypatch
):
    """A session closed while its shell still runs ~/.bashrc. pyenv's `rehash` (run by its
    `init` there) creates its lock file, then sets the EXIT trap that removes it: a signal
    in between (the close's hang-up, the stop of the tools' processes, the SDK's SIGKILL)
    leaves the lock for good, and every later shell of the user waits 60 s on it. The
    close returns at once; the shell is ended once its start-up is over, and the lock is
    removed by its owner."""
    from types import SimpleNamespace as NS

    from trio_acp.openhands.permissions.tool_processes import stop_tool_processes
    from trio_acp.openhands.sdk import shell_starts, terminal_start

    monkeypatch.setattr(terminal_start, "READY_WAIT", 600.0)  # only the start-up's end
    home = tmp_path / "home"
    home.mkdir()
    lock, go = home / "lock", home / "go"
    # pyenv's window, held open until the test says `go`: the lock taken, its trap not set.
    (home / ".bashrc").write_text(
        f"bash -c 'touch {lock}; while [ ! -e {go} ]; do sleep 0.02; done;"
        f' trap "rm -f {lock}" EXIT\'\n'
    )
    executor = executor_in(tmp_path, HOME=str(home))
    terminal = executor._session.terminal
    failures: list[BaseException] = []
    starter = threading.Thread(target=_recording(failures, terminal_start.started, terminal))
    starter.start()
    deadline = time.monotonic() + 30
    while not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lock.exists()
    conversation = NS(agent=NS(tools_map={"terminal": NS(executor=executor)}))
    stop_tool_processes(conversation)  # what closing a session does first (_close_all)
    executor.close()  # returns at once: the start-up goes on
    shell = terminal.process
    going_on = shell is not None and shell.poll() is None and starter.is_alive()
    under_way = shell_starts.count()
    go.touch()
    starter.join(timeout=60)
    assert not starter.is_alive()
    time.sleep(0.5)  # (only for the assertion below to fail clearly without the fix)
    assert not lock.exists(), "the start-up was signalled inside its lock's window"
    assert going_on and under_way == 1
    assert [type(f) for f in failures] == [terminal_start.ClosedWhileStarting]
    assert shell.poll() is not None
    assert shells_in(tmp_path) == []
    assert shell_starts.wait(0)


def _recording(failures: list[BaseException], fn, *args):
    def run() -> None:
        try:
            fn(*args)
        except Exception as exc:
            failures.append(exc)

    return run


@pytest.mark.parametrize("how", ["blocked", "ignored"])
def test_a_shell_started_with_sigint_blocked_or_ignored_still_lets_a_command_be_stopped(
    patched, tmp_path, how
):
    """The thread that starts the shell may have SIGINT blocked (a thread inherits its
    creator's mask), or the process may ignore it; the shell and every command it runs
    inherited that, so the stop's SIGINT never reached a command, it died of the SIGKILL
    after it, and bash went on with the rest of a cancelled `sleep; touch`."""
    from openhands.tools.terminal import TerminalAction

    from trio_acp.openhands.permissions.tool_processes import kill_descendants
    from trio_acp.openhands.sdk import terminal_start

    executor = executor_in(tmp_path)
    terminal = executor._session.terminal
    marker = tmp_path / "ran-on"
    seconds = f"29.{uuid.uuid4().int % 10**6:06d}"

    def start_with_sigint_blocked() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        terminal_start.started(terminal)

    if how == "blocked":
        starter = threading.Thread(target=start_with_sigint_blocked)
        starter.start()
        starter.join(timeout=60)
    else:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            terminal_start.started(terminal)
        finally:
            signal.signal(signal.SIGINT, previous)
    results = []
    runner = threading.Thread(
        target=lambda: results.append(
            executor(TerminalAction(command=f"sleep {seconds}; touch {marker}"))
        )
    )
    try:
        runner.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not [
            p for p in psutil.Process(terminal.process.pid).children() if p.name() == "sleep"
        ]:
            time.sleep(0.02)
        assert kill_descendants([terminal.process.pid])
        runner.join(timeout=60)
        assert results and "Killed" not in results[0].text, results
        assert not marker.exists(), "the stopped command's list went on"
    finally:
        executor.close()
