"""The SDK's subprocess terminal, its shell started when first used and ready as soon as
its prompt shows.

The SDK starts a terminal tool's shell when it builds the tool (`TerminalExecutor`'s
constructor, under the SDK's lock), and its `SubprocessTerminal.initialize` then sleeps a
fixed second for the shell to take its set-up line. Two costs follow: every session,
even one that never runs a command, keeps a `bash -i` (about 4 MB of memory and a reader
thread); and a prompt sent right after `session/new` waits a second for that sleep.

Here (patched once per process, `start_lazily`, called by `terminal_gate.gate_terminals`):

- `initialize` starts nothing. The shell starts on the terminal's first real use (reading
  its screen, sending it keys: the first command the terminal tool runs), or earlier
  from `prestart`, which a turn calls on a thread of its own as it starts, so that the
  shell comes up while the model is thinking (backends/local_conversation.py).
- `start` is the SDK's own start-up (same shell, environment, process group, set-up
  line, reader thread), but instead of the fixed second it waits for a sentinel printed
  by a command after the set-up line and then for the prompt: a few tens of ms.
- Start and `close` take a per-terminal lock, so a terminal closed before its shell
  started never starts one.
- A shell is never signalled while it runs its start-up (~/.bashrc): tools run there take
  locks they release from a trap set a moment later (pyenv's `rehash` creates
  `shims/.pyenv-shim`, then sets the EXIT trap that removes it), so a hang-up, SIGTERM or
  SIGKILL in between leaves the lock for good, and every later shell of the user waits 60 s
  on it. A terminal closed while its shell starts is therefore ended by the thread starting
  it, once the start-up is over (or `READY_WAIT` passed); the close itself returns at once.
  The process waits for such starts before it leaves (`shell_starts.wait`, the agent's
  close).
- `close` hangs the shell up (`hang_up`) before the SDK's own close, which could wait 3 s.

SDK internals (the terminal's attributes and helpers) are listed in reliance.py.
Imports the SDK: imported inside a function after the load.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import pty
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate

from openhands.tools.terminal.constants import CMD_OUTPUT_PS1_END
from openhands.tools.terminal.env import build_terminal_env
from openhands.tools.terminal.terminal.process_priority import process_priority_prefix
from openhands.tools.terminal.terminal.subprocess_terminal import SubprocessTerminal

from trio_acp.openhands.sdk import shell_starts
from trio_acp.openhands.sdk.internals import SHELL_STARTING_ATTRIBUTE

if TYPE_CHECKING:
    from openhands.sdk import AgentBase

log = logging.getLogger(__name__)

# How long the shell may take to show its prompt after the set-up line (a slow ~/.bashrc,
# a loaded machine). After it the terminal is used anyway, as the SDK does after its
# second; the first command's own wait then covers the rest.
READY_WAIT = 10.0
# Between two looks at the screen while the shell starts.
READY_POLL = 0.002
# How long closing waits for the shell to end on its hang-up (`hang_up`).
HANG_UP_WAIT = 1.0

_LOCKS_LOCK = threading.Lock()
_LOCK_ATTRIBUTE = "_trio_acp_start_lock"
_READY_ATTRIBUTE = "_trio_acp_ready"
_CLOSING_ATTRIBUTE = "_trio_acp_closing"


class ClosedWhileStarting(RuntimeError):
    """The terminal was closed while its shell started: the start gave up."""


@functools.cache
def start_lazily() -> None:
    """Patch the SDK's subprocess terminal as the module doc says; once per process. Call it
    after any other patch of `send_keys` (terminal_gate.py): the start then happens before
    a command enters the run's gate, not while it holds it."""
    close = SubprocessTerminal.close

    def deferred_initialize(self: SubprocessTerminal) -> None:
        # The tool is being built: its shell starts on first use (`started`).
        return None

    def locked_close(self: SubprocessTerminal) -> None:
        with _LOCKS_LOCK:
            setattr(self, _CLOSING_ATTRIBUTE, True)
            if getattr(self, SHELL_STARTING_ATTRIBUTE, False):
                # Another thread starts the shell: it ends it once its start-up is over
                # (`started`), never mid-~/.bashrc (the module doc says why).
                return
        with _start_lock(self):
            hang_up(self)
            close(self)

    SubprocessTerminal.initialize = deferred_initialize  # type: ignore[method-assign]
    SubprocessTerminal.close = locked_close  # type: ignore[method-assign]
    for name in ("send_keys", "read_screen", "clear_screen"):
        setattr(SubprocessTerminal, name, _starting_first(getattr(SubprocessTerminal, name)))


def _starting_first[**P, R](
    method: Callable[Concatenate[SubprocessTerminal, P], R],
) -> Callable[Concatenate[SubprocessTerminal, P], R]:
    @functools.wraps(method)
    def wrapper(self: SubprocessTerminal, *args: P.args, **kwargs: P.kwargs) -> R:
        started(self)
        return method(self, *args, **kwargs)

    return wrapper


def _start_lock(terminal: SubprocessTerminal) -> threading.RLock:
    lock: threading.RLock | None = getattr(terminal, _LOCK_ATTRIBUTE, None)
    if lock is None:
        with _LOCKS_LOCK:
            lock = getattr(terminal, _LOCK_ATTRIBUTE, None)
            if lock is None:
                lock = threading.RLock()
                setattr(terminal, _LOCK_ATTRIBUTE, lock)
    return lock


def started(terminal: SubprocessTerminal) -> bool:
    """Start the terminal's shell unless it runs already or the terminal is closed (then
    False); blocking, thread-safe: a caller that comes while another thread starts the
    shell waits until it is ready. Raises the start's failure."""
    if is_ready(terminal):
        return True
    with _start_lock(terminal):
        if terminal._closed:
            return False
        if not terminal._initialized:  # else the SDK's own start ran (before our patch)
            with _LOCKS_LOCK:
                if getattr(terminal, _CLOSING_ATTRIBUTE, False):
                    # A close came first: it waits for this lock and closes the terminal.
                    return False
                # From here until it is cleared, a close leaves the shell to this thread.
                setattr(terminal, SHELL_STARTING_ATTRIBUTE, True)
            with shell_starts.under_way():
                _start_then_end_if_closed(terminal)
        setattr(terminal, _READY_ATTRIBUTE, True)
        return True


def _start_then_end_if_closed(terminal: SubprocessTerminal) -> None:
    """`start`, then, if the terminal was closed meanwhile or the start failed, the close
    the closer left to this thread (its shell's start-up is over by now, or was given up
    on after `READY_WAIT`). Raises the start's failure, else `ClosedWhileStarting`."""
    try:
        start(terminal)
    except BaseException:
        with _LOCKS_LOCK:
            setattr(terminal, SHELL_STARTING_ATTRIBUTE, False)
        _close_quietly(terminal)
        raise
    with _LOCKS_LOCK:
        setattr(terminal, SHELL_STARTING_ATTRIBUTE, False)
        closing = getattr(terminal, _CLOSING_ATTRIBUTE, False)
    if closing:
        _close_quietly(terminal)
        raise ClosedWhileStarting("the terminal was closed while its shell started")


def is_ready(terminal: object) -> bool:
    """Whether `terminal` is a subprocess terminal whose shell has started and shown its
    prompt. (Not the SDK's `_initialized`: `start` sets that before the shell is ready, as
    the SDK's own methods need it to drive the start.)"""
    return isinstance(terminal, SubprocessTerminal) and getattr(terminal, _READY_ATTRIBUTE, False)


def start(terminal: SubprocessTerminal) -> None:
    """The SDK's `SubprocessTerminal.initialize`, with a readiness check for its sleep.

    Same shell (``shell_path``, else bash on PATH), environment, lowered priority, new
    session, set-up line and reader thread; SIGINT reset in the child
    (`_default_interrupt`), which costs a fork of this process where the SDK's
    `preexec_fn=os.setsid` costs the same."""
    shell = terminal.shell_path or shutil.which("bash")
    if shell is None:
        raise RuntimeError("Could not find bash in PATH: the terminal tool needs it.")
    if not os.path.isfile(shell) or not os.access(shell, os.X_OK):
        raise RuntimeError(f"The terminal's shell is not an executable file: {shell}")
    terminal.shell_path = shell
    env = build_terminal_env(terminal._env)
    env.setdefault("GIT_PAGER", "cat")
    env.setdefault("PAGER", "cat")
    env["PS1"] = terminal.PS1
    env["PS2"] = ""
    env["TERM"] = "xterm-256color"
    # (`started` marks the terminal starting: until it is ready, its shell's children are
    # its start-up's, not commands, internals.py.)
    _start(terminal, shell, env)


def _start(terminal: SubprocessTerminal, shell: str, env: dict[str, str]) -> None:
    if getattr(terminal, _CLOSING_ATTRIBUTE, False):
        raise ClosedWhileStarting("the terminal was closed before its shell started")
    master, slave = pty.openpty()
    try:
        terminal.process = subprocess.Popen(
            [*process_priority_prefix(env), shell, "-i"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=terminal.work_dir,
            env=env,
            bufsize=0,
            start_new_session=True,
            close_fds=True,
            preexec_fn=_default_interrupt,
        )
    except BaseException:
        os.close(master)
        raise
    finally:
        os.close(slave)
    terminal._pty_master_fd = master
    fcntl.fcntl(master, fcntl.F_SETFL, fcntl.fcntl(master, fcntl.F_GETFL) | os.O_NONBLOCK)
    reader = threading.Thread(target=terminal._read_output_continuously_pty, daemon=True)
    terminal.reader_thread = reader
    reader.start()
    terminal._initialized = True
    # The SDK's set-up line (history expansion off, our prompt on every prompt), then a
    # sentinel: its output, unlike the line's echo, holds `token` whole, so once it shows
    # the set-up line has run, and the prompt after it is the one the tool expects.
    token = f"trio-acp-ready-{uuid.uuid4().hex[:12]}"
    head, tail = token[:9], token[9:]
    setup = f'set +H; export PROMPT_COMMAND=\'export PS1="{terminal.PS1}"\'; export PS2=""'
    terminal._write_pty(f"{setup}\nprintf '{head}%s\\n' '{tail}'\n".encode())
    ready = _wait_ready(terminal, token)
    if getattr(terminal, _CLOSING_ATTRIBUTE, False):
        return  # `started` ends it: no screen to clear
    if not ready:
        log.warning(
            "the terminal's shell showed no prompt within %s s; using it anyway", READY_WAIT
        )
    terminal.clear_screen()


def _default_interrupt() -> None:
    """In the shell's process, before bash starts: SIGINT neither ignored nor blocked.

    Both are inherited across exec (an ignored signal process-wide; a blocked one from the
    thread that spawns), bash keeps what it was started with for the commands it runs, and
    a command that does not die of SIGINT is what makes bash go on with the rest of a
    cancelled list: a `sleep 30; touch done` then died only of the SIGKILL a second later
    ("Killed") and `touch` ran. Seen in the test runner, where some earlier code leaves
    SIGINT ignored or blocked; an application embedding trio-acp may do the same."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


def _wait_ready(terminal: SubprocessTerminal, token: str) -> bool:
    """Until the screen shows `token` and then the prompt (True), or `READY_WAIT` passed
    (False); also when the terminal is being closed: the start-up is not cut short (the
    module doc says why). Raises if the shell exited."""
    prompt_end = CMD_OUTPUT_PS1_END.rstrip()
    deadline = time.monotonic() + READY_WAIT
    while True:
        with terminal.output_lock:
            screen = "".join(terminal.output_buffer)
        at = screen.find(token)
        if at >= 0 and screen.find(prompt_end, at + len(token)) >= 0:
            return True
        process = terminal.process
        if process is None or process.poll() is not None:
            code = None if process is None else process.returncode
            raise RuntimeError(
                f"the terminal's shell exited as it started (status {code}): {screen[-500:]!r}"
            )
        if time.monotonic() >= deadline:
            return False
        time.sleep(READY_POLL)


def hang_up(terminal: SubprocessTerminal) -> None:
    """End the shell as a closed terminal window does: SIGHUP to its process group (bash
    hangs up its jobs in turn), waiting for it at most `HANG_UP_WAIT`, then for its reader
    thread. The SDK's close instead types `exit` and waits up to 2 s, then sends SIGTERM,
    which an interactive bash ignores, and waits 1 s more before SIGKILL: 3 s whenever the
    shell does not take that line, as after the Ctrl-C a cancel or a close sends first (the
    terminal drops input typed before it takes the Ctrl-C). Its history is not lost:
    the shell keeps none (`HISTFILE` empty, permissions/tool_processes.py). Whatever this
    does not end, the SDK's close then does."""
    process = terminal.process
    if process is None or terminal._closed:
        return
    if process.poll() is None:
        try:
            os.killpg(os.getpgid(process.pid), signal.SIGHUP)
            process.wait(timeout=HANG_UP_WAIT)
        except (OSError, subprocess.TimeoutExpired):
            return
    reader = terminal.reader_thread
    if reader is not None and reader is not threading.current_thread():
        # It ends on the pty's hang-up; before the SDK's close closes the pty under it.
        reader.join(timeout=HANG_UP_WAIT)


def _close_quietly(terminal: SubprocessTerminal) -> None:
    try:
        terminal.close()
    except Exception:
        log.debug("closing a terminal that failed to start failed", exc_info=True)


def prestart(agent: AgentBase) -> None:
    """Start the shells of the terminal tools of `agent` (the SDK's) that have not started,
    one after the other; blocking (a thread of its own: a turn does not wait for it).
    Failures are left for the command that needs the shell to report."""
    try:
        tools = list(agent.tools_map.values())  # the SDK's tools lock: not on the Trio thread
    except Exception:  # the agent is not ready: its tools start on first use
        return
    for tool in tools:
        terminal = _terminal_of(getattr(tool, "executor", None))
        if terminal is None or is_ready(terminal):
            continue
        try:
            started(terminal)
        except Exception:
            log.debug("starting a terminal ahead of its first command failed", exc_info=True)


def _terminal_of(executor: object) -> SubprocessTerminal | None:
    """The subprocess terminal behind a terminal tool's executor (possibly wrapped: the
    live-output wrapper reaches it through `_session`), or None."""
    session = getattr(executor, "_session", None)
    terminal = getattr(session, "terminal", None)
    return terminal if isinstance(terminal, SubprocessTerminal) else None
