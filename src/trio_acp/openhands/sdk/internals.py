"""What trio-acp reads of the SDK's objects beyond their public API, in one place.

Each function is one such read, duck-typed and best effort: it answers None (or nothing)
when the object is not what the SDK made, a test's stand-in say, or when the SDK has moved
the piece. What each one reaches is listed in `reliance.py`, where the drift check
(tests/openhands/test_sdk_drift.py) names the read that an SDK upgrade broke.

Imports no SDK (and nothing of `openhands/` but the types for mypy): its callers hold
conversations the SDK built, or stand-ins in the fast tests, which refuse the SDK import.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def tool_executors(conversation: object) -> list[object]:
    """The executors of the conversation's tools (`Agent.tools_map`: none until the agent
    is initialized, its first run or the warm-up)."""
    try:
        # A property that may raise before the agent is initialized.
        tools_map = getattr(getattr(conversation, "agent", None), "tools_map", None)
        tools = list(tools_map.values()) if tools_map is not None else []
    except Exception:
        return []
    found = (getattr(tool, "executor", None) for tool in tools)
    return [executor for executor in found if executor is not None]


# Set on a subprocess terminal while its shell runs its start-up (terminal_start.py).
SHELL_STARTING_ATTRIBUTE = "_trio_acp_starting"


def terminal_shell_pid(executor: object) -> int | None:
    """The PID of the shell behind a terminal tool's executor (`TerminalExecutor._session`,
    its subprocess terminal's `process`); None for any other executor, and for a shell still
    running its start-up: its children then are the user's ~/.bashrc (pyenv's rehash holds a
    lock file its EXIT trap removes), not a tool's command, and are never signalled: the
    shell is ended once its start-up is over (terminal_start.py), not SIGINT/SIGKILLed as
    commands are (permissions/tool_processes.py)."""
    session = getattr(executor, "_session", None)
    terminal = getattr(session, "terminal", None)
    if getattr(terminal, SHELL_STARTING_ATTRIBUTE, False):
        return None
    process = getattr(terminal, "process", None)
    pid = getattr(process, "pid", None)
    return pid if isinstance(pid, int) else None


def editor_history_dir(executor: object) -> Path | None:
    """The undo-history directory of a file editor tool's executor (`FileEditor`'s
    `_history_manager.cache.directory`); None for any other executor."""
    editor = getattr(executor, "editor", None)
    cache = getattr(getattr(editor, "_history_manager", None), "cache", None)
    directory = getattr(cache, "directory", None)
    return directory if isinstance(directory, Path) else None


def visualizer(conversation: object) -> object | None:
    """The visualizer a `LocalConversation` was given (`_visualizer`), if any."""
    return getattr(conversation, "_visualizer", None)


def agent_initializer(conversation: object) -> Callable[[], None] | None:
    """`LocalConversation._ensure_agent_ready`: initializes the agent (its tools, MCP
    servers included) once, under the conversation's lock; None without it."""
    ensure_ready = getattr(conversation, "_ensure_agent_ready", None)
    return ensure_ready if callable(ensure_ready) else None


def mcp_tool_provider(conversation: object) -> object | None:
    """The MCP tool provider a `LocalConversation` was given (`_mcp_tool_provider`)."""
    return getattr(conversation, "_mcp_tool_provider", None)


def has_chat_template(critic: object) -> bool:
    """Whether the critic renders a chat template it fetches on first use
    (`APIBasedCritic._get_template_renderer`)."""
    return hasattr(critic, "_get_template_renderer")
