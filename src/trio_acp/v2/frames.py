"""Pure: ACP v1 shapes <-> ACP v2 (draft) shapes, one JSON object at a time.

The v2 draft (the official `schema/v2/schema.json`, bundled with the TypeScript SDK in
tests/js) renames and regroups most of v1's handshake and reshapes a turn; the content of
a turn (content blocks, tool calls, permission options, plans, usage) is largely the same.
These functions translate one frame's params or result; `gateway.py` holds the state
(which request is which, a session's turn) and docs/v2.md says what each mapping is for.
No I/O, no Trio: plain JSON values in and out.
"""

from __future__ import annotations

import base64
import difflib
import json
from collections.abc import Mapping

__all__ = [
    "STOP_TOOL_CALL",
    "TERMINAL_META_KEYS",
    "V1_ONLY_METHODS",
    "V2_VERSION",
    "Json",
    "auth_method",
    "available_commands",
    "config_options",
    "mcp_servers",
    "session_request",
    "initialize_request",
    "initialize_response",
    "obj",
    "permission_request",
    "session_response",
    "set_config_option_request",
    "tool_call_content",
    "terminal_snapshot",
    "terminal_updates",
    "tool_call_update",
    "wants_v2",
]

#: The protocol version this module speaks besides v1.
V2_VERSION = 2

#: The v1 agent's extension method that stops one tool call's command without ending the
#: turn (the agent's side of v2's `tool_call/cancel` and `terminal/cancel`:
#: `trio_acp/openhands/sessions/tool_call_stop.py`).  Params `{sessionId, toolCallId}`;
#: result `{"stopping": bool}`: false when the command was over before the stop came.
STOP_TOOL_CALL = "_trio_acp/stop_tool_call"

#: The `_meta` keys of Zed's terminal convention (`openhands/editor/terminal_meta.py`), in
#: which the v1 agent streams a local command's output: v2 has terminals of its own.
TERMINAL_META_KEYS = ("terminal_info", "terminal_output", "terminal_exit")

#: A JSON object as `json.loads` gives it.
Json = dict[str, object]

#: v1 methods a v2 client has no business calling: v2 dropped or renamed them
#: (`session/load` -> `session/resume` with `replayFrom`, modes -> config options,
#: `authenticate`/`logout` -> `auth/login`/`auth/logout`).  The unstable v1 extras are not
#: part of the v2 draft either.
V1_ONLY_METHODS = frozenset(
    {
        "authenticate",
        "logout",
        "session/load",
        "session/set_mode",
        "session/fork",
        "session/set_title",
        "session/status",
        "auth/status",
    }
)


def obj(value: object) -> Json | None:
    """`value` as a JSON object, or None when it is not one."""
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return value
    return None


def _present(value: object) -> bool:
    """A v1 capability flag or object that says yes (v2 spells every "yes" as ``{}``)."""
    return value is True or isinstance(value, dict)


def wants_v2(line: bytes) -> bool:
    """Whether the client's first line is an `initialize` that asks for v2 or later.

    The agent answers the highest version it speaks at or below the one asked for
    (docs/v2.md): 2 for anything from 2 up, v1 otherwise.  Anything that is not such a
    request (no JSON, another method, a batch) leaves the connection on v1, unchanged.
    """
    try:
        frame = obj(json.loads(line))
    except (ValueError, UnicodeDecodeError):
        return False
    if frame is None or frame.get("method") != "initialize":
        return False
    params = obj(frame.get("params"))
    version = None if params is None else params.get("protocolVersion")
    return isinstance(version, int) and not isinstance(version, bool) and version >= V2_VERSION


# -- initialize -------------------------------------------------------------------------


def initialize_request(params: Json) -> Json:
    """A v2 `initialize` as the v1 agent takes it.

    The v1 client capabilities stay off: no `fs` and no `terminal`, so the agent runs every
    tool locally (v2 has no client file system or terminal), and none of v1's opt-in extras
    (plans, notices, elicitation), which v2 spells differently or not at all.  One is on:
    Zed's terminal `_meta` (`terminal_output`), in which the agent streams a local
    command's output; the gateway turns it into v2's own `terminal_update` and
    `terminal_output_chunk` (`terminal_updates`).
    """
    caps = obj(params.get("capabilities")) or {}
    auth = obj(caps.get("auth")) or {}
    v1: Json = {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": False, "writeTextFile": False},
            "terminal": False,
            "auth": {"terminal": _present(auth.get("terminal"))},
            "_meta": {"terminal_output": True},
        },
    }
    info = obj(params.get("info"))
    if info is not None:
        v1["clientInfo"] = info
    if "_meta" in params:
        v1["_meta"] = params["_meta"]
    return v1


def initialize_response(result: Json) -> Json:
    """The v1 agent's `initialize` result, spelled for a v2 client."""
    caps = obj(result.get("agentCapabilities")) or {}
    prompt_v1 = obj(caps.get("promptCapabilities")) or {}
    mcp_v1 = obj(caps.get("mcpCapabilities")) or {}
    sessions_v1 = obj(caps.get("sessionCapabilities")) or {}
    prompt: Json = {
        name: {} for name in ("image", "audio", "embeddedContext") if _present(prompt_v1.get(name))
    }
    # stdio MCP servers are baseline in v1; v2 makes them a capability like http.
    mcp: Json = {"stdio": {}}
    if _present(mcp_v1.get("http")):
        mcp["http"] = {}
    session: Json = {"prompt": prompt, "mcp": mcp}
    for name in ("delete", "additionalDirectories"):
        if _present(sessions_v1.get(name)):
            session[name] = {}
    info = obj(result.get("agentInfo")) or {"name": "trio-acp", "version": "unknown"}
    v2: Json = {
        "protocolVersion": V2_VERSION,
        "info": info,
        "capabilities": {"session": session},
    }
    methods = result.get("authMethods")
    if isinstance(methods, list):
        v2["authMethods"] = [m for m in (auth_method(x) for x in methods) if m is not None]
    if "_meta" in result:
        v2["_meta"] = result["_meta"]
    return v2


def auth_method(method: object) -> Json | None:
    """A v1 auth method in v2's spelling (`id` -> `methodId`, `type` always said, a
    terminal method's `env` as a list of name/value pairs)."""
    m = obj(method)
    if m is None or not isinstance(m.get("id"), str) or not isinstance(m.get("name"), str):
        return None
    kind = m.get("type", "agent")
    out: Json = {"type": kind, "methodId": m["id"], "name": m["name"]}
    for key in ("description", "_meta"):
        if key in m:
            out[key] = m[key]
    if kind == "terminal":
        args = m.get("args")
        if isinstance(args, list):
            out["args"] = args
        env = obj(m.get("env"))
        if env:
            out["env"] = [{"name": k, "value": v} for k, v in env.items() if isinstance(v, str)]
    return out


# -- sessions ---------------------------------------------------------------------------


def session_response(result: Json, *, keep_session_id: bool) -> Json:
    """A v1 `session/new` / `load` / `resume` result for v2: v2 has no modes (its config
    options carry the mode) and no unstable model list."""
    out: Json = {}
    for key in (("sessionId",) if keep_session_id else ()) + ("configOptions", "_meta"):
        if key in result and result[key] is not None:
            out[key] = result[key]
    if "configOptions" in out:
        out["configOptions"] = config_options(out["configOptions"])
    return out


def session_request(params: Json) -> Json:
    """A v2 `session/new` / `resume` for v1: `mcpServers` required, in v1's spelling."""
    v1 = {k: v for k, v in params.items() if k != "replayFrom"}
    v1["mcpServers"] = mcp_servers(params.get("mcpServers"))
    return v1


def set_config_option_request(params: Json) -> Json:
    """v2 tags every value (`{"type": "id", "value": ...}`); v1 tags only booleans."""
    if params.get("type") == "id":
        return {k: v for k, v in params.items() if k != "type"}
    return params


# -- a turn -----------------------------------------------------------------------------


def tool_call_content(item: object) -> Json | None:
    """One v1 tool call content item for v2, or None when v2 has no place for it.

    A v1 `diff` (path, old and new text) becomes v2's structured diff: the file-level
    change plus a git-style patch.  A v1 `terminal` item names the pseudo-terminal of a
    local command (a v2 session has no client terminals): v2's agent-owned terminal, the
    same shape.
    """
    it = obj(item)
    if it is None:
        return None
    kind = it.get("type")
    if kind == "content":
        return it
    if kind == "terminal":
        return it if isinstance(it.get("terminalId"), str) else None
    if kind == "diff":
        path = it.get("path")
        new = it.get("newText")
        old = it.get("oldText")
        if not isinstance(path, str) or not isinstance(new, str):
            return None
        old_text = old if isinstance(old, str) else None
        change: Json = {"operation": "add" if old_text is None else "modify", "path": path}
        out: Json = {
            "type": "diff",
            "changes": [change],
            "patch": {"format": "git_patch", "text": _git_patch(path, old_text, new)},
        }
        if "_meta" in it:
            out["_meta"] = it["_meta"]
        return out
    return None


def _git_patch(path: str, old: str | None, new: str) -> str:
    rel = path.lstrip("/")
    header = [f"diff --git a/{rel} b/{rel}\n"]
    if old is None:
        header.append("new file mode 100644\n")
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if old is None else f"a/{rel}",
        tofile=f"b/{rel}",
    )
    body = [
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    ]
    return "".join(header + body)


#: The fields a v1 `tool_call` / `tool_call_update` and a v2 `tool_call_update` share.
_TOOL_FIELDS = (
    "toolCallId",
    "name",
    "title",
    "kind",
    "status",
    "locations",
    "rawInput",
    "rawOutput",
    "_meta",
)


def tool_call_update(update: Mapping[str, object]) -> Json:
    """A v1 `tool_call` or `tool_call_update` as v2's `tool_call_update` (an upsert: a
    tool call id seen for the first time creates the tool call)."""
    out: Json = {"sessionUpdate": "tool_call_update"}
    for key in _TOOL_FIELDS:
        if key in update:
            out[key] = update[key]
    content = update.get("content")
    if isinstance(content, list):
        out["content"] = [c for c in (tool_call_content(x) for x in content) if c is not None]
    elif content is None and "content" in update:
        out["content"] = None
    return out


def terminal_updates(meta: Mapping[str, object], command: str | None) -> list[Json]:
    """v2 terminal updates for the terminal `_meta` of one v1 tool call update (Zed's
    convention, `openhands/editor/terminal_meta.py`): `terminal_info` announces the
    terminal (its `command`, as the tool call's input gave it), `terminal_output` appends
    bytes (v2: base64), `terminal_exit` reports the exit.  Capabilities are the gateway's
    to add (it knows which terminals can be cancelled)."""
    out: list[Json] = []
    info = obj(meta.get("terminal_info"))
    if info is not None and isinstance(info.get("terminal_id"), str):
        start: Json = {"sessionUpdate": "terminal_update", "terminalId": info["terminal_id"]}
        if command is not None:
            start["command"] = command
        cwd = info.get("cwd")
        if isinstance(cwd, str) and cwd.startswith("/"):
            start["cwd"] = cwd
        out.append(start)
    output = obj(meta.get("terminal_output"))
    if output is not None and isinstance(output.get("terminal_id"), str):
        data = output.get("data")
        if isinstance(data, str) and data:
            out.append(
                {
                    "sessionUpdate": "terminal_output_chunk",
                    "terminalId": output["terminal_id"],
                    "data": base64.b64encode(data.encode("utf-8", "replace")).decode("ascii"),
                }
            )
    end = obj(meta.get("terminal_exit"))
    if end is not None and isinstance(end.get("terminal_id"), str):
        status: Json = {}
        code = end.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool):
            status["exitCode"] = code
        signal = end.get("signal")
        if isinstance(signal, str):
            status["signal"] = signal
        out.append(
            {
                "sessionUpdate": "terminal_update",
                "terminalId": end["terminal_id"],
                "exitStatus": status,
            }
        )
    return out


def terminal_snapshot(terminal_id: str, output: str) -> Json:
    """A terminal's whole output (v2: an authoritative replacement snapshot, base64)."""
    data = base64.b64encode(output.encode("utf-8", "replace")).decode("ascii")
    return {"sessionUpdate": "terminal_update", "terminalId": terminal_id, "output": {"data": data}}


def permission_request(params: Json) -> Json:
    """v1 asks about a tool call (`toolCall`); v2 asks a titled question about a subject."""
    tool_call = obj(params.get("toolCall")) or {}
    subject_call = tool_call_update(tool_call)
    del subject_call["sessionUpdate"]
    title = tool_call.get("title")
    out: Json = {
        "sessionId": params.get("sessionId"),
        "title": title if isinstance(title, str) and title.strip() else "Allow this action?",
        "options": params.get("options"),
    }
    if isinstance(subject_call.get("toolCallId"), str):
        out["subject"] = {"type": "tool_call", "toolCall": subject_call}
    if "_meta" in params:
        out["_meta"] = params["_meta"]
    return out


# -- what a session offers --------------------------------------------------------------


def config_options(options: object) -> object:
    """v1 config options for v2 (`id` -> `configId`, a group's `group` -> `groupId`)."""
    if not isinstance(options, list):
        return options
    out: list[object] = []
    for option in options:
        o = obj(option)
        if o is None:
            continue
        v2 = {("configId" if k == "id" else k): v for k, v in o.items()}
        choices = v2.get("options")
        if isinstance(choices, list):
            v2["options"] = [_group(c) for c in choices]
        out.append(v2)
    return out


def _group(choice: object) -> object:
    c = obj(choice)
    if c is None or "group" not in c:
        return choice
    return {("groupId" if k == "group" else k): v for k, v in c.items()}


def available_commands(commands: object) -> object:
    """v1 commands for v2: each tagged ``"type": "command"``, a free-text input tagged
    ``"type": "text"``."""
    if not isinstance(commands, list):
        return commands
    out: list[object] = []
    for command in commands:
        c = obj(command)
        if c is None:
            continue
        v2: Json = {"type": "command", **c}
        given = obj(c.get("input"))
        if given is not None and isinstance(given.get("hint"), str):
            v2["input"] = {"type": "text", **given}
        out.append(v2)
    return out


def mcp_servers(servers: object) -> list[object]:
    """v2 MCP servers for v1: stdio servers are v1's untagged default, and the lists v2
    lets a client leave out are required in v1."""
    if not isinstance(servers, list):
        return []
    out: list[object] = []
    for server in servers:
        s = obj(server)
        if s is None:
            continue
        if s.get("type") == "stdio":
            v1 = {k: v for k, v in s.items() if k != "type"}
            v1.setdefault("args", [])
            v1.setdefault("env", [])
            out.append(v1)
        elif s.get("type") == "http":
            out.append({"headers": [], **s})
        else:
            out.append(s)
    return out
