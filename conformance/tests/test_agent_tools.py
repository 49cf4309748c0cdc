"""The scripted model calls each agent's own tools (`agent_tools.py`, `scenarios.py`).

The tool lists below have the names and parameters the agents offered their model in the
comparison of `conformance/PEERS.md` (descriptions shortened); OpenHands' are trio-acp's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from trio_acp.testing.scenarios import BUILTIN_SCENARIOS
from trio_acp.testing.script import Reply, RequestContext
from trio_acp_conformance.agent_tools import pick_tools
from trio_acp_conformance.scenarios import (
    SUITE_SCENARIOS,
    edit_prompt,
    review_prompt,
    shell_prompt,
    sleep_prompt,
)


def tool(name: str, summary: str = "", required: tuple[str, ...] = (), /, **props: Any):
    properties = {k: (v if isinstance(v, dict) else {"type": v}) for k, v in props.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": summary,
            "parameters": {"type": "object", "properties": properties, "required": list(required)},
        },
    }


RISK = {"type": "string", "enum": ["UNKNOWN", "LOW", "MEDIUM", "HIGH"]}
EDITOR_COMMANDS = {
    "type": "string",
    "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
}

OPENHANDS = [
    tool(
        "terminal",
        "Execute a shell command in the terminal",
        ("command",),
        security_risk=RISK,
        summary="string",
        command="string",
        is_input="boolean",
        timeout="number",
        reset="boolean",
    ),
    tool(
        "file_editor",
        "Custom editing tool",
        ("command", "path"),
        security_risk=RISK,
        summary="string",
        command=EDITOR_COMMANDS,
        path="string",
        file_text="string",
        old_str="string",
        new_str="string",
        insert_line="integer",
        view_range={"type": "array", "items": {"type": "integer"}},
    ),
    tool(
        "task_tracker",
        "Plan tasks",
        ("command",),
        command={"type": "string", "enum": ["view", "plan"]},
    ),
    tool("task", "Delegate to a sub-agent", ("prompt",), prompt="string", subagent_type="string"),
    tool(
        "finish",
        "Signals the completion of the current task",
        ("message",),
        summary="string",
        message="string",
    ),
    tool("think", "Think", ("thought",), thought="string"),
]

QWEN_CODE = [
    tool(
        "edit",
        "Replaces text within a file",
        ("file_path", "old_string", "new_string"),
        file_path="string",
        old_string="string",
        new_string="string",
        replace_all="boolean",
    ),
    tool("glob", "Find files", ("pattern",), pattern="string", path="string"),
    tool(
        "notebook_edit",
        "Edit a notebook",
        ("notebook_path",),
        notebook_path="string",
        new_source="string",
    ),
    tool(
        "read_file",
        "Reads a file",
        ("file_path",),
        file_path="string",
        offset={"type": ["integer", "null"]},
    ),
    tool(
        "run_shell_command",
        "Executes a given shell command as `bash -c <command>`",
        ("command",),
        command="string",
        is_background="boolean",
        timeout="integer",
        description="string",
        directory="string",
    ),
    tool(
        "tool_call", "Call a tool by name", ("name", "arguments"), name="string", arguments="object"
    ),
    tool(
        "write_file",
        "Writes content to a file",
        ("file_path", "content"),
        file_path="string",
        content="string",
        record_as_artifact="boolean",
    ),
]

OPENCODE = [
    tool(
        "bash",
        "Executes a given bash command",
        ("command",),
        command="string",
        timeout="integer",
        workdir="string",
    ),
    tool(
        "edit",
        "Performs exact string replacements in files",
        ("filePath", "oldString", "newString"),
        filePath="string",
        oldString="string",
        newString="string",
        replaceAll="boolean",
    ),
    tool("glob", "Fast file pattern matching", ("pattern",), pattern="string", path="string"),
    tool("grep", "Search file contents", ("pattern",), pattern="string", path="string"),
    tool("read", "Reads a file", ("filePath",), filePath="string", offset="integer"),
    tool(
        "task",
        "Launch a new agent; runs a shell command if given",
        ("description", "prompt", "subagent_type"),
        description="string",
        prompt="string",
        subagent_type="string",
        command="string",
    ),
    tool("write", "Writes a file", ("content", "filePath"), content="string", filePath="string"),
]

FAST_AGENT = [
    tool(
        "bash",
        "Run one shell command in bash.",
        ("command",),
        command="string",
        run_in_background="boolean",
    ),
    tool(
        "process",
        "Manage processes returned by bash.",
        (),
        process_id="string",
        action={"type": "string", "enum": ["list", "status", "wait", "stop"]},
    ),
    tool(
        "read_text_file",
        "Read content from a text file.",
        ("path",),
        path="string",
        line="integer",
        limit="integer",
    ),
    tool(
        "write_text_file",
        "Write content to a text file.",
        ("path", "content"),
        path="string",
        content="string",
    ),
    tool(
        "edit_file",
        "Create a missing text file or edit an existing one",
        ("path", "new_string"),
        path="string",
        old_string="string",
        new_string="string",
        replace_all="boolean",
    ),
]

MISTRAL_VIBE = [
    tool("run_typescript", "Executes TypeScript code in a sandbox", ("code",), code="string"),
    tool("read_file", "Read a text file", ("path",), path="string", offset="integer"),
    tool(
        "write_file",
        "Create or overwrite a UTF-8 file.",
        ("path", "content"),
        path="string",
        content="string",
    ),
    tool(
        "edit",
        "Exact string replacement in a file.",
        ("file_path", "old_string", "new_string"),
        file_path="string",
        old_string="string",
        new_string="string",
        replace_all="boolean",
    ),
    tool(
        "bash",
        "Run a shell command and capture stdout",
        ("command",),
        command="string",
        timeout_seconds="integer",
    ),
    tool(
        "unified_harness_scratchpad",
        "Read and write files in your scratchpad",
        ("action",),
        action={"type": "string", "enum": ["read", "write", "list"]},
        path={},
        content={},
    ),
]


#: What the suite's model serves: the built-in scenarios, the suite's own on top.
SERVED = {**BUILTIN_SCENARIOS, **SUITE_SCENARIOS}


def replies(prompt: str, tools: list[dict[str, Any]] | None, steps: int = 4) -> list[Reply]:
    """The model's reply at each step of the prompt's turn (tool results in between)."""
    name = prompt.split("]", 1)[0].removeprefix("[scenario:")
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    out = []
    for _ in range(steps):
        body = {"messages": messages, **({"tools": tools} if tools is not None else {})}
        reply = SERVED[name].reply_for(RequestContext.from_body(body))
        out.append(reply)
        messages = [*messages, {"role": "assistant", "content": reply.text}]
        messages.append({"role": "tool", "content": "ok"})
    return out


def calls(prompt: str, tools: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (c.name, json.loads(c.arguments_json()))
        for r in replies(prompt, tools)
        for c in r.tool_calls
    ]


PROMPTS = [
    shell_prompt("touch /tmp/marker"),
    sleep_prompt(30),
    edit_prompt("/work/a.txt"),
    review_prompt("/work/b.py", "'unsaved'", "'edited'"),
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_openhands_agents_get_the_calls_they_always_got(prompt):
    # trio-acp's conformance results stay as they were: the same replies as the built-in
    # OpenHands scenarios, step by step.
    name = prompt.split("]", 1)[0].removeprefix("[scenario:")
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    for _ in range(4):
        ctx = RequestContext.from_body({"messages": messages, "tools": OPENHANDS})
        assert SERVED[name].reply_for(ctx) == BUILTIN_SCENARIOS[name].reply_for(ctx)
        messages = [
            *messages,
            {"role": "assistant", "content": "x"},
            {"role": "tool", "content": "ok"},
        ]


def test_qwen_code():
    assert calls(shell_prompt("touch /m"), QWEN_CODE) == [
        ("run_shell_command", {"command": "touch /m"})
    ]
    assert calls(edit_prompt("/w/a.txt"), QWEN_CODE) == [
        ("write_file", {"file_path": "/w/a.txt", "content": "hello world\n"}),
        ("edit", {"file_path": "/w/a.txt", "old_string": "world", "new_string": "trio"}),
    ]
    assert calls(review_prompt("/w/b.py", "x", "y"), QWEN_CODE) == [
        ("read_file", {"file_path": "/w/b.py"}),
        ("edit", {"file_path": "/w/b.py", "old_string": "x", "new_string": "y"}),
    ]
    # No finish tool: the turn ends on a text reply after the tool round.
    shell = replies(shell_prompt("touch /m"), QWEN_CODE)
    assert shell[1] == Reply(text="I ran the command in the terminal.")


def test_opencode():
    assert calls(sleep_prompt(5), OPENCODE) == [("bash", {"command": "sleep 5"})]
    assert calls(edit_prompt("/w/a.txt"), OPENCODE) == [
        ("write", {"filePath": "/w/a.txt", "content": "hello world\n"}),
        ("edit", {"filePath": "/w/a.txt", "oldString": "world", "newString": "trio"}),
    ]
    assert calls(review_prompt("/w/b.py", "x", "y"), OPENCODE)[0] == (
        "read",
        {"filePath": "/w/b.py"},
    )


def test_fast_agent():
    assert calls(shell_prompt("echo hi"), FAST_AGENT) == [("bash", {"command": "echo hi"})]
    assert calls(edit_prompt("/w/a.txt"), FAST_AGENT) == [
        ("write_text_file", {"path": "/w/a.txt", "content": "hello world\n"}),
        ("edit_file", {"path": "/w/a.txt", "old_string": "world", "new_string": "trio"}),
    ]
    assert calls(review_prompt("/w/b.py", "x", "y"), FAST_AGENT)[0] == (
        "read_text_file",
        {"path": "/w/b.py"},
    )


def test_mistral_vibe():
    # Its TypeScript sandbox is not the shell; its scratchpad is not the workspace's files.
    assert calls(shell_prompt("echo hi"), MISTRAL_VIBE) == [("bash", {"command": "echo hi"})]
    assert calls(edit_prompt("/w/a.txt"), MISTRAL_VIBE) == [
        ("write_file", {"path": "/w/a.txt", "content": "hello world\n"}),
        ("edit", {"file_path": "/w/a.txt", "old_string": "world", "new_string": "trio"}),
    ]


def test_other_shapes():
    # A shell taking argv, a required description, and an enum with a default.
    argv = tool(
        "shell",
        "Runs a command",
        ("command", "description", "mode"),
        command={"type": "array", "items": {"type": "string"}},
        description="string",
        mode={"type": "string", "enum": ["fast", "safe"]},
    )
    assert calls(shell_prompt("touch /m"), [argv]) == [
        (
            "shell",
            {
                "command": ["bash", "-lc", "touch /m"],
                "description": "Run a shell command",
                "mode": "fast",
            },
        )
    ]
    # Edits as SEARCH/REPLACE blocks in one content string.
    blocks = tool(
        "search_replace",
        "Apply <<<<<<< SEARCH / ======= / >>>>>>> REPLACE blocks",
        ("file_path", "content"),
        file_path="string",
        content="string",
    )
    write = tool(
        "write_file",
        "Create a file",
        ("path", "content", "overwrite"),
        path="string",
        content="string",
        overwrite="boolean",
    )
    [create, edit] = calls(edit_prompt("/w/a.txt"), [blocks, write])
    assert create == (
        "write_file",
        {"path": "/w/a.txt", "content": "hello world\n", "overwrite": False},
    )
    assert edit == (
        "search_replace",
        {
            "file_path": "/w/a.txt",
            "content": "<<<<<<< SEARCH\nworld\n=======\ntrio\n>>>>>>> REPLACE",
        },
    )
    # Only a write tool: the edit writes the whole new text, overwriting.
    assert calls(edit_prompt("/w/a.txt"), [write])[1] == (
        "write_file",
        {"path": "/w/a.txt", "content": "hello trio\n", "overwrite": True},
    )


def test_missing_tools_are_said_not_called():
    # No tools at all (a title request, or an agent without tools): text, no call.
    for prompt in PROMPTS:
        first = replies(prompt, None)[0]
        assert first.tool_calls == ()
        assert "offers no" in first.text
    only_read = [FAST_AGENT[2]]
    [create, *_] = replies(edit_prompt("/w/a.txt"), only_read)
    assert create.tool_calls == () and "no file tool" in create.text
    assert pick_tools(only_read).describe() == "read=read_text_file"


def test_without_file_tools_the_shell_writes_the_file():
    # fast-agent offers no write tool to a client without fs.writeTextFile.
    only_shell = [FAST_AGENT[0], FAST_AGENT[2]]
    assert calls(edit_prompt("/w/a b.txt"), only_shell) == [
        ("bash", {"command": "printf '%s' 'hello world\n' > '/w/a b.txt'"}),
        ("bash", {"command": "printf '%s' 'hello trio\n' > '/w/a b.txt'"}),
    ]
    # A review needs a real replacement: no whole-file rewrite of a text it never saw.
    assert calls(review_prompt("/w/b.py", "x", "y"), only_shell) == [
        ("read_text_file", {"path": "/w/b.py"})
    ]
