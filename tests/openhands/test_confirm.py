"""The permission request shows each tool call exactly as its `tool_call` did.

`confirm.ask` and the translator both take title, kind and locations from
`translate.present`; this checks they agree for every tool the translator knows (the legacy
names too) and that each request stands on its own (title, kind, name; locations for files).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import trio

# Stand-ins for the SDK's classes (fast layer, tests/conftest.py);
# test_translate_on_the_sdk.py runs these same tests on the real classes.
from _sdk_standins import ActionEvent, MessageToolCall

from trio_acp import schema
from trio_acp.openhands.permissions.confirm import ask
from trio_acp.openhands.permissions.policy import ALLOW_ONCE, action_scope
from trio_acp.openhands.translate import Translator
from trio_acp.testing.wire_check import validate_type

CASES = [
    ("terminal", {"command": "ls -la /tmp"}, None),
    ("bash", {"command": "make test"}, None),
    ("execute_bash", {"command": "", "is_input": True}, None),
    ("file_editor", {"command": "create", "path": "new.txt", "file_text": "x\n"}, None),
    (
        "file_editor",
        {"command": "str_replace", "path": "a.txt", "old_str": "a", "new_str": "b"},
        None,
    ),
    (
        "file_editor",
        {"command": "insert", "path": "a.txt", "insert_line": 0, "new_str": "top"},
        None,
    ),
    ("file_editor", {"command": "view", "path": "a.txt", "view_range": [2, 4]}, None),
    ("file_editor", {"command": "view", "path": "sub"}, None),
    ("str_replace_editor", {"command": "undo_edit", "path": "a.txt"}, None),
    ("task_tracker", {"command": "plan", "task_list": [{"title": "t"}]}, None),
    ("task_tracker", {"command": "view"}, None),
    ("shouter_shout", {"text": "hi"}, "Shout hi through MCP"),
    ("fetch_fetch", {"url": "https://example.com"}, None),
    ("browser_navigate", {"url": "https://example.com"}, "Open example.com"),
]


def _action(tool: str, args: dict, summary: str | None, call_id: str) -> ActionEvent:
    return ActionEvent(
        thought=[],
        action=None,
        tool_name=tool,
        tool_call_id=call_id,
        tool_call=MessageToolCall(
            id=call_id, name=tool, arguments=json.dumps(args), origin="completion"
        ),
        llm_response_id="r-" + call_id,
        summary=summary,
    )


class _Client:
    def __init__(self) -> None:
        self.requests: list[schema.RequestPermissionRequest] = []

    async def request_permission(self, request):
        self.requests.append(request)
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id=ALLOW_ONCE)
        )


@pytest.mark.parametrize(("tool", "args", "summary"), CASES)
async def test_the_request_shows_what_the_tool_call_showed(tmp_path, tool, args, summary):
    (tmp_path / "a.txt").write_text("one\ntwo\nthree\nfour\n")
    (tmp_path / "sub").mkdir()
    cwd = str(tmp_path)
    event = _action(tool, args, summary, "c1")
    (start,) = Translator(cwd).event(event)
    assert isinstance(start, schema.ToolCallStart)

    client = _Client()
    session = SimpleNamespace(id="s1", cwd=cwd, client=client)
    decision = await ask(session, event, action_scope(tool, args, cwd), trio.Event())
    assert decision == ALLOW_ONCE
    (request,) = client.requests
    call = request.tool_call
    assert (call.title, call.kind, call.locations, call.name) == (
        start.title,
        start.kind,
        start.locations,
        start.name,
    )
    assert call.title and call.kind and call.name == tool
    if args.get("path"):
        assert args["path"] in call.title
        if args["path"] != "sub":  # a directory listing points at no file
            assert call.locations and call.locations[0].path == f"{cwd}/{args['path']}"
    if args.get("command") and tool in ("terminal", "bash"):
        assert args["command"] in call.title
    assert validate_type("RequestPermissionRequest", schema.to_wire(request)) == []
