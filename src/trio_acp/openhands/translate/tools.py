"""The tool catalog: the one place that knows how each tool looks to the client.

For every tool name the agent may call, one `ToolSpec` says:

* `present` — the title, kind and locations of its `tool_call` (also the permission
  request's, so both always agree);
* `title_args` — the arguments whose arrival, while they stream, may change that title;
* `announce_with` — the argument a streamed call waits for before it is announced, so that
  its first title already names it (the terminal's command: acpx prints a tool call's first
  title and then only its end; peers title a command with the command itself);
* `preview` — what a `session/request_permission` shows before it runs (a command, a diff);
* `scope` — what an "always allow/reject" answer covers (`permissions.py` makes the rule);
* `result` — how its observation is shown when it finishes (`results.py`);
* `text_arg` — for `finish` / `think`, which are not tool calls for the client: the
  argument streamed as message / thought text instead.

The translator (`translator.py`), the permission request (`confirm.py`) and the rule scope
(`permissions.py`) all ask this catalog, under any of a tool's names: the legacy `bash`,
`execute_bash` and `str_replace_editor` are aliases of `terminal` and `file_editor`, with the
same title, preview and rule scope. A name the catalog does not know (an MCP tool, a
browser tool) gets `GENERIC`: its summary as title, a path argument as rule scope,
its text and images as result.

Adding a tool is one entry here, e.g. an MCP tool that deletes files::

    register(ToolSpec(
        name="files_delete",
        present=lambda tool, args, summary, cwd, is_dir: (
            f"Delete {abs_path(cwd, args.get('path')) or 'a file'}", "delete", ()),
        title_args=frozenset({"path"}),
        scope=path_scope,
    ))

(the same goes for the editor's own fs/terminal when the agent uses them). Pure: no trio, no `openhands.*`; the only I/O is through the `is_dir` and `read`
callables passed in.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

import attrs

from trio_acp import schema
from trio_acp.openhands.translate.paths import abs_path, is_dir_safe
from trio_acp.openhands.translate.results import (
    editor_payload,
    generic_payload,
    plan_updates,
    terminal_payload,
)
from trio_acp.openhands.translate.shapes import Json, SdkObject, ToolArgs
from trio_acp.openhands.translate.text import one_line
from trio_acp.schema import SessionUpdate, ToolCallContent

__all__ = [
    "GENERIC",
    "Presentation",
    "Rendered",
    "ToolSpec",
    "lookup",
    "path_scope",
    "permission_preview",
    "present",
    "register",
    "rule_scope",
    "spec_for_result",
    "text_tool",
    "tool_family",
]

#: (title, kind, ((absolute path, 1-based line or None), ...)) of a tool call.
Presentation = tuple[str, str, tuple[tuple[str, int | None], ...]]
#: `present(tool, args, summary, cwd, is_dir)`; `args` may be partial (still streaming).
Presenter = Callable[[str, ToolArgs, "str | None", str, Callable[[str], bool]], Presentation]
#: Reads a file for a preview: its text, or None (missing, too big, not text).
Reader = Callable[[str], "str | None"]


@attrs.frozen
class Rendered:
    """A finished tool call as the client sees it."""

    content: list[ToolCallContent] | None
    raw_output: Json = None
    locations: list[tuple[str, int | None]] | None = None
    extra: list[SessionUpdate] = attrs.Factory(list)  # more updates after it (e.g. the plan)


def _summary_title(tool: str, summary: str | None) -> str:
    if isinstance(summary, str) and summary.strip() and not summary.startswith(f"{tool}:"):
        return summary.strip()
    return tool or "tool"


def _generic_present(
    tool: str, args: ToolArgs, summary: str | None, cwd: str, is_dir: Callable[[str], bool]
) -> Presentation:
    kind = "fetch" if tool.startswith("browser") else "other"
    return _summary_title(tool, summary), kind, ()


def _think_present(
    tool: str, args: ToolArgs, summary: str | None, cwd: str, is_dir: Callable[[str], bool]
) -> Presentation:
    return _summary_title(tool, summary), "think", ()


def _no_preview(args: ToolArgs, cwd: str, read: Reader) -> list[ToolCallContent]:
    return []


def path_scope(tool: str, args: ToolArgs, cwd: str) -> tuple[str, str | None]:
    """The tool on the path it touches (absolute), else the whole tool."""
    if isinstance(args.get("path"), str):
        path = abs_path(cwd, args["path"])
        if path is not None:
            return tool, path
    return tool, None


def _generic_result(observation: SdkObject, args: ToolArgs, cwd: str) -> Rendered:
    content, raw_output = generic_payload(observation)
    return Rendered(content, raw_output)


@attrs.frozen
class ToolSpec:
    """Everything the client is shown about one tool (see the module docstring)."""

    name: str
    present: Presenter = _generic_present
    aliases: tuple[str, ...] = ()
    title_args: frozenset[str] = frozenset()
    announce_with: str | None = None
    preview: Callable[[ToolArgs, str, Reader], list[ToolCallContent]] = _no_preview
    # (tool, target) of an "always" rule; `tool` is the canonical name, so a rule made
    # under an alias covers the tool under every name.
    scope: Callable[[str, ToolArgs, str], tuple[str, str | None]] = path_scope
    result: Callable[[SdkObject, ToolArgs, str], Rendered] = _generic_result
    # SDK observation / action classes that identify this tool whatever its name.
    observation: str | None = None
    action: str | None = None
    # finish / think: the argument shown as message / thought text, not as a tool call.
    text_arg: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


# ----------------------------------------------------------------------------- terminal


def _terminal_present(
    tool: str, args: ToolArgs, summary: str | None, cwd: str, is_dir: Callable[[str], bool]
) -> Presentation:
    command = args.get("command")
    if args.get("reset") is True:
        title = "Reset the terminal"
    elif args.get("is_input") is True:
        title = f"Send input to the running process: {command}" if command else "Send input"
    elif isinstance(command, str) and command.strip():
        title = command
    elif command == "":
        title = "Read more terminal output"
    else:
        title = "Run a terminal command"
    return title, "execute", ()


def _terminal_preview(args: ToolArgs, cwd: str, read: Reader) -> list[ToolCallContent]:
    command = args.get("command")
    if not isinstance(command, str):
        return []
    text = schema.TextContent(text=f"```sh\n{command}\n```")
    return [schema.ContentToolCallContent(content=text)]


def _terminal_scope(tool: str, args: ToolArgs, cwd: str) -> tuple[str, str | None]:
    command = args.get("command")
    if isinstance(command, str):
        return "terminal", " ".join(command.split())
    return path_scope("terminal", args, cwd)


def _terminal_result(observation: SdkObject, args: ToolArgs, cwd: str) -> Rendered:
    content, raw_output = terminal_payload(observation)
    return Rendered(content, raw_output)


TERMINAL = ToolSpec(
    name="terminal",
    aliases=("bash", "execute_bash"),
    present=_terminal_present,
    title_args=frozenset({"command", "is_input", "reset"}),
    announce_with="command",
    preview=_terminal_preview,
    scope=_terminal_scope,
    result=_terminal_result,
    observation="TerminalObservation",
)


# -------------------------------------------------------------------------- file editor

_EDITOR_VERBS = {
    "view": "Read",
    "create": "Create",
    "str_replace": "Edit",
    "insert": "Edit",
    "undo_edit": "Undo edit of",
}


def _editor_present(
    tool: str, args: ToolArgs, summary: str | None, cwd: str, is_dir: Callable[[str], bool]
) -> Presentation:
    command = args.get("command")
    path = abs_path(cwd, args.get("path"))
    verb = _EDITOR_VERBS.get(command) if isinstance(command, str) else None
    if command == "view":
        kind = "read"
    elif verb is not None:
        kind = "edit"
    else:
        kind = "other"
    if path is None:
        return (f"{verb} a file" if verb else "File editor"), kind, ()
    title = f"{verb or 'File editor:'} {path}"
    line = None
    view_range = args.get("view_range")
    if command == "view" and isinstance(view_range, list) and view_range:
        start = view_range[0]
        end = view_range[1] if len(view_range) > 1 else None
        if isinstance(start, int) and start >= 1:
            line = start
            if isinstance(end, int) and end >= start:
                title += f" (lines {start}-{end})"
            else:
                title += f" (from line {start})"
    insert_line = args.get("insert_line")
    if command == "insert" and isinstance(insert_line, int) and insert_line >= 0:
        line = insert_line + 1
    if command == "view" and (path.endswith(os.sep) or is_dir_safe(is_dir, path)):
        return f"List {path}", kind, ()
    return title, kind, ((path, line),)


def _editor_preview(args: ToolArgs, cwd: str, read: Reader) -> list[ToolCallContent]:
    if not isinstance(args.get("path"), str):
        return []
    path = abs_path(cwd, args["path"])
    if path is None:
        return []
    command = args.get("command")
    old = read(path)
    new: str | None = None
    if command == "create" and isinstance(args.get("file_text"), str):
        new = args["file_text"]
    elif command == "str_replace" and old is not None and isinstance(args.get("old_str"), str):
        new = old.replace(args["old_str"], args.get("new_str") or "", 1)
    elif command == "insert" and old is not None and isinstance(args.get("insert_line"), int):
        lines = old.splitlines(keepends=True)
        at = max(0, min(args["insert_line"], len(lines)))
        new = "".join(lines[:at]) + (args.get("new_str") or "") + "\n" + "".join(lines[at:])
    if new is not None:
        return [schema.DiffToolCallContent(path=path, old_text=old, new_text=new)]
    text = schema.TextContent(text=f"{command} {path}")
    return [schema.ContentToolCallContent(content=text)]


def _editor_result(observation: SdkObject, args: ToolArgs, cwd: str) -> Rendered:
    content, raw_output, locations = editor_payload(observation, args, cwd)
    return Rendered(content, raw_output, locations)


FILE_EDITOR = ToolSpec(
    name="file_editor",
    aliases=("str_replace_editor",),
    present=_editor_present,
    title_args=frozenset({"command", "path", "view_range", "insert_line"}),
    preview=_editor_preview,
    scope=lambda tool, args, cwd: path_scope("file_editor", args, cwd),
    result=_editor_result,
    observation="FileEditorObservation",
)


# ------------------------------------------------------------------------- task tracker


def _task_present(
    tool: str, args: ToolArgs, summary: str | None, cwd: str, is_dir: Callable[[str], bool]
) -> Presentation:
    command = args.get("command")
    if command == "plan":
        tasks = args.get("task_list")
        n = len(tasks) if isinstance(tasks, list) else None
        title = f"Update the plan ({n} tasks)" if n is not None else "Update the plan"
        return title, "think", ()
    return ("View the plan" if command == "view" else "Plan"), "think", ()


def _task_result(observation: SdkObject, args: ToolArgs, cwd: str) -> Rendered:
    content, raw_output = generic_payload(observation)
    return Rendered(content, raw_output, extra=plan_updates(observation))


TASK_TRACKER = ToolSpec(
    name="task_tracker",
    present=_task_present,
    title_args=frozenset({"command"}),
    result=_task_result,
    observation="TaskTrackerObservation",
)


# ------------------------------------------------------------------- sub-agents (task)


def _delegate_present(
    tool: str, args: ToolArgs, summary: str | None, cwd: str, is_dir: Callable[[str], bool]
) -> Presentation:
    agent = args.get("subagent_type")
    agent = agent if isinstance(agent, str) and agent.strip() else "general-purpose"
    what = args.get("description")
    if not (isinstance(what, str) and what.strip()):
        prompt = args.get("prompt")
        what = one_line(prompt, 80) if isinstance(prompt, str) and prompt.strip() else ""
    resume = args.get("resume")
    verb = f"Resume {resume} ({agent})" if isinstance(resume, str) and resume else agent
    return (f"Sub-agent {verb}: {one_line(what)}" if what else f"Sub-agent {verb}"), "think", ()


def _delegate_preview(args: ToolArgs, cwd: str, read: Reader) -> list[ToolCallContent]:
    prompt = args.get("prompt")
    if not isinstance(prompt, str):
        return []
    agent = args.get("subagent_type") or "general-purpose"
    text = f"Delegate to the `{agent}` sub-agent (each of its actions is asked for again):\n\n"
    return [schema.ContentToolCallContent(content=schema.TextContent(text=text + prompt))]


def _delegate_scope(tool: str, args: ToolArgs, cwd: str) -> tuple[str, str | None]:
    # "Always" covers starting that kind of sub-agent, never what it then does.
    agent = args.get("subagent_type")
    return "task", agent if isinstance(agent, str) and agent else "general-purpose"


def _delegate_result(observation: SdkObject, args: ToolArgs, cwd: str) -> Rendered:
    content, _ = generic_payload(observation)
    raw = {
        key: value
        for key in ("task_id", "subagent", "status")
        if isinstance(value := getattr(observation, key, None), str)
    }
    return Rendered(content, raw or None)


TASK = ToolSpec(
    name="task",
    present=_delegate_present,
    title_args=frozenset({"description", "subagent_type", "prompt", "resume"}),
    preview=_delegate_preview,
    scope=_delegate_scope,
    result=_delegate_result,
    observation="TaskObservation",
)


# ------------------------------------------------------------------------ finish, think

FINISH = ToolSpec(
    name="finish", text_arg="message", observation="FinishObservation", action="FinishAction"
)
THINK = ToolSpec(
    name="think",
    present=_think_present,
    text_arg="thought",
    observation="ThinkObservation",
    action="ThinkAction",
)

#: Any tool the catalog does not name (MCP tools, browser tools, ...).
GENERIC = ToolSpec(name="")


# ------------------------------------------------------------------------------ lookups

_BY_NAME: dict[str, ToolSpec] = {}
_ORDER: list[ToolSpec] = []


def register(spec: ToolSpec) -> ToolSpec:
    """Add (or replace) a tool under its name and aliases."""
    for name in spec.names:
        old = _BY_NAME.get(name)
        if old is not None and old in _ORDER:
            _ORDER.remove(old)
        _BY_NAME[name] = spec
    _ORDER.append(spec)
    return spec


for _spec in (TERMINAL, FILE_EDITOR, TASK_TRACKER, TASK, FINISH, THINK):
    register(_spec)


def lookup(tool: str) -> ToolSpec:
    """The catalog entry for a tool name (or alias); `GENERIC` for a name it does not know."""
    return _BY_NAME.get(tool, GENERIC)


def catalog() -> Iterable[ToolSpec]:
    """Every registered entry, once each."""
    return tuple(_ORDER)


def spec_for_result(tool: str, observation_classes: Iterable[str]) -> ToolSpec:
    """The entry whose result rendering fits: the observation's class wins over the name."""
    names = set(observation_classes)
    for spec in _ORDER:
        if spec.text_arg is None and (spec.observation in names or tool in spec.names):
            return spec
    return GENERIC


def text_tool(tool: str, action_classes: Iterable[str] = ()) -> ToolSpec | None:
    """The `finish` / `think` entry a call is, by its action's class or its name; else None."""
    names = set(action_classes)
    if FINISH.action in names:
        return FINISH
    spec = _BY_NAME.get(tool)
    if spec is not None and spec.text_arg is not None:
        return spec
    for spec in _ORDER:
        if spec.text_arg is not None and spec.action in names:
            return spec
    return None


def present(
    tool: str,
    args: ToolArgs,
    summary: str | None = None,
    *,
    cwd: str,
    is_dir: Callable[[str], bool] = os.path.isdir,
) -> Presentation:
    """(title, kind, locations) of a tool call with (possibly partial) arguments.

    The `tool_call` updates and the `session/request_permission` preview (`confirm.py`)
    both use it, so a request for permission shows the same title, kind and locations as
    the tool call it is about. `locations` are (absolute path, 1-based line or None) pairs.
    """
    spec = lookup(tool)
    return spec.present(tool, args, summary, cwd, is_dir)


def permission_preview(tool: str, args: ToolArgs, cwd: str, read: Reader) -> list[ToolCallContent]:
    """What the user sees before saying yes: the command, or the edit as a diff."""
    return lookup(tool).preview(args, cwd, read)


def rule_scope(tool: str, args: ToolArgs | None, cwd: str) -> tuple[str, str | None]:
    """(tool, target) an "always" answer about this call covers; target None = any use."""
    return lookup(tool).scope(tool, args or {}, cwd)


def tool_family(tool: str) -> str | None:
    """ "terminal", "file_editor" or "task_tracker" for those tools under any of their names
    (the legacy `bash`, `execute_bash`, `str_replace_editor` too), else None."""
    spec = lookup(tool)
    return spec.name if spec in (TERMINAL, FILE_EDITOR, TASK_TRACKER) else None
