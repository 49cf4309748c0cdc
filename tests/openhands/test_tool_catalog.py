"""One place knows each tool (translate/tools.py): title, kind, locations, permission
preview, rule scope and result rendering all come from the catalog, under every name a tool
has, and a new tool is one entry."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import trio

from trio_acp import schema
from trio_acp.openhands.permissions.confirm import ask, preview
from trio_acp.openhands.permissions.policy import ALLOW_ONCE, Rule, RuleBook, Scope, action_scope
from trio_acp.openhands.translate import Translator, present, tool_arguments, tools
from trio_acp.openhands.translate.paths import abs_path
from trio_acp.openhands.translate.tools import GENERIC, ToolSpec, lookup, path_scope, register

ALIASES = [
    ("bash", "terminal", {"command": "make  test"}),
    ("execute_bash", "terminal", {"command": "rm -rf build"}),
    (
        "str_replace_editor",
        "file_editor",
        {"command": "str_replace", "path": "a.txt", "old_str": "one", "new_str": "1"},
    ),
    (
        "str_replace_editor",
        "file_editor",
        {"command": "create", "path": "new.txt", "file_text": "x\n"},
    ),
]


def test_every_tool_name_has_one_entry():
    for name in ("terminal", "file_editor", "task_tracker", "task", "think", "finish"):
        assert lookup(name).name == name
    assert lookup("bash") is lookup("execute_bash") is lookup("terminal")
    assert lookup("str_replace_editor") is lookup("file_editor")
    assert lookup("shouter_shout") is GENERIC and lookup("browser_navigate") is GENERIC
    assert {s.name for s in tools.catalog()} == {
        "terminal",
        "file_editor",
        "task_tracker",
        "task",
        "think",
        "finish",
    }


@pytest.mark.parametrize(("alias", "name", "args"), ALIASES)
def test_aliases_get_the_same_title_preview_and_rule_scope(tmp_path, alias, name, args):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    cwd = str(tmp_path)
    assert present(alias, args, cwd=cwd) == present(name, args, cwd=cwd)
    assert preview(alias, args, cwd, None) == preview(name, args, cwd, None) != []
    # The regression: `bash` used to get the scope "the bash tool" (every command, always).
    assert action_scope(alias, args, cwd) == action_scope(name, args, cwd)
    assert action_scope(alias, args, cwd).target is not None


def test_always_allowing_a_bash_command_allows_only_that_command():
    scope = action_scope("bash", {"command": "make  test"}, "/w")
    assert scope == Scope("terminal", "make test") and scope.label() == "`make test`"
    book = RuleBook()
    book.add(Rule(scope.tool, scope.target, allow=True))
    # The same command under the tool's other names is covered; another command is not.
    assert book.match(action_scope("terminal", {"command": "make test"}, "/w")) is not None
    assert book.match(action_scope("execute_bash", {"command": "make test"}, "/w")) is not None
    assert book.match(action_scope("bash", {"command": "rm -rf /"}, "/w")) is None


def test_preview_and_rule_scope_read_a_file_uri_path_as_the_title_does(tmp_path):
    target = tmp_path / "a b.txt"
    target.write_text("one\n")
    uri = "file://" + str(target).replace(" ", "%20")
    args = {"command": "str_replace", "path": uri, "old_str": "one", "new_str": "1"}
    title, kind, locations = present("file_editor", args, cwd="/elsewhere")
    assert locations == ((str(target), None),)
    (diff,) = preview("str_replace_editor", args, "/elsewhere", None)
    assert isinstance(diff, schema.DiffToolCallContent)
    assert (diff.path, diff.old_text, diff.new_text) == (str(target), "one\n", "1\n")
    assert action_scope("file_editor", args, "/elsewhere") == Scope("file_editor", str(target))


def test_unknown_tools_fall_back_to_the_generic_entry(tmp_path):
    args = {"path": "notes.md", "text": "hi"}
    assert present("mcp_write", args, "Write notes", cwd=str(tmp_path)) == (
        "Write notes",
        "other",
        (),
    )
    assert present("browser_navigate", {}, None, cwd="/w")[1] == "fetch"
    assert action_scope("mcp_write", args, "/w") == Scope("mcp_write", "/w/notes.md")
    assert action_scope("mcp_ping", {}, "/w") == Scope("mcp_ping", None)
    assert preview("mcp_write", args, "/w", "HIGH") == [
        schema.ContentToolCallContent(content=schema.TextContent(text="Security risk: high"))
    ]


def test_result_rendering_follows_the_observation_class_then_the_name():
    assert tools.spec_for_result("anything", ["TerminalObservation", "Observation"]) is lookup(
        "terminal"
    )
    assert tools.spec_for_result("execute_bash", ["Observation"]) is lookup("terminal")
    assert tools.spec_for_result("str_replace_editor", ["Observation"]) is lookup("file_editor")
    assert tools.spec_for_result("mcp_tool", ["MCPToolObservation"]) is GENERIC
    assert tools.text_tool("x", ["FinishAction"]) is lookup("finish")
    assert tools.text_tool("think") is lookup("think") and tools.text_tool("terminal") is None


def test_arguments_are_parsed_once_for_everyone():
    call = SimpleNamespace(tool_call=SimpleNamespace(arguments='{"command": "ls"}'), action=None)
    assert tool_arguments(call) == {"command": "ls"} == tool_arguments('{"command": "ls"}')
    assert tool_arguments("not json") == {"arguments": "not json"}
    assert tool_arguments(SimpleNamespace()) == {}


@pytest.fixture
def scratch_catalog(monkeypatch):
    monkeypatch.setattr(tools, "_BY_NAME", dict(tools._BY_NAME))
    monkeypatch.setattr(tools, "_ORDER", list(tools._ORDER))


def _tc_chunk(rid, call_id, name, args):
    function = SimpleNamespace(name=name, arguments=args)
    delta = SimpleNamespace(tool_calls=[SimpleNamespace(index=0, id=call_id, function=function)])
    return SimpleNamespace(id=rid, choices=[SimpleNamespace(index=0, delta=delta)])


async def test_a_new_tool_is_one_entry(scratch_catalog, tmp_path):
    # The example in translate/tools.py's docstring, as written there.
    register(
        ToolSpec(
            name="files_delete",
            present=lambda tool, args, summary, cwd, is_dir: (
                f"Delete {abs_path(cwd, args.get('path')) or 'a file'}",
                "delete",
                (),
            ),
            title_args=frozenset({"path"}),
            scope=path_scope,
        )
    )
    cwd = str(tmp_path)
    args = {"path": "old.log"}
    assert present("files_delete", args, cwd=cwd)[:2] == (f"Delete {cwd}/old.log", "delete")
    assert action_scope("files_delete", args, cwd) == Scope("files_delete", f"{cwd}/old.log")

    # The translator shows the streamed call with the new title once its path arrived...
    t = Translator(cwd)
    (start,) = t.token(_tc_chunk("r", "c1", "files_delete", '{"pa'))
    assert start.title == "Delete a file"
    (update,) = t.token(_tc_chunk("r", "c1", "files_delete", 'th": "old.log"}'))
    assert update.title == f"Delete {cwd}/old.log" and update.kind == "delete"

    # ...and so does the permission request, with the rule scope in its options.
    client = SimpleNamespace(requests=[])

    async def request_permission(request):
        client.requests.append(request)
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id=ALLOW_ONCE)
        )

    client.request_permission = request_permission
    action = SimpleNamespace(
        tool_name="files_delete",
        tool_call_id="c1",
        tool_call=SimpleNamespace(arguments='{"path": "old.log"}'),
        action=None,
        summary=None,
        security_risk=None,
    )
    session = SimpleNamespace(id="s1", cwd=cwd, client=client)
    scope = action_scope("files_delete", args, cwd)
    assert await ask(session, action, scope, trio.Event()) == ALLOW_ONCE
    (request,) = client.requests
    assert request.tool_call.title == update.title and request.tool_call.kind == "delete"
    assert request.options[1].name == f"Always allow files_delete on {cwd}/old.log"


def test_translation_imports_neither_trio_nor_the_sdk():
    code = (
        "import sys, trio_acp.openhands.translate\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('trio', 'openhands', 'litellm'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
