"""Stopping what the agent's tools started, when a turn is cancelled, and removing what
they leave behind when a session closes.

The SDK's `interrupt()` asks each tool to stop; for the subprocess terminal that is a
SIGINT to the shell's process group. But the shell is interactive (`bash -i`), so with
job control the running command sits in a process group of its own and never sees that
signal: `sleep 30` survives a cancel. So after interrupting we stop every descendant of
each terminal shell ourselves (SIGTERM, then SIGKILL), leaving the shell alive so the
session's terminal keeps working. Sub-agents (the `task` tool) run on threads the
interrupt does not end: they are stopped here too, with their own tools' processes
(`subagents.py`).

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
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]

log = logging.getLogger(__name__)


def terminal_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The terminal tool's params as trio-acp runs it, whatever was stored: the subprocess
    terminal (no tmux server that could outlive us; killed with its process group on
    interrupt) and a shell that neither reads nor writes a history file (see above)."""
    params = dict(params or {})
    env = dict(params.get("env") or {})
    env["HISTFILE"] = ""
    return {**params, "terminal_type": "subprocess", "env": env}


def terminal_shell_pids(conversation: Any) -> list[int]:
    """PIDs of the shells behind the conversation's terminal tools (best effort)."""
    pids: list[int] = []
    try:
        tools = conversation.agent.tools_map.values()
    except Exception:
        return pids
    for tool in tools:
        executor = getattr(tool, "executor", None)
        session = getattr(executor, "_session", None)
        process = getattr(getattr(session, "terminal", None), "process", None)
        pid = getattr(process, "pid", None)
        if isinstance(pid, int):
            pids.append(pid)
    return pids


def kill_descendants(pids: list[int], *, grace: float = 1.0) -> list[int]:
    """Terminate (then kill) every descendant of `pids`; returns the PIDs signalled."""
    victims: list[psutil.Process] = []
    for pid in pids:
        try:
            victims.extend(psutil.Process(pid).children(recursive=True))
        except psutil.Error:
            continue
    for proc in victims:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(victims, timeout=grace)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    if victims:
        log.info("stopped tool processes: %s", [p.pid for p in victims])
    return [p.pid for p in victims]


def stop_tool_processes(conversation: Any) -> list[int]:
    stop_subagents(conversation)
    return kill_descendants(terminal_shell_pids(conversation))


def stop_subagents(conversation: Any) -> None:
    """Stop the sub-agents the conversation's `task` tool runs, with their processes, and
    wait for them (bounded): they run on threads an interrupt does not end
    (`subagents.py`)."""
    try:
        tools = list(conversation.agent.tools_map.values())
    except Exception:
        return
    for tool in tools:
        stop = getattr(getattr(tool, "executor", None), "stop_subagents", None)
        if callable(stop):
            try:
                stop(stop_tool_processes)
            except Exception:
                log.warning("stopping the sub-agents failed", exc_info=True)


def editor_history_dirs(conversation: Any) -> list[Path]:
    """The file editors' temporary undo-history directories (best effort: SDK internals)."""
    dirs: list[Path] = []
    try:
        tools = conversation.agent.tools_map.values()
    except Exception:
        return dirs
    temp = Path(tempfile.gettempdir()).resolve()
    for tool in tools:
        editor = getattr(getattr(tool, "executor", None), "editor", None)
        cache = getattr(getattr(editor, "_history_manager", None), "cache", None)
        directory = getattr(cache, "directory", None)
        if isinstance(directory, Path) and directory.name.startswith("oh_editor_history_"):
            # Only what the SDK made in the temporary directory: never a path of the user's.
            if directory.resolve().parent == temp:
                dirs.append(directory)
    return dirs


def remove_editor_history(conversation: Any) -> None:
    for directory in editor_history_dirs(conversation):
        shutil.rmtree(directory, ignore_errors=True)
