"""The marker that lets a cancel stop an agent-server conversation's terminal commands.

The server's interrupt only sends SIGINT to the terminal's process group, and an
interactive shell runs each command in a group of its own (remote.py's module doc). So our
terminal tool's processes carry an environment variable (`MARKER_VAR`, set through the
tool's `env` parameter, which travels with the agent spec to the server), and a cancel runs
`stop_marked_command` through the server's bash API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trio_acp.openhands.backends.remote_inbox import TERMINAL_TOOL

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import AgentBase

# The environment variable that marks the processes of one conversation's terminal.
MARKER_VAR = "TRIO_ACP_TERMINAL"


def tag_terminal(agent: AgentBase, marker: str) -> AgentBase:
    """`agent` with its terminal tool's processes carrying `MARKER_VAR=marker`.

    The terminal tool takes extra environment variables as a parameter (`env`), which
    travels with the agent spec to the server.
    """
    tools = []
    for tool in agent.tools:
        if tool.name == TERMINAL_TOOL:
            params = dict(tool.params or {})
            params["env"] = {**dict(params.get("env") or {}), MARKER_VAR: marker}
            tool = tool.model_copy(update={"params": params})
        tools.append(tool)
    return agent.model_copy(update={"tools": tools})


def terminal_marker(agent: AgentBase) -> str | None:
    for tool in getattr(agent, "tools", None) or ():
        env = (tool.params or {}).get("env") or {}
        if MARKER_VAR in env:
            return str(env[MARKER_VAR])
    return None


def stop_marked_command(marker: str) -> str:
    """A POSIX sh script that stops the marked processes whose parent is marked too.

    The terminal's shell is the one marked process with an unmarked parent (the server):
    it stays, so the conversation's terminal keeps working. TERM first, then KILL what has
    not exited 0.5 s later (checked every 50 ms: a `sleep` is gone at once).

    It runs during a cancel, on a server that may host hundreds of processes: one `grep`
    reads every environment, and the rest is shell builtins (a few processes per process
    scanned took 2 s on a loaded machine).
    """
    return (
        f"m='{MARKER_VAR}={marker}'; "
        'marked=" $(echo $(grep -lzxF "$m" /proc/[0-9]*/environ 2>/dev/null)) "; '
        "victims=''; "
        "for f in $marked; do p=${f#/proc/}; p=${p%/environ}; "
        "read -r line < /proc/$p/stat 2>/dev/null || continue; "
        "rest=${line##*) }; set -- $rest; "
        'case "$marked" in *" /proc/$2/environ "*) victims="$victims $p";; esac; done; '
        '[ -z "$victims" ] && exit 0; '
        "kill -TERM $victims 2>/dev/null; "
        "for i in 1 2 3 4 5 6 7 8 9 10; do alive=''; "
        'for p in $victims; do [ -d /proc/$p ] && alive="$alive $p"; done; '
        '[ -z "$alive" ] && break; sleep 0.05; done; '
        '[ -n "$alive" ] && kill -KILL $alive 2>/dev/null; '
        "echo stopped:$victims"
    )
