"""Stopping what the agent's tools started, when a turn is cancelled, and removing what
they leave behind when a session closes.

The SDK's `interrupt()` asks each tool to stop; for the subprocess terminal that is a
SIGINT to the shell's process group. But the shell is interactive (`bash -i`), so with
job control the running command sits in a process group of its own and never sees that
signal: `sleep 30` survives a cancel. So after interrupting we stop every descendant of
each terminal shell ourselves (SIGINT, then SIGKILL), leaving the shell alive so the
session's terminal keeps working. Sub-agents (the `task` tool) run on threads the
interrupt does not end: they are stopped here too, with their own tools' processes
(`subagents.py`).

A cancel can also land while a tool's thread is about to hand the shell its command,
after the SDK's checks and before there is any process to find. So the shell takes a
command only through the run's gate (`run_gate.py`, installed by `sdk/terminal_gate.py`), and
stopping closes the gate first: a command that comes later is refused. One that got in
holds the gate until its job is in the terminal's foreground (or over: `sdk/terminal_gate.py`),
in a shell the gate names, which then gets a Ctrl-C through its terminal: the job dies of
SIGINT, and the shell drops the rest of a command list such as `sleep 30; touch done`
(after a SIGTERM of `sleep` it would go on with `touch`). Then every descendant is
stopped with SIGINT (then SIGKILL), again until none is left (bounded).

The terminal tool's shell is `bash -i` in the user's HOME: on exit it would save its
history, the SDK's set-up lines and every command the agent ran, to the user's own
`~/.bash_history`, and at start it loads that file, so the agent could read the user's
past commands. `terminal_params` runs it with `HISTFILE` empty: no history read or
saved (the shell still keeps the session's history in memory, for `history`).

The file editor keeps its undo history in a temporary directory of its own
(`oh_editor_history_*`) and never removes it: one per session, piling up in the
temporary directory of a long-running editor. Closing a session removes it.
"""

from __future__ import annotations

import logging
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import psutil  # type: ignore[import-untyped]

from trio_acp.openhands.permissions.run_gate import RunGate, Shell
from trio_acp.openhands.translate.shapes import JsonObject, JsonValue

log = logging.getLogger(__name__)

# Rounds of looking for (and stopping) the shells' descendants after a cancel.
KILL_ROUNDS = 4
# Between two SIGINTs to a process that is still there (it may not have exec'd yet).
SIGINT_EVERY = 0.05


def terminal_params(params: Mapping[str, JsonValue] | None) -> JsonObject:
    """The terminal tool's params as trio-acp runs it, whatever was stored: the subprocess
    terminal (no tmux server that could outlive us; killed with its process group on
    interrupt) and a shell that neither reads nor writes a history file (see above)."""
    params = dict(params or {})
    env = dict(params.get("env") or {})
    env["HISTFILE"] = ""
    return {**params, "terminal_type": "subprocess", "env": env}


def terminal_shell_pids(conversation: object) -> list[int]:
    """PIDs of the shells behind the conversation's terminal tools (best effort)."""
    from trio_acp.openhands.sdk import internals

    found = (internals.terminal_shell_pid(e) for e in internals.tool_executors(conversation))
    return [pid for pid in found if pid is not None]


def kill_descendants(
    pids: list[int], *, grace: float = 1.0, rounds: int = KILL_ROUNDS
) -> list[int]:
    """Terminate (then kill) every descendant of `pids`, looking again until none is left
    (at most `rounds` times); returns the PIDs signalled."""
    stopped: list[int] = []
    for _ in range(rounds):
        victims = _descendants(pids)
        if not victims:
            break
        stopped.extend(_stop(victims, grace))
    if stopped:
        log.info("stopped tool processes: %s", stopped)
    return stopped


def _descendants(pids: list[int]) -> list[psutil.Process]:
    victims: list[psutil.Process] = []
    for pid in pids:
        try:
            victims.extend(psutil.Process(pid).children(recursive=True))
        except psutil.Error:
            continue
    return victims


def _stop(victims: list[psutil.Process], grace: float) -> list[int]:
    """SIGINT, again while it lasts (a process the shell has forked but that has not
    exec'd yet keeps the shell's handler), then SIGKILL after `grace`. A SIGINT, not a
    SIGTERM: bash drops the rest of a command list only when its child dies of SIGINT."""
    alive = victims
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        for proc in alive:
            try:
                proc.send_signal(signal.SIGINT)
            except psutil.Error:
                pass
        _, alive = psutil.wait_procs(alive, timeout=SIGINT_EVERY)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    return [p.pid for p in victims]


def stop_tool_processes(conversation: object, gate: RunGate | None = None) -> list[int]:
    """Stop what the tools of `conversation` started (see the module's docstring); with
    `gate`, the run's gate, close it first. Blocking."""
    shells = gate.close() if gate is not None else []
    for shell in shells:
        _interrupt_shell(shell)
    stop_subagents(conversation)
    pids = terminal_shell_pids(conversation) + _shell_pids(shells)
    return kill_descendants(list(dict.fromkeys(pids)))


def stop_command_in(shell: Shell, gate: RunGate | None) -> None:
    """Stop the command one tool call handed `shell`, the run going on and its gate open
    (ACP v2's `tool_call/cancel`, `terminal/cancel`; `run_gate.ToolCallStops` found the
    shell, and refuses a stopped call's command that has not reached one): the Ctrl-C a
    turn's cancel sends, then its job alone is stopped (`sdk/terminal_gate.stop_command`),
    never the shell's other descendants. Under the gate's lock, never while a command is
    handed to the shell. The tool's result is the interrupted command's, and the model
    goes on from it. Blocking."""
    from trio_acp.openhands.sdk.terminal_gate import stop_command

    if gate is not None:
        gate.exclusive(lambda: stop_command(shell))
    else:
        stop_command(shell)


def _interrupt_shell(shell: Shell) -> None:
    """A Ctrl-C through the shell's terminal, as a user at that terminal stops a command:
    the terminal drops what the shell has not read yet and interrupts the foreground job.
    (Not a SIGINT to the shell itself as well: it would make the shell drop what it was
    reading and then read the rest of the command, see `sdk/terminal_gate.py`.)"""
    try:
        shell.send_keys("C-c", enter=False)
    except Exception:
        log.debug("interrupting a shell failed", exc_info=True)


def _shell_pids(shells: list[Shell]) -> list[int]:
    pids = []
    for shell in shells:
        pid = getattr(getattr(shell, "process", None), "pid", None)
        if isinstance(pid, int):
            pids.append(pid)
    return pids


def stop_subagents(conversation: object) -> None:
    """Stop the sub-agents the conversation's `task` tool runs, with their processes, and
    wait for them (bounded): they run on threads an interrupt does not end
    (`subagents.py`)."""
    from trio_acp.openhands.sdk import internals

    for executor in internals.tool_executors(conversation):
        # Our task executor's (sdk/delegation.py), not the SDK's.
        stop = getattr(executor, "stop_subagents", None)
        if callable(stop):
            try:
                stop(stop_tool_processes)
            except Exception:
                log.warning("stopping the sub-agents failed", exc_info=True)


def editor_history_dirs(conversation: object) -> list[Path]:
    """The file editors' temporary undo-history directories (best effort: SDK internals)."""
    from trio_acp.openhands.sdk import internals

    dirs: list[Path] = []
    temp = Path(tempfile.gettempdir()).resolve()
    for executor in internals.tool_executors(conversation):
        directory = internals.editor_history_dir(executor)
        if directory is not None and directory.name.startswith("oh_editor_history_"):
            # Only what the SDK made in the temporary directory: never a path of the user's.
            if directory.resolve().parent == temp:
                dirs.append(directory)
    return dirs


def remove_editor_history(conversation: object) -> None:
    for directory in editor_history_dirs(conversation):
        shutil.rmtree(directory, ignore_errors=True)
