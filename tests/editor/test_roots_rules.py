"""Permission rules and the session's roots: a rule for a whole tool covers files inside the
roots (cwd + additionalDirectories) only; a rule for an exact path stays the user's answer."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import trio

from trio_acp import schema
from trio_acp.openhands.editor.session_roots import SessionRoots
from trio_acp.openhands.permissions.confirm import confirm_pending
from trio_acp.openhands.permissions.policy import ALLOW_ONCE, Rule, RuleBook

pytest.importorskip("openhands.sdk")
from openhands.sdk.event import ActionEvent
from openhands.sdk.llm import MessageToolCall


def _edit(path: str, call_id: str) -> ActionEvent:
    args = {"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"}
    return ActionEvent(
        thought=[],
        action=None,
        tool_name="file_editor",
        tool_call_id=call_id,
        tool_call=MessageToolCall(
            id=call_id, name="file_editor", arguments=json.dumps(args), origin="completion"
        ),
        llm_response_id="r-" + call_id,
    )


class _Client:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def request_permission(self, request: Any) -> Any:
        self.asked.append(request.tool_call.tool_call_id)
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id=ALLOW_ONCE)
        )


class _Session:
    def __init__(self, roots: SessionRoots, rules: list[Rule]) -> None:
        self.id = uuid.uuid4()
        self.cwd = roots.cwd
        self.roots = roots
        self.rules = RuleBook()
        for rule in rules:
            self.rules.add(rule)
        self.client = _Client()

    async def flush_turn_updates(self) -> None:
        pass

    async def send_update(self, update: Any, *, at_once: bool = False) -> None:
        pass


class _Conv:
    def __init__(self, actions: list[Any]) -> None:
        self.actions = actions

    async def pending_actions(self) -> list[Any]:
        return self.actions

    async def reject_pending(self, reason: str) -> None:
        raise AssertionError(f"nothing is rejected here: {reason}")


async def test_a_whole_tool_reject_rule_holds_outside_the_roots_too():
    roots = SessionRoots("/work/app")
    session = _Session(roots, [Rule("file_editor", None, allow=False)])
    rejected: list[str] = []

    class Conv(_Conv):
        async def reject_pending(self, reason: str) -> None:
            rejected.append(reason)

    with trio.fail_after(10):
        await confirm_pending(session, Conv([_edit("/tmp/elsewhere.txt", "c1")]), trio.Event())
    assert session.client.asked == [] and len(rejected) == 1


async def test_a_whole_tool_rule_stops_at_the_roots_an_exact_rule_does_not():
    roots = SessionRoots("/work/app", ("/work/lib",))
    session = _Session(
        roots,
        [Rule("file_editor", None, allow=True), Rule("file_editor", "/etc/exact.conf", allow=True)],
    )
    actions = [
        _edit("/work/app/main.py", "in-cwd"),
        _edit("/work/lib/util.py", "in-extra-root"),
        _edit("/tmp/elsewhere.txt", "outside"),
        _edit("/etc/exact.conf", "exact-rule"),
    ]
    with trio.fail_after(10):
        assert await confirm_pending(session, _Conv(actions), trio.Event()) == "continue"
    assert session.client.asked == ["outside"]
