"""A sub-agent's events as the client sees them: nested under the delegating `task` call
(translate/subagents.py), and the `task` tool's catalog entry. Real SDK events; every
update is validated against the official schema."""

from __future__ import annotations

# Stand-ins for the SDK's classes (fast layer, tests/conftest.py);
# test_translate_on_the_sdk.py runs these same tests on the real classes.
from _sdk_standins import (
    AgentErrorEvent,
    Message,
    MessageEvent,
    TaskAction,
    TaskObservation,
    TerminalAction,
    TerminalObservation,
    TextContent,
)
from test_translate import CWD, action_event, observation_event, translator, wire

from trio_acp.openhands.translate import permission_preview, present, rule_scope
from trio_acp.openhands.translate.subagents import SubagentBegan, SubagentEnded, SubagentEvent

TASK = TaskAction(description="Run the tests", prompt="Run pytest and report.")


def delegated(t, call_id: str = "p1") -> None:
    (start,) = wire(t.event(action_event(TASK, "task", call_id, "r-parent")))
    assert start["title"] == "Sub-agent general-purpose: Run the tests"
    assert start["kind"] == "think"


def sub(event, parent: str = "p1") -> SubagentEvent:
    return SubagentEvent(parent, "Run the tests", event)


def test_sub_agent_tool_calls_are_nested_under_the_delegating_call():
    t = translator()
    t.action_status = "pending"
    delegated(t)
    ls = action_event(TerminalAction(command="ls"), "terminal", "c1", "r-sub")
    start, log = wire(t.event(sub(ls)))
    assert start["sessionUpdate"] == "tool_call"
    assert start["toolCallId"] == "p1/c1"  # the sub-agent's ids are its own namespace
    assert start["title"] == "Run the tests: ls"
    assert start["status"] == "pending"  # asked for, as the parent's actions are
    assert start["_meta"]["trio_acp"] == {"parentToolCallId": "p1", "subagent": "Run the tests"}
    assert log["toolCallId"] == "p1" and "status" not in log
    assert "ls" in log["content"][0]["content"]["text"]

    obs = TerminalObservation.from_text(text="a.py\n", command="ls", exit_code=0)
    done, log = wire(t.event(sub(observation_event(obs, "terminal", "c1"))))
    assert (done["toolCallId"], done["status"]) == ("p1/c1", "completed")
    assert "✓ ls" in log["content"][0]["content"]["text"]

    # The sub-agent's own text is not repeated: its final message is the call's result.
    said = MessageEvent(
        source="agent",
        llm_message=Message(role="assistant", content=[TextContent(text="All green.")]),
    )
    assert t.event(sub(said)) == []
    result = TaskObservation.from_text(
        text="All green.", task_id="task_00000001", subagent="general-purpose", status="completed"
    )
    (update,) = wire(t.event(observation_event(result, "task", "p1")))
    assert update["toolCallId"] == "p1" and update["status"] == "completed"
    assert update["content"][0]["content"]["text"] == "All green."
    assert update["rawOutput"] == {
        "task_id": "task_00000001",
        "subagent": "general-purpose",
        "status": "completed",
    }

    # A sub-agent's id that equals one of the parent's stays apart.
    again = action_event(TerminalAction(command="pwd"), "terminal", "p1", "r-sub2")
    delegated(t, "p2")
    start, _ = wire(t.event(sub(again, "p2")))
    assert start["toolCallId"] == "p2/p1" and start["sessionUpdate"] == "tool_call"


def test_what_a_sub_agent_posts_after_its_delegating_call_ended_is_dropped():
    t = translator()
    delegated(t)
    ls = action_event(TerminalAction(command="sleep 50"), "terminal", "c1", "r-sub")
    wire(t.event(sub(ls)))
    interrupted = AgentErrorEvent(
        error="Tool call interrupted", tool_name="task", tool_call_id="p1"
    )
    # The parent's call fails; the sub-agent's unfinished call is closed first.
    closed, failed = wire(t.event(interrupted))
    assert (closed["toolCallId"], closed["status"]) == ("p1/c1", "failed")
    assert (failed["toolCallId"], failed["status"]) == ("p1", "failed")
    # The sub-agent winding down afterwards: nothing more about a call the client saw end.
    obs = TerminalObservation.from_text(text="", command="sleep 50", exit_code=-1)
    assert t.event(sub(observation_event(obs, "terminal", "c1"))) == []
    assert t.event(sub(action_event(TerminalAction(command="ls"), "terminal", "c2", "r"))) == []


def interrupted(call_id: str = "p1") -> AgentErrorEvent:
    return AgentErrorEvent(error="Tool call interrupted", tool_name="task", tool_call_id=call_id)


def test_the_delegating_calls_result_waits_for_its_running_sub_agents_last_events():
    # A cancel: the parent's interrupted run fails the delegating call (its own thread)
    # while the sub-agent's thread still delivers the action it was about to run and the
    # observation of the command the cancel killed. They are shown, then the call's end.
    t = translator()
    delegated(t)
    assert t.event(SubagentBegan("p1")) == []
    assert t.event(interrupted()) == []  # held: the sub-agent has not said it is done
    sleep = action_event(TerminalAction(command="sleep 50"), "terminal", "c1", "r-sub")
    start, _ = wire(t.event(sub(sleep)))
    assert (start["toolCallId"], start["sessionUpdate"]) == ("p1/c1", "tool_call")
    killed = TerminalObservation.from_text(text="", command="sleep 50", exit_code=-1)
    done, _ = wire(t.event(sub(observation_event(killed, "terminal", "c1"))))
    assert done["toolCallId"] == "p1/c1" and done["status"] in ("completed", "failed")
    (failed,) = wire(t.event(SubagentEnded("p1")))
    assert (failed["toolCallId"], failed["status"]) == ("p1", "failed")
    assert "interrupted" in failed["content"][0]["content"]["text"]
    # After its end, as before: nothing more about it.
    assert t.event(sub(action_event(TerminalAction(command="ls"), "terminal", "c2", "r"))) == []
    assert t.event(SubagentEnded("p1")) == []


def test_a_sub_agent_that_never_says_it_is_done_is_closed_with_the_turn():
    t = translator()
    delegated(t)
    t.event(SubagentBegan("p1"))
    wire(t.event(sub(action_event(TerminalAction(command="make"), "terminal", "c1", "r"))))
    assert t.event(interrupted()) == []
    data = wire(t.fail_open_tool_calls("Cancelled."))
    # The held result is the call's real ending; its sub-agent's open call closes first.
    assert [(d["toolCallId"], d["status"]) for d in data] == [("p1/c1", "failed"), ("p1", "failed")]
    assert "interrupted" in data[1]["content"][0]["content"]["text"]
    assert t.fail_open_tool_calls("Cancelled.") == []
    # A result after its sub-agent ended is not held (the ordinary way a task ends).
    delegated(t, "p2")
    t.event(SubagentBegan("p2"))
    assert t.event(SubagentEnded("p2")) == []
    (ended,) = wire(t.event(interrupted("p2")))
    assert (ended["toolCallId"], ended["status"]) == ("p2", "failed")


def test_a_cut_turn_closes_the_sub_agents_calls_too():
    t = translator()
    delegated(t)
    wire(t.event(sub(action_event(TerminalAction(command="make"), "terminal", "c1", "r"))))
    data = wire(t.fail_open_tool_calls("Cancelled."))
    assert {(d["toolCallId"], d["status"]) for d in data} == {
        ("p1", "failed"),
        ("p1/c1", "failed"),
    }


def test_the_task_tool_in_the_catalog():
    args = {"prompt": "Find where X is defined.\nThen report.", "subagent_type": "code-explorer"}
    assert present("task", args, cwd=CWD) == (
        "Sub-agent code-explorer: Find where X is defined. Then report.",
        "think",
        (),
    )
    assert present("task", {}, cwd=CWD)[0] == "Sub-agent general-purpose"
    resume = present("task", {"resume": "task_00000002", "description": "more"}, cwd=CWD)
    assert resume[0] == "Sub-agent Resume task_00000002 (general-purpose): more"
    # "Always" covers starting that kind of sub-agent, not what it does.
    assert rule_scope("task", args, CWD) == ("task", "code-explorer")
    (item,) = permission_preview("task", args, CWD, lambda path: None)
    assert "code-explorer" in item.content.text and "Find where X is defined." in item.content.text
