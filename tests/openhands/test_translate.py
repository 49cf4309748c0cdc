"""Translator: SDK events and litellm stream chunks -> ACP session updates.

Every update produced here is also encoded with `to_wire` and validated against the official
ACP v1 JSON schema (`$defs/SessionUpdate`).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

# The SDK's classes, as stand-ins: this module is in the fast layer (tests/conftest.py);
# test_translate_on_the_sdk.py runs these same tests on the real classes.
from _sdk_standins import (
    ActionEvent,
    AgentErrorEvent,
    ChatCompletionDeltaToolCall,
    Condensation,
    CondensationRequest,
    CondensationSummaryEvent,
    ConversationErrorEvent,
    Delta,
    FileEditorAction,
    FileEditorObservation,
    FinishAction,
    FinishObservation,
    Function,
    ImageContent,
    InterruptEvent,
    LLMCompletionLogEvent,
    Message,
    MessageEvent,
    MessageToolCall,
    ModelResponseStream,
    ObservationEvent,
    PauseEvent,
    StreamingChoices,
    SystemPromptEvent,
    TaskItem,
    TaskTrackerAction,
    TaskTrackerObservation,
    TerminalAction,
    TerminalObservation,
    TextContent,
    ThinkAction,
    ThinkObservation,
    TokenEvent,
    UserRejectObservation,
)
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from trio_acp import schema
from trio_acp.openhands import translate as tr
from trio_acp.openhands.translate import Translator, coalesce, conversation_error, message_id
from trio_acp.openhands.translate.chunks import ANNOUNCE_PREFIX

CWD = "/work/project"
SCHEMA_FILE = (
    Path(__file__).resolve().parents[1]
    / "js/node_modules/@agentclientprotocol/sdk/schema/v1/schema.json"
)
_registry = Registry().with_resource(
    "urn:acp-v1", Resource.from_contents(json.loads(SCHEMA_FILE.read_text()), DRAFT202012)
)
_validator = Draft202012Validator({"$ref": "urn:acp-v1#/$defs/SessionUpdate"}, registry=_registry)


def wire(updates: list) -> list[dict]:
    """Encode and validate every update against the official schema."""
    out = []
    for update in updates:
        data = schema.to_wire(update)
        errors = sorted(_validator.iter_errors(data), key=str)
        assert not errors, f"{data}: {errors[0].message}"
        out.append(data)
    return out


def translator() -> Translator:
    return Translator(CWD, is_dir=lambda path: path.endswith("/somedir"))


# ------------------------------------------------------------------ builders


def chunk(rid: str, **delta) -> ModelResponseStream:
    return ModelResponseStream(id=rid, choices=[StreamingChoices(index=0, delta=Delta(**delta))])


def tc_chunk(
    rid: str, index: int = 0, *, id=None, name=None, args: str = ""
) -> ModelResponseStream:
    fn = Function(name=name, arguments=args) if name else Function(arguments=args)
    call = ChatCompletionDeltaToolCall(
        index=index, id=id, type="function" if id else None, function=fn
    )
    return chunk(rid, tool_calls=[call])


def stream_tool_call(
    t: Translator, rid: str, call_id: str, name: str, args: str, step: int = 3, index: int = 0
):
    updates = t.token(tc_chunk(rid, index, id=call_id, name=name, args=""))
    for i in range(0, len(args), step):
        updates += t.token(tc_chunk(rid, index, args=args[i : i + step]))
    return updates


def action_event(
    action,
    tool: str,
    call_id: str,
    rid: str,
    *,
    thought: str = "",
    reasoning=None,
    summary=None,
    args=None,
):
    arguments = json.dumps(
        args if args is not None else action.model_dump(mode="json", exclude={"kind"})
    )
    return ActionEvent(
        thought=[TextContent(text=thought)] if thought else [],
        reasoning_content=reasoning,
        action=action,
        tool_name=tool,
        tool_call_id=call_id,
        tool_call=MessageToolCall(id=call_id, name=tool, arguments=arguments, origin="completion"),
        llm_response_id=rid,
        summary=summary,
    )


def observation_event(observation, tool: str, call_id: str) -> ObservationEvent:
    return ObservationEvent(
        observation=observation, tool_name=tool, tool_call_id=call_id, action_id="a-" + call_id
    )


def agent_message(text: str, rid: str, reasoning=None) -> MessageEvent:
    return MessageEvent(
        source="agent",
        llm_message=Message(
            role="assistant", content=[TextContent(text=text)], reasoning_content=reasoning
        ),
        llm_response_id=rid,
    )


def user_message(text: str, images=()) -> MessageEvent:
    content = [TextContent(text=text)]
    if images:
        content.append(ImageContent(image_urls=list(images)))
    return MessageEvent(source="user", llm_message=Message(role="user", content=content))


def kinds(updates) -> list[str]:
    return [d["sessionUpdate"] for d in wire(updates)]


def is_uuid(value: str) -> bool:
    return str(uuid.UUID(value)) == value


# ------------------------------------------------------------------ streaming text


def test_streamed_text_and_reasoning_get_stable_uuid_message_ids():
    t = translator()
    ups = t.token(chunk("resp-1", reasoning_content="Let me "))
    ups += t.token(chunk("resp-1", reasoning_content="think."))
    ups += t.token(chunk("resp-1", content="Hello "))
    ups += t.token(chunk("resp-1", content="world"))
    ups += t.token(chunk("resp-2", content="Next reply"))
    data = wire(ups)
    assert [d["sessionUpdate"] for d in data] == ["agent_thought_chunk"] * 2 + [
        "agent_message_chunk"
    ] * 3
    assert [d["content"]["text"] for d in data] == [
        "Let me ",
        "think.",
        "Hello ",
        "world",
        "Next reply",
    ]
    ids = [d["messageId"] for d in data]
    assert all(is_uuid(i) for i in ids)
    assert ids[0] == ids[1] and ids[2] == ids[3]
    assert ids[0] != ids[2], "a thought and the reply are different messages"
    assert ids[4] != ids[2], "a new LLM response starts a new message"
    assert ids[2] == message_id("resp-1", "message")


def test_chunk_without_content_or_choices_gives_nothing():
    t = translator()
    assert t.token(ModelResponseStream(id="r", choices=[])) == []
    assert t.token(chunk("r", content=None)) == []
    assert t.token(chunk("r", content="")) == []


def test_bare_string_tokens_are_text():
    t = translator()
    assert kinds(t.token("hi")) == ["agent_message_chunk"]


# ------------------------------------------------------------------ streaming tool calls


def test_streamed_tool_call_announced_once_then_one_title_update():
    t = translator()
    command = "pytest -x tests/ && echo " + "x" * 300  # long: never cut
    args = json.dumps({"command": command, "summary": "run the tests", "timeout": 60})
    ups = stream_tool_call(t, "resp-1", "call_1", "terminal", args, step=2)
    data = wire(ups)
    assert [d["sessionUpdate"] for d in data] == ["tool_call", "tool_call_update"], (
        "one announcement and one title update, not one update per fragment"
    )
    start, update = data
    assert start["toolCallId"] == "call_1" and start["status"] == "pending"
    # A long command is announced once its start names it, then titled in full.
    assert start["kind"] == "execute" and start["title"] == command[:ANNOUNCE_PREFIX] + "…"
    assert update["title"] == command
    assert "content" not in update and "rawInput" not in update

    # The SDK's ActionEvent then marks it in progress with the final input.
    action = TerminalAction(command=command, timeout=60)
    ups = t.event(action_event(action, "terminal", "call_1", "resp-1", summary="run the tests"))
    (final,) = wire(ups)
    assert final["sessionUpdate"] == "tool_call_update"
    assert final["status"] == "in_progress" and final["title"] == command
    assert final["rawInput"]["command"] == command and final["kind"] == "execute"


def test_a_streamed_command_is_announced_titled_with_the_command():
    """acpx prints a tool call's first title (and then only its end): the terminal's
    `tool_call` waits for the command, whatever argument comes first."""
    t = translator()
    args = json.dumps({"summary": "list files", "command": "ls -la src", "timeout": 5})
    cut = args.index("ls -la") + 4  # the command still arriving: `ls -`
    ups = t.token(tc_chunk("r", id="call_c", name="terminal", args=""))
    for i in range(0, cut, 2):
        ups += t.token(tc_chunk("r", args=args[i : min(i + 2, cut)]))
    assert ups == [], "not announced before its command"
    for i in range(cut, len(args), 2):
        ups += t.token(tc_chunk("r", args=args[i : i + 2]))
    data = wire(ups)
    assert [(d["sessionUpdate"], d.get("title")) for d in data] == [("tool_call", "ls -la src")]


def test_a_long_streamed_command_is_announced_by_its_first_line_then_titled_in_full():
    t = translator()
    command = "cat > notes.txt <<'EOF'\n" + "a line of text\n" * 50 + "EOF"
    data = wire(stream_tool_call(t, "r", "call_h", "terminal", json.dumps({"command": command})))
    assert [(d["sessionUpdate"], d.get("title")) for d in data] == [
        ("tool_call", "cat > notes.txt <<'EOF'…"),
        ("tool_call_update", command),
    ]


def test_tool_call_not_opened_before_id_and_name_are_known():
    t = translator()
    assert t.token(tc_chunk("r", args='{"comm')) == []
    ups = t.token(tc_chunk("r", id="call_9", name="terminal", args='and": "ls"}'))
    (start,) = wire(ups)
    assert start["title"] == "ls" and start["rawInput"] == {"command": "ls"}


def test_streamed_file_editor_call_gets_absolute_location():
    t = translator()
    args = json.dumps({"command": "view", "path": "src/app.py", "view_range": [10, 20]})
    data = wire(stream_tool_call(t, "r", "call_v", "file_editor", args))
    assert data[0]["sessionUpdate"] == "tool_call"
    last = data[-1]
    assert last["title"] == "Read /work/project/src/app.py (lines 10-20)"
    assert last["kind"] == "read"
    assert last["locations"] == [{"path": "/work/project/src/app.py", "line": 10}]
    # updates are only sent on change: command, path, view_range -> at most 3
    assert len(data) <= 4


def test_parallel_streamed_tool_calls_are_kept_apart():
    t = translator()
    ups = t.token(tc_chunk("r", 0, id="c_a", name="terminal", args='{"command": "echo a"}'))
    ups += t.token(tc_chunk("r", 1, id="c_b", name="terminal", args='{"command": '))
    ups += t.token(tc_chunk("r", 1, args='"echo b"}'))
    data = wire(ups)
    # The second command is announced once it has arrived, already titled with it.
    assert [(d["toolCallId"], d.get("title")) for d in data] == [
        ("c_a", "echo a"),
        ("c_b", "echo b"),
    ]


def test_streamed_finish_message_is_streamed_as_text_and_not_repeated():
    t = translator()
    args = json.dumps({"message": 'All done.\nSee "README" \u2013 ok \U0001f600'})
    ups = stream_tool_call(t, "r", "call_f", "finish", args, step=4)
    data = wire(ups)
    assert {d["sessionUpdate"] for d in data} == {"agent_message_chunk"}
    assert "".join(d["content"]["text"] for d in data) == json.loads(args)["message"]
    assert len({d["messageId"] for d in data}) == 1

    action = FinishAction(message=json.loads(args)["message"])
    assert t.event(action_event(action, "finish", "call_f", "r")) == []
    assert (
        t.event(observation_event(FinishObservation.from_text(text="x"), "finish", "call_f")) == []
    )


def test_streamed_think_is_a_thought_not_a_tool_call():
    t = translator()
    ups = stream_tool_call(t, "r", "call_t", "think", json.dumps({"thought": "Plan: A then B"}))
    assert set(kinds(ups)) == {"agent_thought_chunk"}
    assert (
        t.event(action_event(ThinkAction(thought="Plan: A then B"), "think", "call_t", "r")) == []
    )
    assert (
        t.event(observation_event(ThinkObservation.from_text(text="ok"), "think", "call_t")) == []
    )


def test_streamed_argument_scanning_is_linear_for_large_arguments():
    # Duck-typed chunks (building ~40k litellm objects would dominate the test): a 160 KB
    # file_text in 4-character fragments gives a handful of small updates.
    def light(args, **call):
        function = SimpleNamespace(name=call.pop("name", None), arguments=args)
        tool_call = SimpleNamespace(index=0, id=call.pop("id", None), function=function)
        delta = SimpleNamespace(content=None, tool_calls=[tool_call])
        return SimpleNamespace(id="r", choices=[SimpleNamespace(index=0, delta=delta)])

    t = translator()
    big = 'line \\ "q" é\n' * 10_000
    args = json.dumps({"command": "create", "path": "big.txt", "file_text": big})
    ups = t.token(light("", id="call_big", name="file_editor"))
    for i in range(0, len(args), 4):
        ups += t.token(light(args[i : i + 4]))
    assert len(ups) <= 3
    assert all(len(json.dumps(d)) < 2000 for d in wire(ups))
    assert t._pending[("r", 0)].scanner.fields["file_text"] == big


# ------------------------------------------------------------------ argument scanner


@pytest.mark.parametrize("step", [1, 2, 5, 1000])
def test_arg_scanner_decodes_fragments(step):
    value = {
        "command": 'echo "hi" \\ \t done \u00e9 \U0001f600',
        "nested": {"a": [1, {"b": "}]"}], "c": '\\"'},
        "n": -12.5e3,
        "flag": True,
        "none": None,
        "list": [1, 2],
    }
    text = json.dumps(value, indent=2 if step == 2 else None, ensure_ascii=step != 5)
    scanner = tr.ArgScanner()
    got_pieces: dict[str, str] = {}
    for i in range(0, len(text), step):
        _, pieces = scanner.feed(text[i : i + step])
        for k, v in pieces.items():
            got_pieces[k] = got_pieces.get(k, "") + v
    assert scanner.fields == value
    assert got_pieces == {"command": value["command"]}


def test_arg_scanner_gives_up_on_non_objects():
    scanner = tr.ArgScanner()
    scanner.feed("[1, 2]")
    assert scanner.fields == {}
    assert scanner.value_so_far("x") is None


# ------------------------------------------------------------------ actions


def test_unstreamed_action_sends_thought_reasoning_and_tool_call():
    t = translator()
    action = TerminalAction(command="ls -la")
    ev = action_event(
        action,
        "terminal",
        "call_1",
        "resp-9",
        thought="Let me look.",
        reasoning="User wants a listing.",
    )
    data = wire(t.event(ev))
    assert [d["sessionUpdate"] for d in data] == [
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
    ]
    assert data[0]["content"]["text"] == "User wants a listing."
    assert data[1]["content"]["text"] == "Let me look."
    assert data[1]["messageId"] == message_id("resp-9", "message")
    assert data[0]["messageId"] == message_id("resp-9", "thought")
    tool = data[2]
    assert (
        tool["status"] == "in_progress" and tool["kind"] == "execute" and tool["title"] == "ls -la"
    )
    assert tool["rawInput"] == {
        "command": "ls -la",
        "is_input": False,
        "timeout": None,
        "reset": False,
    }


def test_streamed_text_is_not_repeated_by_the_action():
    t = translator()
    t.token(chunk("resp-1", reasoning_content="Because."))
    t.token(chunk("resp-1", content="Let me "))
    t.token(chunk("resp-1", content="look."))
    stream_tool_call(t, "resp-1", "call_1", "terminal", '{"command": "ls"}')
    ev = action_event(
        TerminalAction(command="ls"),
        "terminal",
        "call_1",
        "resp-1",
        thought="Let me look.",
        reasoning="Because.",
    )
    assert kinds(t.event(ev)) == ["tool_call_update"]


def test_partially_streamed_text_sends_only_the_rest():
    t = translator()
    t.token(chunk("resp-1", content="Let me "))
    ev = action_event(
        TerminalAction(command="ls"), "terminal", "call_1", "resp-1", thought="Let me look."
    )
    data = wire(t.event(ev))
    assert data[0]["content"]["text"] == "look."
    assert data[0]["messageId"] == message_id("resp-1", "message")
    assert data[1]["sessionUpdate"] == "tool_call"


def test_stream_matched_by_content_when_response_ids_differ():
    t = translator()
    t.token(chunk("item-abc", content="Working on it."))
    ev = action_event(
        TerminalAction(command="ls"), "terminal", "call_1", "resp-real", thought="Working on it."
    )
    assert kinds(t.event(ev)) == ["tool_call"]


@pytest.mark.parametrize(
    ("action", "kind", "title", "line"),
    [
        (FileEditorAction(command="view", path="/abs/f.py"), "read", "Read /abs/f.py", None),
        (
            FileEditorAction(command="view", path="rel/f.py", view_range=[3, 9]),
            "read",
            "Read /work/project/rel/f.py (lines 3-9)",
            3,
        ),
        (
            FileEditorAction(command="create", path="new.txt", file_text="hi"),
            "edit",
            "Create /work/project/new.txt",
            None,
        ),
        (
            FileEditorAction(command="str_replace", path="/abs/f.py", old_str="a", new_str="b"),
            "edit",
            "Edit /abs/f.py",
            None,
        ),
        (
            FileEditorAction(command="insert", path="/abs/f.py", insert_line=4, new_str="x"),
            "edit",
            "Edit /abs/f.py",
            5,
        ),
        (
            FileEditorAction(command="undo_edit", path="../up/f.py"),
            "edit",
            "Undo edit of /work/up/f.py",
            None,
        ),
    ],
)
def test_file_editor_kinds_titles_and_locations(action, kind, title, line):
    t = translator()
    (tool,) = wire(t.event(action_event(action, "file_editor", "c1", "r")))
    assert (tool["kind"], tool["title"]) == (kind, title)
    (location,) = tool["locations"]
    assert location["path"].startswith("/") and ".." not in location["path"]
    assert location.get("line") == line


def test_viewing_a_directory_has_no_location():
    t = translator()
    (tool,) = wire(
        t.event(
            action_event(FileEditorAction(command="view", path="somedir"), "file_editor", "c1", "r")
        )
    )
    assert tool["title"] == "List /work/project/somedir"
    assert "locations" not in tool


def test_task_tracker_and_unknown_tools():
    t = translator()
    plan = TaskTrackerAction(command="plan", task_list=[TaskItem(title="a"), TaskItem(title="b")])
    (tool,) = wire(t.event(action_event(plan, "task_tracker", "c1", "r")))
    assert (tool["kind"], tool["title"]) == ("think", "Update the plan (2 tasks)")
    ev = ActionEvent(
        thought=[],
        action=None,
        tool_name="mcp_search",
        tool_call_id="c2",
        tool_call=MessageToolCall(
            id="c2", name="mcp_search", arguments='{"q": "x"}', origin="completion"
        ),
        llm_response_id="r",
        summary="searching the docs",
    )
    (tool,) = wire(t.event(ev))
    assert (tool["kind"], tool["title"], tool["rawInput"]) == (
        "other",
        "searching the docs",
        {"q": "x"},
    )


def test_unstreamed_finish_and_think_are_text():
    t = translator()
    data = wire(
        t.event(
            action_event(
                FinishAction(message="All done."), "finish", "cf", "r", thought="Wrapping up."
            )
        )
    )
    assert [(d["sessionUpdate"], d["content"]["text"]) for d in data] == [
        ("agent_message_chunk", "Wrapping up."),
        ("agent_message_chunk", "All done."),
    ]
    assert data[0]["messageId"] != data[1]["messageId"]
    data = wire(t.event(action_event(ThinkAction(thought="Hmm."), "think", "ct", "r2")))
    assert [(d["sessionUpdate"], d["content"]["text"]) for d in data] == [
        ("agent_thought_chunk", "Hmm.")
    ]


# ------------------------------------------------------------------ observations


def announced(t: Translator, action, tool: str, call_id: str) -> None:
    t.event(action_event(action, tool, call_id, "r-" + call_id))


def test_terminal_observation_strips_ansi_and_reports_exit_code():
    t = translator()
    announced(t, TerminalAction(command="make"), "terminal", "c1")
    obs = TerminalObservation.from_text(
        text="\x1b[?2004l\x1b[31mbuild failed\x1b[0m\r\n\x1b]0;title\x07done\n\x1b[?2004h",
        command="make",
        exit_code=2,
    )
    (update,) = wire(t.event(observation_event(obs, "terminal", "c1")))
    assert update["sessionUpdate"] == "tool_call_update" and update["status"] == "completed"
    text = update["content"][0]["content"]["text"]
    assert "\x1b" not in text and "build failed\ndone" in text
    assert "[exit code 2]" in text
    assert update["rawOutput"]["exit_code"] == 2


def test_terminal_error_observation_fails():
    t = translator()
    announced(t, TerminalAction(command="x"), "terminal", "c1")
    obs = TerminalObservation.from_text(text="timed out", command="x", is_error=True)
    (update,) = wire(t.event(observation_event(obs, "terminal", "c1")))
    assert update["status"] == "failed"


def test_a_command_that_never_ran_fails_with_its_reason_and_no_still_running_note():
    """A client that refuses `terminal/create` (acpx: "Permission denied for
    terminal/create"): the tool call fails with the reason, never "still running"."""
    t = translator()
    announced(t, TerminalAction(command="rm -rf build"), "terminal", "c1")
    reason = "The editor did not run the command: Permission denied for terminal/create"
    obs = TerminalObservation.from_text(text=reason, command="rm -rf build", is_error=True)
    assert obs.metadata.exit_code == -1  # the SDK's default: "no exit code"
    (update,) = wire(t.event(observation_event(obs, "terminal", "c1")))
    assert update["status"] == "failed"
    assert update["content"][0]["content"]["text"] == reason  # a reason, not fenced output
    text = json.dumps(update["content"])
    assert "still running" not in text and "exit code" not in text
    assert update["rawOutput"]["exit_code"] is None


def test_a_soft_timeout_is_still_running():
    t = translator()
    announced(t, TerminalAction(command="make"), "terminal", "c1")
    obs = TerminalObservation.from_text(text="building", command="make", exit_code=-1)
    (update,) = wire(t.event(observation_event(obs, "terminal", "c1")))
    assert "[the command is still running; no exit code yet]" in json.dumps(update["content"])


def test_large_terminal_output_is_capped_with_a_note():
    t = translator()
    announced(t, TerminalAction(command="yes"), "terminal", "c1")
    body = "".join(f"line {i} é\n" for i in range(100_000))  # ~1.1 MB
    obs = TerminalObservation.from_text(
        text=body, command="yes", exit_code=0, full_output_save_dir="/tmp/conv/observations"
    )
    (update,) = wire(t.event(observation_event(obs, "terminal", "c1")))
    text = update["content"][0]["content"]["text"]
    assert len(text.encode()) <= tr.MAX_TEXT_BYTES
    assert "output truncated" in text and "/tmp/conv/observations" in text
    assert text.removeprefix("```console\n").startswith("line 0 é") and "line 99999 é" in text


def test_file_editor_observations_give_diffs_and_text():
    t = translator()
    announced(
        t,
        FileEditorAction(command="create", path="new.py", file_text="x = 1\n"),
        "file_editor",
        "c1",
    )
    obs = FileEditorObservation.from_text(
        text="File created",
        command="create",
        path="/work/project/new.py",
        prev_exist=False,
        old_content=None,
        new_content="x = 1\n",
    )
    (update,) = wire(t.event(observation_event(obs, "file_editor", "c1")))
    assert update["status"] == "completed"
    assert update["content"] == [
        {"type": "diff", "path": "/work/project/new.py", "newText": "x = 1\n"}
    ]

    announced(
        t,
        FileEditorAction(command="str_replace", path="/a/m.py", old_str="b = 2", new_str="b = 3"),
        "file_editor",
        "c2",
    )
    obs = FileEditorObservation.from_text(
        text="edited",
        command="str_replace",
        path="/a/m.py",
        prev_exist=True,
        old_content="a = 1\nb = 2\n",
        new_content="a = 1\nb = 3\n",
    )
    (update,) = wire(t.event(observation_event(obs, "file_editor", "c2")))
    assert update["content"] == [
        {
            "type": "diff",
            "path": "/a/m.py",
            "oldText": "a = 1\nb = 2\n",
            "newText": "a = 1\nb = 3\n",
        }
    ]
    assert update["locations"] == [{"path": "/a/m.py", "line": 2}]

    announced(t, FileEditorAction(command="view", path="/a/m.py"), "file_editor", "c3")
    obs = FileEditorObservation.from_text(text="     1\ta = 1\n", command="view", path="/a/m.py")
    (update,) = wire(t.event(observation_event(obs, "file_editor", "c3")))
    assert update["content"][0]["type"] == "content"
    assert "a = 1" in update["content"][0]["content"]["text"]

    announced(
        t,
        FileEditorAction(command="str_replace", path="/a/m.py", old_str="zz", new_str="y"),
        "file_editor",
        "c4",
    )
    obs = FileEditorObservation.from_text(
        text="No replacement was performed", command="str_replace", is_error=True
    )
    (update,) = wire(t.event(observation_event(obs, "file_editor", "c4")))
    assert (
        update["status"] == "failed" and "No replacement" in update["content"][0]["content"]["text"]
    )


def test_task_tracker_observation_sends_the_complete_plan():
    t = translator()
    tasks = [
        TaskItem(title="one", status="done"),
        TaskItem(title="two", status="in_progress"),
        TaskItem(title="three"),
    ]
    announced(t, TaskTrackerAction(command="plan", task_list=tasks), "task_tracker", "c1")
    obs = TaskTrackerObservation.from_text(text="Updated", command="plan", task_list=tasks)
    data = wire(t.event(observation_event(obs, "task_tracker", "c1")))
    assert [d["sessionUpdate"] for d in data] == ["tool_call_update", "plan"]
    assert data[0]["status"] == "completed"
    assert data[1]["entries"] == [
        {"content": "one", "priority": "medium", "status": "completed"},
        {"content": "two", "priority": "medium", "status": "in_progress"},
        {"content": "three", "priority": "medium", "status": "pending"},
    ]


def test_observation_for_unannounced_call_announces_it_with_final_state():
    t = translator()
    obs = TerminalObservation.from_text(text="hi\n", command="echo hi", exit_code=0)
    (update,) = wire(t.event(observation_event(obs, "terminal", "ghost")))
    assert update["sessionUpdate"] == "tool_call" and update["status"] == "completed"


def test_agent_error_and_rejection_fail_the_call():
    t = translator()
    ev = AgentErrorEvent(error="Tool 'nope' not found", tool_name="nope", tool_call_id="c1")
    (update,) = wire(t.event(ev))
    assert update["sessionUpdate"] == "tool_call" and update["status"] == "failed"
    assert "not found" in update["content"][0]["content"]["text"]

    announced(t, TerminalAction(command="rm -rf /"), "terminal", "c2")
    ev = AgentErrorEvent(error="Tool call interrupted", tool_name="terminal", tool_call_id="c2")
    (update,) = wire(t.event(ev))
    assert update["sessionUpdate"] == "tool_call_update" and update["status"] == "failed"

    announced(t, TerminalAction(command="rm -rf /"), "terminal", "c3")
    ev = UserRejectObservation(
        tool_name="terminal", tool_call_id="c3", action_id="a", rejection_reason="too risky"
    )
    (update,) = wire(t.event(ev))
    assert update["status"] == "failed" and "too risky" in update["content"][0]["content"]["text"]


def test_fail_open_tool_calls_after_a_cut_stream():
    t = translator()
    stream_tool_call(t, "r", "c1", "terminal", '{"command": "sleep 100"')
    announced(t, TerminalAction(command="ls"), "terminal", "c2")
    t.event(
        observation_event(
            TerminalObservation.from_text(text="", command="ls", exit_code=0), "terminal", "c2"
        )
    )
    data = wire(t.fail_open_tool_calls("Cancelled."))
    assert [(d["toolCallId"], d["status"]) for d in data] == [("c1", "failed")]
    assert t.fail_open_tool_calls() == []


# ------------------------------------------------------------------ messages and others


def test_agent_message_event_streamed_or_not():
    t = translator()
    data = wire(t.event(agent_message("Done!", "resp-1", reasoning="easy")))
    assert [(d["sessionUpdate"], d["content"]["text"]) for d in data] == [
        ("agent_thought_chunk", "easy"),
        ("agent_message_chunk", "Done!"),
    ]
    t.token(chunk("resp-2", content="Done again!"))
    assert t.event(agent_message("Done again!", "resp-2")) == []
    assert t.event(user_message("hello")) == []  # the client sent it


def test_quiet_events_and_condensation():
    t = translator()
    assert t.event(PauseEvent()) == []
    assert t.event(InterruptEvent()) == []
    assert t.event(TokenEvent(source="agent", prompt_token_ids=[1], response_token_ids=[2])) == []
    assert t.event(CondensationRequest()) == []
    assert t.event(SystemPromptEvent(system_prompt=TextContent(text="You are..."), tools=[])) == []
    log_event = LLMCompletionLogEvent(filename="f", log_data="{}", model_name="m", usage_id="agent")
    assert t.event(log_event) == []
    err = ConversationErrorEvent(
        source="environment", code="LLMAuthenticationError", detail="bad key"
    )
    assert t.event(err) == []
    assert conversation_error(err) == ("LLMAuthenticationError", "bad key")
    assert conversation_error(PauseEvent()) is None
    assert t.event(object()) == []
    ev = Condensation(forgotten_event_ids={"a", "b", "c"}, summary="s", llm_response_id="r")
    (data,) = wire(t.event(ev))
    assert data["sessionUpdate"] == "agent_thought_chunk"
    assert data["content"]["text"] == "(conversation condensed: 3 events summarized)"
    (data,) = wire(t.event(CondensationSummaryEvent(summary="long summary")))
    assert data["content"]["text"] == "(conversation condensed)"


def test_condensations_are_compactions_for_a_client_that_advertised_them():
    t = Translator(CWD, compaction=True)
    request = CondensationRequest()
    (opened,) = wire(t.event(request))
    assert opened == {
        "sessionUpdate": "compaction_update",
        "compactionId": request.id,
        "status": "in_progress",
    }
    done = Condensation(
        forgotten_event_ids={"a", "b"}, summary="what happened", llm_response_id="r"
    )
    (closed,) = wire(t.event(done))
    assert closed["compactionId"] == request.id and closed["status"] == "completed"
    assert closed["summary"] == [{"type": "text", "text": "what happened"}]
    # An automatic one (nobody asked): one completed update under its own id.
    auto = Condensation(forgotten_event_ids={"c"}, summary=None, llm_response_id="r2")
    (data,) = wire(t.event(auto))
    assert (data["compactionId"], data["status"]) == (
        auto.id,
        "completed",
    ) and "summary" not in data
    # A request that fails or is interrupted says so; a later one is a new compaction.
    failing = CondensationRequest()
    t.event(failing)
    err = ConversationErrorEvent(
        source="environment", code="NoCondensationAvailableException", detail="no summary"
    )
    (data,) = wire(t.event(err))
    assert (data["compactionId"], data["status"], data["error"]) == (
        failing.id,
        "failed",
        "no summary",
    )
    assert t.event(err) == []  # nothing open any more
    cancelled = CondensationRequest()
    t.event(cancelled)
    (data,) = wire(t.event(InterruptEvent()))
    assert (data["compactionId"], data["status"]) == (cancelled.id, "cancelled")
    # Left open when the turn ends otherwise: closed with the turn's reason.
    left = CondensationRequest()
    t.event(left)
    (data,) = wire(t.fail_open_tool_calls("The turn ended with an error."))
    assert (data["compactionId"], data["status"]) == (left.id, "failed")
    assert t.end_compaction("failed") == []
    # Replay: completed compactions only, under the id the live session used.
    replayed = wire(Translator(CWD, compaction=True).replay([request, done, failing, err]))
    assert [(d["sessionUpdate"], d["compactionId"], d["status"]) for d in replayed] == [
        ("compaction_update", request.id, "completed")
    ]


# ------------------------------------------------------------------ replay


def test_replay_whole_history():
    png = "data:image/png;base64,iVBORw0KGgo="
    tasks = [TaskItem(title="t1", status="done")]
    history = [
        user_message("please list", images=[png]),
        action_event(TerminalAction(command="ls"), "terminal", "c1", "r1", thought="Listing."),
        observation_event(
            TerminalObservation.from_text(text="a\nb\n", command="ls", exit_code=0),
            "terminal",
            "c1",
        ),
        action_event(
            TaskTrackerAction(command="plan", task_list=tasks), "task_tracker", "c2", "r2"
        ),
        observation_event(
            TaskTrackerObservation.from_text(text="ok", command="plan", task_list=tasks),
            "task_tracker",
            "c2",
        ),
        action_event(FinishAction(message="Listed."), "finish", "c3", "r3"),
        observation_event(FinishObservation.from_text(text="Listed."), "finish", "c3"),
        PauseEvent(),
        user_message("again"),
        agent_message("Sure: a, b.", "r4"),
        action_event(TerminalAction(command="rm x"), "terminal", "c4", "r5"),  # never ran
        AgentErrorEvent(error="boom", tool_name="terminal", tool_call_id="c9"),  # never announced
    ]
    t = translator()
    t.token(chunk("r4", content="Sure: a, b."))  # live streaming state must not leak into replay
    data = wire(t.replay(history))
    assert [d["sessionUpdate"] for d in data] == [
        "user_message_chunk",
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call",
        "plan",
        "agent_message_chunk",
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call",
    ]
    assert data[0]["content"] == {"type": "text", "text": "please list"}
    assert data[1]["content"] == {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
    assert data[0]["messageId"] == data[1]["messageId"] == str(uuid.UUID(history[0].id))
    assert data[3]["status"] == "completed" and "a\nb" in data[3]["content"][0]["content"]["text"]
    assert data[3]["rawInput"]["command"] == "ls"
    assert data[4]["status"] == "completed"
    assert data[6]["content"]["text"] == "Listed."
    assert data[8]["content"]["text"] == "Sure: a, b."
    assert data[9]["toolCallId"] == "c4" and data[9]["status"] == "pending"
    assert data[10]["toolCallId"] == "c9" and data[10]["status"] == "failed"
    ids = [d["toolCallId"] for d in data if "toolCallId" in d]
    assert len(ids) == len(set(ids))
    # live events about a replayed call are updates of it
    obs = TerminalObservation.from_text(text="", command="rm x", exit_code=0)
    assert kinds(t.event(observation_event(obs, "terminal", "c4"))) == ["tool_call_update"]


# ------------------------------------------------------------------ coalesce


def test_coalesce_merges_runs_of_same_message():
    t = translator()
    ups = t.token(chunk("r", reasoning_content="a"))
    ups += t.token(chunk("r", reasoning_content="b"))
    ups += t.token(chunk("r", content="Hel"))
    ups += t.token(chunk("r", content="lo"))
    ups += t.token(chunk("r2", content="!"))
    ups += stream_tool_call(t, "r2", "c1", "terminal", '{"command": "ls"}')
    ups += t.token(chunk("r2", content="x"))
    ups += t.token(chunk("r2", content="y"))
    merged = coalesce(ups)
    data = wire(merged)
    assert [(d["sessionUpdate"], d.get("content", {}).get("text")) for d in data] == [
        ("agent_thought_chunk", "ab"),
        ("agent_message_chunk", "Hello"),
        ("agent_message_chunk", "!"),
        ("tool_call", None),  # announced once its command is known: no title update
        ("agent_message_chunk", "xy"),
    ]
    assert ups[2].content.text == "Hel", "inputs are not mutated"
    assert coalesce([]) == []


def test_a_failed_attempt_closes_its_text_and_fails_its_announced_calls():
    from trio_acp.openhands.translate.streams import CUT_OFF

    t = translator()
    out = wire(t.token(chunk("r1", content="Let me look")))
    out += wire(stream_tool_call(t, "r1", "call_1", "terminal", '{"command": "ls -la"}'))
    out += wire(stream_tool_call(t, "r1", "call_2", "finish", '{"message": "Done so f', index=1))
    cut = wire(t.attempt_failed())
    by_kind = {(d["sessionUpdate"], d.get("toolCallId")): d for d in cut}
    text_id = out[0]["messageId"]
    assert {d["messageId"] for d in cut if d["sessionUpdate"] == "agent_message_chunk"} == {
        text_id,
        message_id("call_2", "finish"),
    }
    assert all(
        d["content"]["text"] == CUT_OFF for d in cut if d["sessionUpdate"] == "agent_message_chunk"
    )
    failed = by_kind[("tool_call_update", "call_1")]
    assert failed["status"] == "failed"
    assert wire(t.attempt_failed()) == []  # nothing is open any more
    # The retry, under the same response id, is a new message.
    retry = wire(t.token(chunk("r1", content="Let me look again")))
    assert retry[0]["messageId"] != text_id
