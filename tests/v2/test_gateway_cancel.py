"""v2's `tool_call/cancel` and `terminal/cancel` in the gateway, frame by frame (pure).

The agent's side (stopping one command while the turn goes on) is tested in
tests/openhands/test_tool_call_stop.py; the whole on the wire in tests/e2e/test_v2_wire.py.
Every frame the gateway sends the client is checked against the official v2 schema.
"""

from __future__ import annotations

import base64
from typing import Any

from trio_acp.testing.wire_check_v2 import V2FrameChecker
from trio_acp.v2.frames import STOP_TOOL_CALL
from trio_acp.v2.gateway import Gateway

SID = "sess-1"
CWD = "/home/user/project"

_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


class Wire:
    """A v2 client and the v1 agent around one gateway that may stop `terminal` calls."""

    def __init__(self) -> None:
        self.gateway = Gateway(stoppable_tools=frozenset({"terminal"}))
        self.check = V2FrameChecker()
        self.client: list[dict[str, Any]] = []
        self.agent: list[dict[str, Any]] = []
        self.from_client({"id": "new", "method": "session/new", "params": {"cwd": CWD}})
        self.from_agent({"id": "new", "result": {"sessionId": SID}})
        self.from_client(
            {
                "id": "p",
                "method": "session/prompt",
                "params": {"sessionId": SID, "prompt": [{"type": "text", "text": "go"}]},
            }
        )
        _, agent = self.take()
        self.prompt_id = agent[-1]["id"]

    def from_client(self, frame: dict[str, Any]) -> None:
        frame = {"jsonrpc": "2.0", **frame}
        self.check.received(frame)
        out = self.gateway.from_client(frame)
        self._deliver(out.to_client, out.to_agent)

    def from_agent(self, frame: dict[str, Any]) -> None:
        out = self.gateway.from_agent({"jsonrpc": "2.0", **frame})
        self._deliver(out.to_client, out.to_agent)

    def _deliver(self, client: list[dict[str, Any]], agent: list[dict[str, Any]]) -> None:
        for frame in client:
            assert self.check.sent(frame) == [], frame
        self.client += client
        self.agent += agent

    def take(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        client, agent = self.client, self.agent
        self.client, self.agent = [], []
        return client, agent

    def update(self, update: dict[str, Any]) -> None:
        self.from_agent(
            {"method": "session/update", "params": {"sessionId": SID, "update": update}}
        )

    def tool_call(self, call_id: str, name: str, **fields: Any) -> dict[str, Any]:
        self.update(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": name,
                "name": name,
                "status": "pending",
                **fields,
            }
        )
        (frame,), _ = self.take()
        return frame["params"]["update"]

    def cancel(self, rid: int, call_id: str) -> None:
        self.from_client(
            {
                "id": rid,
                "method": "tool_call/cancel",
                "params": {"sessionId": SID, "toolCallId": call_id},
            }
        )


def updates(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def test_a_running_command_is_stopped_by_the_agent_and_ends_cancelled_while_the_turn_goes_on() -> (
    None
):
    wire = Wire()
    created = wire.tool_call("call-1", "terminal", rawInput={"command": "sleep 60"})
    assert created["capabilities"] == {"cancel": {}}
    wire.update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "in_progress"}
    )
    wire.take()
    wire.cancel(7, "call-1")
    client, (stop,) = wire.take()
    assert client == []  # answered once the agent accepted it
    assert stop["method"] == STOP_TOOL_CALL
    assert stop["params"] == {"sessionId": SID, "toolCallId": "call-1"}
    wire.from_agent({"id": stop["id"], "result": {"stopping": True}})
    client, agent = wire.take()
    assert client == [{"jsonrpc": "2.0", "id": 7, "result": {}}]
    assert agent == []
    # The command's result (interrupted) reaches the model; the client sees it cancelled.
    wire.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call-1",
            "status": "failed",
            "rawOutput": {"exit_code": 130},
        }
    )
    (final,) = updates(wire.take()[0])
    assert final["status"] == "cancelled"
    assert final["capabilities"] is None
    assert final["rawOutput"] == {"exit_code": 130}
    # The turn went on: no state change, and it ends as the agent says.
    wire.from_agent({"id": wire.prompt_id, "result": {"stopReason": "end_turn"}})
    (idle,) = updates(wire.take()[0])
    assert idle == {"sessionUpdate": "state_update", "state": "idle", "stopReason": "end_turn"}


def test_a_command_that_was_over_before_the_stop_keeps_its_own_final_status() -> None:
    wire = Wire()
    wire.tool_call("call-1", "terminal", rawInput={"command": "true"})
    wire.cancel(7, "call-1")
    (stop,) = wire.take()[1]
    wire.from_agent({"id": stop["id"], "result": {"stopping": False}})
    assert wire.take()[0] == [{"jsonrpc": "2.0", "id": 7, "result": {}}]
    wire.update(
        {"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed"}
    )
    (final,) = updates(wire.take()[0])
    assert final["status"] == "completed"


def test_the_agents_refusal_to_stop_is_the_answer() -> None:
    wire = Wire()
    wire.tool_call("call-1", "terminal")
    wire.cancel(7, "call-1")
    (stop,) = wire.take()[1]
    wire.from_agent({"id": stop["id"], "error": {"code": -32602, "message": "cannot stop it"}})
    assert wire.take()[0] == [
        {"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "cannot stop it"}}
    ]


def test_a_tool_call_waiting_for_permission_is_rejected_for_the_user_and_the_turn_goes_on() -> None:
    wire = Wire()
    created = wire.tool_call("call-1", "file_editor")
    assert "capabilities" not in created  # the agent cannot stop an edit once it runs
    wire.from_agent(
        {
            "id": 40,
            "method": "session/request_permission",
            "params": {
                "sessionId": SID,
                "toolCall": {"toolCallId": "call-1", "title": "edit a.py"},
                "options": _OPTIONS,
            },
        }
    )
    client, _ = wire.take()
    # While it waits, it can be cancelled.
    assert updates(client)[0] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "capabilities": {"cancel": {}},
    }
    assert updates(client)[1]["state"] == "requires_action"
    wire.cancel(8, "call-1")
    client, agent = wire.take()
    assert agent == [
        {
            "jsonrpc": "2.0",
            "id": 40,
            "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}},
        }
    ]
    assert client[0] == {
        "jsonrpc": "2.0",
        "method": "$/cancel_request",
        "params": {"requestId": 40},
    }
    assert updates(client) == [{"sessionUpdate": "state_update", "state": "running"}]
    assert client[-1] == {"jsonrpc": "2.0", "id": 8, "result": {}}
    # The client still answers the withdrawn question: the agent was answered already.
    wire.from_client({"id": 40, "result": {"outcome": {"outcome": "cancelled"}}})
    assert wire.take() == ([], [])
    wire.update({"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "failed"})
    (final,) = updates(wire.take()[0])
    assert final["status"] == "cancelled"
    assert final["capabilities"] is None
    # A second cancel: the tool call is final now.
    wire.cancel(9, "call-1")
    assert wire.take()[0][0]["error"]["code"] == -32602


def test_a_permission_answered_by_the_user_takes_the_cancel_capability_back() -> None:
    wire = Wire()
    wire.tool_call("call-1", "file_editor")
    wire.from_agent(
        {
            "id": 40,
            "method": "session/request_permission",
            "params": {"sessionId": SID, "toolCall": {"toolCallId": "call-1"}, "options": _OPTIONS},
        }
    )
    wire.take()
    wire.from_client(
        {"id": 40, "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}
    )
    client, agent = wire.take()
    assert agent[0]["id"] == 40
    assert updates(client) == [
        {"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "capabilities": None},
        {"sessionUpdate": "state_update", "state": "running"},
    ]
    wire.cancel(8, "call-1")
    assert wire.take() == (
        [
            {
                "jsonrpc": "2.0",
                "id": 8,
                "error": {
                    "code": -32602,
                    "message": "tool_call/cancel: no such tool call in progress, or it cannot "
                    "be cancelled",
                },
            }
        ],
        [],
    )


def test_unknown_final_and_uncancellable_tool_calls_are_refused() -> None:
    wire = Wire()
    wire.tool_call("edit", "file_editor")
    wire.tool_call("done", "terminal")
    wire.update({"sessionUpdate": "tool_call_update", "toolCallId": "done", "status": "completed"})
    (final,) = updates(wire.take()[0])
    assert final["capabilities"] is None
    for rid, call_id in ((1, "nope"), (2, "edit"), (3, "done")):
        wire.cancel(rid, call_id)
    client, agent = wire.take()
    assert agent == []
    assert [(f["id"], f["error"]["code"]) for f in client] == [
        (1, -32602),
        (2, -32602),
        (3, -32602),
    ]
    # And a tool call left open by a turn that ended (the agent closes it) is no longer live.
    wire.tool_call("open", "terminal")
    wire.from_agent({"id": wire.prompt_id, "result": {"stopReason": "cancelled"}})
    wire.take()
    wire.cancel(4, "open")
    assert wire.take()[0][0]["error"]["code"] == -32602


def test_a_commands_terminal_is_announced_streamed_ended_and_cancellable() -> None:
    wire = Wire()
    wire.tool_call("call-1", "terminal", rawInput={"command": "make"})
    wire.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call-1",
            "status": "in_progress",
            "content": [{"type": "terminal", "terminalId": "call-1"}],
            "_meta": {"terminal_info": {"terminal_id": "call-1", "cwd": CWD}},
        }
    )
    started, tool = updates(wire.take()[0])
    assert started == {
        "sessionUpdate": "terminal_update",
        "terminalId": "call-1",
        "command": "make",
        "cwd": CWD,
        "capabilities": {"cancel": {}},
    }
    assert tool == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-1",
        "status": "in_progress",
        "content": [{"type": "terminal", "terminalId": "call-1"}],
    }
    wire.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call-1",
            "_meta": {"terminal_output": {"terminal_id": "call-1", "data": "héllo\n"}},
        }
    )
    (chunk,) = updates(wire.take()[0])
    assert chunk["sessionUpdate"] == "terminal_output_chunk"
    assert base64.b64decode(chunk["data"]).decode() == "héllo\n"
    # terminal/cancel stops the process through the agent; the tool call keeps its status.
    wire.from_client(
        {
            "id": 5,
            "method": "terminal/cancel",
            "params": {"sessionId": SID, "terminalId": "call-1"},
        }
    )
    (stop,) = wire.take()[1]
    assert stop["method"] == STOP_TOOL_CALL
    wire.from_agent({"id": stop["id"], "result": {"stopping": True}})
    assert wire.take()[0] == [{"jsonrpc": "2.0", "id": 5, "result": {}}]
    wire.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call-1",
            "_meta": {"terminal_exit": {"terminal_id": "call-1", "exit_code": 130, "signal": None}},
        }
    )
    (ended,) = updates(wire.take()[0])
    assert ended == {
        "sessionUpdate": "terminal_update",
        "terminalId": "call-1",
        "exitStatus": {"exitCode": 130},
        "capabilities": None,
    }
    wire.update(
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call-1",
            "status": "failed",
            "rawOutput": {"exit_code": 130, "output": "héllo\nbye\n"},
        }
    )
    snapshot, final = updates(wire.take()[0])
    # The whole output as the model got it: the terminal's authoritative snapshot.
    assert snapshot["sessionUpdate"] == "terminal_update"
    assert base64.b64decode(snapshot["output"]["data"]).decode() == "héllo\nbye\n"
    assert final["status"] == "failed"  # terminal/cancel does not change the tool call's status
    # The terminal has exited: it cannot be cancelled again.
    wire.from_client(
        {"id": 6, "method": "terminal/cancel", "params": {"sessionId": SID, "terminalId": "call-1"}}
    )
    assert wire.take()[0][0]["error"]["code"] == -32602


def test_a_sub_agents_command_is_not_offered_for_cancel() -> None:
    # It runs in the sub-agent's own run, which the agent cannot stop one command of.
    wire = Wire()
    meta = {"trio_acp": {"parentToolCallId": "task-1", "subagent": "helper"}}
    created = wire.tool_call("task-1/call-9", "terminal", _meta=meta)
    assert "capabilities" not in created
    wire.cancel(3, "task-1/call-9")
    client, agent = wire.take()
    assert agent == []
    assert client[0]["error"]["code"] == -32602
