"""The SDK's subprocess terminal, taking a run's commands only through the run's gate.

`permissions/tool_processes.py` says why (a cancel landing while a tool's thread hands the
shell its command), `permissions/run_gate.py` what the gate is. This module patches the
SDK's `SubprocessTerminal.send_keys` and `interrupt` (once per process) and reads its
screen buffer (`output_lock`, `output_buffer`) and pty (`_pty_master_fd`, `process`): SDK
internals, listed in reliance.py. Imports the SDK: imported inside a function after the
load (backends/local_conversation.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
from collections.abc import Callable
from typing import cast

from openhands.tools.terminal import impl as terminal_impl
from openhands.tools.terminal.constants import CMD_OUTPUT_PS1_END
from openhands.tools.terminal.terminal.subprocess_terminal import SubprocessTerminal
from openhands.tools.terminal.terminal.terminal_session import TerminalSession

from trio_acp.openhands.permissions import run_gate
from trio_acp.openhands.sdk.terminal_start import start_lazily
from trio_acp.openhands.translate.shapes import PassedOn

# How long a command's write may hold the run's gate until its job is in the foreground.
START_WAIT = 0.2
# How long one stopped command's job may take to die of SIGINT before it is killed.
STOP_GRACE = 1.0
# Between two SIGINTs to a stopped job that is still in the foreground.
SIGINT_EVERY = 0.05


@functools.cache
def gate_terminals() -> None:
    """Make the SDK's subprocess terminal take a command from a run only through the run's
    gate (`run_gate.py`); once, after the SDK import. Outside a run (no gate current: the
    terminal's own set-up, our Ctrl-C when stopping) it sends as before."""
    send_keys = SubprocessTerminal.send_keys
    prompt_end = CMD_OUTPUT_PS1_END.strip()

    def gated_send_keys(self: SubprocessTerminal, text: str, enter: bool = True) -> None:
        gate = run_gate.current()
        if gate is None:
            send_keys(self, text, enter)
            return

        def send() -> None:
            prompts = _prompts(self, prompt_end)
            send_keys(self, text, enter)
            _until_started(self, prompts, prompt_end)

        gate.admit(send, shell=self)

    def interrupt(self: SubprocessTerminal) -> bool:
        # The SDK's own interrupt (on a cancel, from the run's thread) signals the shell's
        # process group: a SIGINT that can cost the shell a line it is reading but not
        # the rest of it (`_until_started`). A Ctrl-C through the terminal instead, and
        # never while the run's gate hands a command to the shell.
        def ctrl_c() -> bool:
            try:
                send_keys(self, "C-c", False)
            except Exception:
                return False
            return True

        gate = run_gate.current()
        return gate.exclusive(ctrl_c) if gate is not None else ctrl_c()

    _SEND_KEYS.append(send_keys)
    SubprocessTerminal.send_keys = gated_send_keys  # type: ignore[method-assign]
    SubprocessTerminal.interrupt = interrupt  # type: ignore[method-assign]
    keep_subprocess_on_reset()
    # After the gate's patch: a shell starts (terminal_start.py) before its first command
    # enters the gate, never while the command holds it.
    start_lazily()


#: The SDK's own `send_keys`, once `gate_terminals` has patched it.
_SEND_KEYS: list[Callable[[SubprocessTerminal, str, bool], None]] = []


def stop_command(shell: run_gate.Shell, grace: float = STOP_GRACE) -> bool:
    """Stop the job in the foreground of `terminal` (one tool call's command: v2's
    `tool_call/cancel`), and nothing else: the shell, and what the agent started in the
    background, keep running (a whole turn's cancel stops every descendant instead:
    tool_processes.py). A Ctrl-C through the terminal, as the turn's cancel sends it (the
    job dies of SIGINT and bash drops the rest of its command list), then a SIGINT to the
    job's process group while it lasts, then SIGKILL after `grace`. Returns whether a job
    was in the foreground. Blocking; call it under the run's gate (`RunGate.exclusive`),
    never while a command is being handed to the shell."""
    # The gate only ever holds the SDK's subprocess terminals: their `send_keys` is the
    # one that goes through it (`gate_terminals`).
    terminal = cast(SubprocessTerminal, shell)
    pty = _pty(terminal)
    if pty is None:
        return False
    fd, shell_group = pty

    def foreground() -> int | None:
        try:
            group = os.tcgetpgrp(fd)
        except OSError:
            return None
        return None if group == shell_group else group

    job = foreground()
    if job is None:
        return False  # over, or a builtin: the shell is at its prompt
    send_keys = _SEND_KEYS[0] if _SEND_KEYS else type(terminal).send_keys
    try:
        send_keys(terminal, "C-c", False)
    except Exception:
        pass
    deadline = time.monotonic() + grace
    while foreground() == job:
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError, PermissionError):  # gone
                os.killpg(job, signal.SIGKILL)
            break
        time.sleep(SIGINT_EVERY)
        with contextlib.suppress(ProcessLookupError, PermissionError):  # gone
            os.killpg(job, signal.SIGINT)
    return True


def keep_subprocess_on_reset() -> None:
    """The terminal tool's `reset: true` makes a new session with `terminal_type=None`
    (auto-detect: tmux where it is installed), dropping the subprocess terminal asked for
    (`tool_processes.terminal_params`): the run's gate and the cancel's process stopping
    would no longer reach its commands, and a tmux server could outlive trio-acp. Every
    terminal session the terminal tool makes in trio-acp's process is a subprocess one."""
    create = terminal_impl.create_terminal_session

    # The SDK's own arguments, passed on as they come (only `terminal_type` is read).
    def subprocess_session(*args: PassedOn, **kwargs: PassedOn) -> TerminalSession:
        if len(args) < 4 and kwargs.get("terminal_type") is None:
            kwargs["terminal_type"] = "subprocess"
        return create(*args, **kwargs)

    terminal_impl.create_terminal_session = subprocess_session


def _pty(terminal: SubprocessTerminal) -> tuple[int, int] | None:
    """The terminal's pty, and its shell's process group; None while the SDK starts or
    closes it (it sets the process and the pty one after the other) or once it is gone."""
    fd, process = terminal._pty_master_fd, terminal.process
    if fd is None or process is None:
        return None
    try:
        return fd, os.getpgid(process.pid)
    except Exception:
        return None


def _prompts(terminal: SubprocessTerminal, prompt_end: str) -> int:
    """How many prompts the terminal's screen shows (SubprocessTerminal's own buffer)."""
    try:
        with terminal.output_lock:
            return "".join(terminal.output_buffer).count(prompt_end)
    except Exception:
        return 0


def _until_started(terminal: SubprocessTerminal, prompts: int, prompt_end: str) -> None:
    """Wait (at most `START_WAIT` s) until the shell has handed its terminal to the
    command's foreground job, or is back at its prompt (a builtin).

    Held under the gate's lock, so that a cancel finds the command in one of those two
    states. In between, the shell itself may have read the line and be forking, and a
    signal then does not stop it reliably: bash goes on with the rest of a command list
    when its child dies of anything but a SIGINT it got itself, and a SIGINT while it
    reads may cost it the line's first character but not the rest of the line
    (`sleep 30; touch done` became `leep: command not found`, then `touch`). Once the
    job is in the foreground, the Ctrl-C reaches it and bash drops the rest of the line."""
    deadline = time.monotonic() + START_WAIT
    pty = _pty(terminal)
    if pty is None:
        return
    fd, shell = pty
    while time.monotonic() < deadline:
        try:
            if os.tcgetpgrp(fd) != shell:
                return
        except OSError:
            return
        if _prompts(terminal, prompt_end) > prompts:
            return
        time.sleep(0.001)
