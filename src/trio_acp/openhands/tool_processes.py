"""Stopping what the agent's tools started, when a turn is cancelled.

The SDK's `interrupt()` asks each tool to stop; for the subprocess terminal that is a
SIGINT to the shell's process group. But the shell is interactive (`bash -i`), so with
job control the running command sits in a process group of its own and never sees that
signal: `sleep 30` survives a cancel. So after interrupting we stop every descendant of
each terminal shell ourselves (SIGTERM, then SIGKILL), leaving the shell alive so the
session's terminal keeps working.
"""

from __future__ import annotations

import logging
from typing import Any

import psutil

log = logging.getLogger(__name__)


def terminal_shell_pids(conversation: Any) -> list[int]:
    """PIDs of the shells behind the conversation's terminal tools (best effort)."""
    pids = []
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
    return kill_descendants(terminal_shell_pids(conversation))
