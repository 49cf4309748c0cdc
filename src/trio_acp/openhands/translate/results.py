"""What a finished tool call shows: its observation as ACP tool call content.

One function per kind of result — a terminal's output (fenced, exit code noted), a file
edit (a diff, with the line it landed on) or view (fenced), a task tracker's plan (an
`AgentPlanUpdate`), anything else (its text and images). The tool catalog (`tools.py`)
says which one each tool uses. Pure: no trio, no `openhands.*`.
"""

from __future__ import annotations

from trio_acp import schema
from trio_acp.openhands.translate.content import (
    content_item,
    diff_item,
    image_block,
    text_item,
    text_of,
)
from trio_acp.openhands.translate.paths import abs_path
from trio_acp.openhands.translate.shapes import Json, SdkObject, ToolArgs
from trio_acp.openhands.translate.text import MAX_TEXT_BYTES, cap_text, fence, strip_ansi, utf8_len
from trio_acp.schema import SessionUpdate, ToolCallContent

__all__ = ["edit_line", "editor_payload", "generic_payload", "plan_updates", "terminal_payload"]

Locations = list[tuple[str, int | None]]

_PLAN_STATUS = {
    "todo": "pending",
    "pending": "pending",
    "in_progress": "in_progress",
    "done": "completed",
    "completed": "completed",
}


def terminal_payload(observation: SdkObject) -> tuple[list[ToolCallContent] | None, Json]:
    text = strip_ansi(text_of(observation))
    metadata = getattr(observation, "metadata", None)
    failed = getattr(observation, "is_error", False) is True
    exit_code = getattr(observation, "exit_code", None)
    if exit_code is None and not failed:
        exit_code = getattr(metadata, "exit_code", None)
    timed_out = bool(getattr(observation, "timeout", False))
    if failed:
        # A command that failed to run (refused, cancelled, killed at its timeout) is not
        # "still running": the SDK's -1 only means that for a soft timeout, never an error.
        note = f"[exit code {exit_code}]" if isinstance(exit_code, int) and exit_code > 0 else ""
        if exit_code == -1:
            exit_code = None
    elif exit_code == -1 or timed_out:
        note = "[the command is still running; no exit code yet]"
    elif isinstance(exit_code, int) and exit_code != 0:
        note = f"[exit code {exit_code}]"
    else:
        note = ""
    save_dir = getattr(observation, "full_output_save_dir", None)
    content: list[ToolCallContent] | None = None
    if text.strip():
        where = save_dir if isinstance(save_dir, str) else None
        text = cap_text(text, MAX_TEXT_BYTES - 64, where=where)
        # A command that never gave an exit code and failed (refused by the client,
        # cancelled, a tool's own error) has a reason to show, not output: plain text.
        said = text if failed and exit_code is None and not timed_out else fence(text, "console")
        content = [text_item(said + (f"\n\n{note}" if note else ""))]
    elif note:
        content = [text_item(note)]
    raw_output: dict[str, Json] = {"exit_code": exit_code}
    if timed_out:
        raw_output["timed_out"] = True
    working_dir = getattr(metadata, "working_dir", None)
    if isinstance(working_dir, str) and working_dir:
        raw_output["working_dir"] = working_dir
    return content, raw_output


def editor_payload(
    observation: SdkObject, args: ToolArgs, cwd: str
) -> tuple[list[ToolCallContent] | None, Json, Locations | None]:
    command = getattr(observation, "command", None) or args.get("command")
    raw_path = getattr(observation, "path", None) or args.get("path")
    path = abs_path(cwd, raw_path)
    new = getattr(observation, "new_content", None)
    old = getattr(observation, "old_content", None)
    failed = bool(getattr(observation, "is_error", False))
    if not failed and command != "view" and path and isinstance(new, str):
        existed = getattr(observation, "prev_exist", True)
        old_text = old if isinstance(old, str) and existed else None
        line = edit_line(command, args, new)
        locations = [(path, line)]
        size = utf8_len(new) + (utf8_len(old_text) if old_text else 0)
        if size > MAX_TEXT_BYTES:
            note = (
                f"(diff of {path} not shown: {size} bytes is over the "
                f"{MAX_TEXT_BYTES}-byte limit of one update)\n\n{text_of(observation)}"
            )
            return [text_item(cap_text(note))], None, locations
        return [diff_item(path, old_text, new)], None, locations
    text = strip_ansi(text_of(observation))
    if not text.strip():
        return None, None, None
    if command == "view" and not failed:
        return [text_item(fence(cap_text(text, MAX_TEXT_BYTES - 64)))], None, None
    return [text_item(cap_text(text))], None, None


def generic_payload(observation: SdkObject) -> tuple[list[ToolCallContent] | None, Json]:
    items: list[ToolCallContent] = []
    texts: list[str] = []
    for c in getattr(observation, "content", None) or []:
        text = getattr(c, "text", None)
        if isinstance(text, str):
            texts.append(text)
            continue
        for url in getattr(c, "image_urls", None) or []:
            items.append(content_item(image_block(url)))
    text = "".join(texts)
    if text.strip():
        items.insert(0, text_item(cap_text(text)))
    return items or None, None


def plan_updates(observation: SdkObject) -> list[SessionUpdate]:
    tasks = getattr(observation, "task_list", None)
    command = getattr(observation, "command", None)
    if tasks is None or getattr(observation, "is_error", False):
        return []
    if not tasks and command != "plan":
        return []
    entries = [
        schema.PlanEntry(
            content=str(getattr(t, "title", "") or ""),
            priority="medium",
            status=_PLAN_STATUS.get(str(getattr(t, "status", "todo")), "pending"),
        )
        for t in tasks
    ]
    return [schema.AgentPlanUpdate(entries=entries)]


def edit_line(command: SdkObject, args: ToolArgs, new: str) -> int | None:
    """1-based line where an edit landed, when the arguments tell."""
    if command == "insert":
        insert_line = args.get("insert_line")
        return insert_line + 1 if isinstance(insert_line, int) and insert_line >= 0 else None
    if command == "str_replace":
        new_str = args.get("new_str")
        if isinstance(new_str, str) and new_str:
            at = new.find(new_str)
            if at >= 0:
                return new.count("\n", 0, at) + 1
    if command == "create":
        return 1
    return None
