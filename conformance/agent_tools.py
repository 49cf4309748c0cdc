"""The agent's own tools, picked from what it offers its model.

An agent sends its tools to the model in every request (the ``tools`` array of an OpenAI
chat-completions request: ``{"type": "function", "function": {"name", "description",
"parameters": <JSON Schema>}}``).  The suite's tool scenarios (``scenarios.py``) need a
shell and a way to write, edit and read a file; every agent names and shapes these its own
way (OpenHands: ``terminal`` and the multi-command ``file_editor``; others: ``bash``,
``run_shell_command``, ``write_file``, ``edit`` with ``old_string``/``new_string``,
``read_file``...).  This module recognises them by name and by the shape of their
parameters and builds each call's arguments for that tool's own schema, so the same
scenario drives any agent that has such tools.

Pure: no I/O, no Trio, no SDK (a scripted-model scenario calls it for each request).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = ["AgentTools", "Call", "Tool", "pick_tools"]

#: Parameter names, most usual first, for each thing a call has to say.
#: Not "code": a TypeScript or Python sandbox is not a shell.
COMMAND_KEYS = ("command", "cmd", "script", "shell_command", "commandLine")
PATH_KEYS = (
    "path",
    "file_path",
    "filePath",
    "absolute_path",
    "filename",
    "file",
    "target_file",
    "filepath",
)
CONTENT_KEYS = ("content", "file_text", "contents", "text", "new_content", "data")
OLD_KEYS = ("old_str", "old_string", "oldString", "old_text", "oldText", "search", "find")
NEW_KEYS = ("new_str", "new_string", "newString", "new_text", "newText", "replace")
#: A description of the call that some tools require (qwen-code's, opencode's shell).
DESCRIPTION_KEYS = ("description", "summary", "explanation", "reason")

_SHELL_NAME = re.compile(r"bash|shell|terminal|exec|command|run|sh$|cmd", re.IGNORECASE)
_WRITE_NAME = re.compile(r"write|create|save|put", re.IGNORECASE)
_EDIT_NAME = re.compile(r"edit|replace|patch|modify|update", re.IGNORECASE)
_READ_NAME = re.compile(r"read|view|cat|open|get_file", re.IGNORECASE)
_NOT_A_FILE_TOOL = re.compile(r"dir|folder|glob|grep|search_files|list|ls$|tree", re.IGNORECASE)
#: The aider-style block a "search_replace" tool takes in one content string.
_BLOCK_FORMAT = re.compile(r"<{5,}\s*SEARCH", re.IGNORECASE)


@attrs.frozen
class Tool:
    """One function the agent offers its model."""

    name: str
    description: str
    #: The JSON Schema of its arguments (an object schema; {} when the agent sent none).
    parameters: Mapping[str, Any]

    @property
    def properties(self) -> Mapping[str, Any]:
        props = self.parameters.get("properties")
        return props if isinstance(props, Mapping) else {}

    @property
    def required(self) -> tuple[str, ...]:
        req = self.parameters.get("required")
        return tuple(r for r in req if isinstance(r, str)) if isinstance(req, list) else ()

    def key(self, candidates: Sequence[str], *, types: tuple[str, ...] = ("string",)) -> str | None:
        """The first of `candidates` that is a parameter of one of `types`."""
        for name in candidates:
            spec = self.properties.get(name)
            if isinstance(spec, Mapping) and _accepts(spec, types):
                return name
        return None

    def enum(self, name: str) -> tuple[str, ...]:
        spec = self.properties.get(name)
        values = spec.get("enum") if isinstance(spec, Mapping) else None
        return tuple(v for v in values if isinstance(v, str)) if isinstance(values, list) else ()

    @classmethod
    def from_openai(cls, entry: object) -> Tool | None:
        if not isinstance(entry, Mapping):
            return None
        fn = entry.get("function") if entry.get("type", "function") == "function" else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            return None
        params = fn.get("parameters")
        description = fn.get("description")
        return cls(
            name=fn["name"],
            description=description if isinstance(description, str) else "",
            parameters=params if isinstance(params, Mapping) else {},
        )


def _accepts(spec: Mapping[str, Any], types: tuple[str, ...]) -> bool:
    declared = spec.get("type")
    if declared is None:
        # anyOf/oneOf [string, null] and friends: accept when one branch has the type.
        branches = [b for k in ("anyOf", "oneOf") for b in spec.get(k) or []]
        return not branches or any(isinstance(b, Mapping) and _accepts(b, types) for b in branches)
    if isinstance(declared, list):
        return any(t in types for t in declared)
    return declared in types


@attrs.frozen
class Call:
    """A tool call: the tool's name and its arguments."""

    name: str
    arguments: dict[str, Any]


@attrs.frozen
class AgentTools:
    """The tools the scenarios use, as found in one model request."""

    shell: Tool | None = None
    #: A multi-command editor (``command`` in create / str_replace / view), OpenHands and
    #: Anthropic style: one tool writes, edits and reads.
    editor: Tool | None = None
    write: Tool | None = None
    edit: Tool | None = None
    read: Tool | None = None
    #: The tool that ends the turn, for agents whose loop only ends on it (OpenHands).
    finish: Tool | None = None

    # --- calls ---------------------------------------------------------------------------

    def run(self, command: str, summary: str) -> Call | None:
        if self.shell is None:
            return None
        key = self.shell.key(COMMAND_KEYS, types=("string", "array"))
        assert key is not None
        spec = self.shell.properties[key]
        value: object = command
        if not _accepts(spec, ("string",)):  # an argv array (codex-style shell)
            value = ["bash", "-lc", command]
        return _call(self.shell, {key: value}, summary)

    def create(self, path: str, text: str, summary: str) -> Call | None:
        if self.editor is not None:
            return _call(
                self.editor, {"command": "create", "path": path, "file_text": text}, summary
            )
        if self.write is None:
            return self._shell_write(path, text, summary)
        args = {_path_key(self.write): path, _content_key(self.write): text}
        return _call(self.write, args, summary)

    def _shell_write(self, path: str, text: str, summary: str) -> Call | None:
        # No file tool (e.g. an agent that offers its write tool only to clients with
        # fs.writeTextFile): the shell writes the file, so the turn still edits it.
        return self.run(f"printf '%s' {shlex.quote(text)} > {shlex.quote(path)}", summary)

    def replace(self, path: str, old: str, new: str, whole: str, summary: str) -> Call | None:
        """Replace `old` by `new` in `path`; `whole` is the file's text afterwards, for agents
        whose only way to change a file is to write it again."""
        if self.editor is not None:
            args = {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
            return _call(self.editor, args, summary)
        if self.edit is not None:
            tool = self.edit
            old_key, new_key = tool.key(OLD_KEYS), tool.key(NEW_KEYS)
            if old_key and new_key:
                args = {_path_key(tool): path, old_key: old, new_key: new}
            else:  # one content string of SEARCH/REPLACE blocks
                block = f"<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE"
                args = {_path_key(tool): path, _content_key(tool): block}
            return _call(tool, args, summary)
        if self.write is not None:
            args = {_path_key(self.write): path, _content_key(self.write): whole}
            overwrite = self.write.key(("overwrite", "force"), types=("boolean",))
            if overwrite:
                args[overwrite] = True
            return _call(self.write, args, summary)
        return self._shell_write(path, whole, summary) if whole else None

    def view(self, path: str, summary: str) -> Call | None:
        if self.editor is not None:
            return _call(self.editor, {"command": "view", "path": path}, summary)
        if self.read is None:
            return None
        return _call(self.read, {_path_key(self.read): path}, summary)

    def done(self, message: str) -> Call | None:
        if self.finish is None:
            return None
        key = self.finish.key(("message", "result", "summary", "text", "content")) or "message"
        return Call(self.finish.name, {key: message})

    def describe(self) -> str:
        found = {
            role: getattr(self, role).name
            for role in ("shell", "editor", "write", "edit", "read", "finish")
            if getattr(self, role) is not None
        }
        return ", ".join(f"{role}={name}" for role, name in found.items()) or "none"


def _path_key(tool: Tool) -> str:
    key = tool.key(PATH_KEYS)
    assert key is not None  # only tools with a path parameter are picked
    return key


def _content_key(tool: Tool) -> str:
    key = tool.key(CONTENT_KEYS)
    assert key is not None
    return key


def _call(tool: Tool, args: dict[str, Any], summary: str) -> Call:
    """`args` plus what the tool's schema requires besides (and OpenHands' `summary` and
    `security_risk`, which its agents expect on every action)."""
    out = dict(args)
    props = tool.properties
    if "summary" in props:
        out.setdefault("summary", summary)
    if "LOW" in tool.enum("security_risk"):
        out.setdefault("security_risk", "LOW")
    for name in tool.required:
        if name in out:
            continue
        spec = props.get(name)
        spec = spec if isinstance(spec, Mapping) else {}
        if name in DESCRIPTION_KEYS and _accepts(spec, ("string",)):
            out[name] = summary
        elif "default" in spec:
            out[name] = spec["default"]
        elif tool.enum(name):
            out[name] = tool.enum(name)[0]
        elif _accepts(spec, ("boolean",)):
            out[name] = False
        elif _accepts(spec, ("integer", "number")):
            minimum = spec.get("minimum")
            out[name] = minimum if isinstance(minimum, int | float) else 1
        elif _accepts(spec, ("string",)):
            out[name] = summary
    return Call(tool.name, out)


# --- recognising the tools --------------------------------------------------------------


def _is_editor(tool: Tool) -> bool:
    commands = set(tool.enum("command"))
    return {"create", "str_replace", "view"} <= commands and tool.key(PATH_KEYS) is not None


def _shell_score(tool: Tool) -> int:
    if tool.key(COMMAND_KEYS, types=("string", "array")) is None or _is_editor(tool):
        return 0
    score = 1
    if _SHELL_NAME.search(tool.name):
        score += 2
    if re.search(r"shell|bash|command line|terminal", tool.description, re.IGNORECASE):
        score += 1
    if tool.key(PATH_KEYS) is not None or tool.key(CONTENT_KEYS) is not None:
        score -= 2  # a file tool that happens to take a "command"
    return score if score >= 2 else 0


def _file_tool(tool: Tool) -> bool:
    return tool.key(PATH_KEYS) is not None and not _NOT_A_FILE_TOOL.search(tool.name)


def _edit_score(tool: Tool) -> int:
    if not _file_tool(tool):
        return 0
    if tool.key(OLD_KEYS) and tool.key(NEW_KEYS):
        return 3 if _EDIT_NAME.search(tool.name) else 2
    if tool.key(CONTENT_KEYS) and _BLOCK_FORMAT.search(tool.description):
        return 1
    return 0


def _write_score(tool: Tool) -> int:
    if not _file_tool(tool) or tool.key(CONTENT_KEYS) is None or _edit_score(tool):
        return 0
    if _EDIT_NAME.search(tool.name) and not _WRITE_NAME.search(tool.name):
        return 0  # e.g. an "edit" whose content is a patch
    return 2 if _WRITE_NAME.search(tool.name) else 1


def _read_score(tool: Tool) -> int:
    if not _file_tool(tool) or tool.key(CONTENT_KEYS) or tool.key(OLD_KEYS):
        return 0
    return 2 if _READ_NAME.search(tool.name) else 0


def _best(tools: Iterable[Tool], score: Any) -> Tool | None:
    ranked = [(score(t), -i, t) for i, t in enumerate(tools)]
    ranked = [r for r in ranked if r[0] > 0]
    return max(ranked, key=lambda r: (r[0], r[1]))[2] if ranked else None


def pick_tools(request_tools: object) -> AgentTools:
    """The shell, file and finish tools among a request's ``tools`` (any may be missing)."""
    entries = request_tools if isinstance(request_tools, list) else []
    tools = [t for t in (Tool.from_openai(e) for e in entries) if t is not None]
    editor = next((t for t in tools if _is_editor(t)), None)
    finish = next(
        (t for t in tools if t.name in ("finish", "attempt_completion", "task_complete")), None
    )
    return AgentTools(
        shell=_best(tools, _shell_score),
        editor=editor,
        write=None if editor else _best(tools, _write_score),
        edit=None if editor else _best(tools, _edit_score),
        read=None if editor else _best(tools, _read_score),
        finish=finish,
    )
