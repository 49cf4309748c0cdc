"""The v2 gateway, frame by frame (pure: no agent, no Trio).

Every frame the gateway sends the client is checked against the official v2 schema
(`V2FrameChecker`), the frames it sends the agent against the v1 schema's types where
they are requests the agent serves.
"""

from __future__ import annotations

from typing import Any

import pytest

from trio_acp.testing.wire_check import validate_type
from trio_acp.testing.wire_check_v2 import V2FrameChecker, validate_v2_type
from trio_acp.v2.frames import initialize_request, tool_call_content, wants_v2
from trio_acp.v2.gateway import Gateway

SID = "sess-1"
CWD = "/home/user/project"


class Wire:
    """A v2 client and the v1 agent around one gateway; what each side got, in order."""

    def __init__(self) -> None:
        self.gateway = Gateway()
        self.check = V2FrameChecker()
        self.client: list[dict[str, Any]] = []
        self.agent: list[dict[str, Any]] = []

    def from_client(self, frame: dict[str, Any]) -> None:
        frame = {"jsonrpc": "2.0", **frame}
        self.check.received(frame)
        self._deliver(self.gateway.from_client(frame))

    def from_agent(self, frame: dict[str, Any]) -> None:
        self._deliver(self.gateway.from_agent({"jsonrpc": "2.0", **frame}))

    def _deliver(self, out: Any) -> None:
        for frame in out.to_client:
            assert self.check.sent(frame) == [], frame
            self.client.append(frame)
        self.agent += out.to_agent

    def take(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        client, agent = self.client, self.agent
        self.client, self.agent = [], []
        return client, agent

    def open_session(self) -> None:
        self.from_client({"id": "new", "method": "session/new", "params": {"cwd": CWD}})
        _, agent = self.take()
        assert agent[0]["params"] == {"cwd": CWD, "mcpServers": []}
        self.from_agent({"id": "new", "result": {"sessionId": SID, "modes": _MODES}})
        client, _ = self.take()
        assert client == [{"jsonrpc": "2.0", "id": "new", "result": {"sessionId": SID}}]

    def prompt(self, rid: Any, text: str) -> None:
        self.from_client(
            {
                "id": rid,
                "method": "session/prompt",
                "params": {"sessionId": SID, "prompt": [{"type": "text", "text": text}]},
            }
        )

    def update(self, update: dict[str, Any]) -> None:
        self.from_agent(
            {"method": "session/update", "params": {"sessionId": SID, "update": update}}
        )


_MODES = {
    "currentModeId": "ask",
    "availableModes": [{"id": "ask", "name": "Ask"}],
}


def states(frames: list[dict[str, Any]]) -> list[str]:
    return [
        f["params"]["update"]["state"]
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "state_update"
    ]


def kinds(frames: list[dict[str, Any]]) -> list[str]:
    return [
        f["params"]["update"]["sessionUpdate"]
        if f.get("method") == "session/update"
        else f.get("method", "response")
        for f in frames
    ]


@pytest.mark.parametrize(
    ("line", "v2"),
    [
        (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}', True),
        (
            b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":65535}}',
            True,
        ),
        (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}', False),
        (
            b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":true}}',
            False,
        ),
        (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2"}}', False),
        (b'{"jsonrpc":"2.0","id":0,"method":"session/new","params":{"protocolVersion":2}}', False),
        (b"[]", False),
        (b"\xff{", False),
    ],
)
def test_only_an_initialize_asking_for_2_or_later_is_v2(line: bytes, v2: bool) -> None:
    assert wants_v2(line) is v2


def test_initialize_is_negotiated_to_2_and_the_agent_is_asked_without_client_tools() -> None:
    wire = Wire()
    wire.from_client(
        {
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": 2,
                "info": {"name": "client", "version": "1"},
                "capabilities": {"auth": {"terminal": {}}},
            },
        }
    )
    _, agent = wire.take()
    params = agent[0]["params"]
    assert validate_type("InitializeRequest", params) == []
    assert params["protocolVersion"] == 1
    # No client file system or terminal: every tool of a v2 session runs locally.
    assert params["clientCapabilities"]["fs"] == {"readTextFile": False, "writeTextFile": False}
    assert params["clientCapabilities"]["terminal"] is False
    assert params["clientCapabilities"]["auth"] == {"terminal": True}
    # A local command's output streamed in Zed's terminal `_meta`, which becomes v2's
    # terminal updates (test_gateway_cancel.py).
    assert params["clientCapabilities"]["_meta"] == {"terminal_output": True}
    wire.from_agent(
        {
            "id": 0,
            "result": {
                "protocolVersion": 1,
                "agentInfo": {"name": "trio-acp", "version": "9"},
                "agentCapabilities": {
                    "loadSession": True,
                    "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                    "mcpCapabilities": {"http": True, "sse": False},
                    "sessionCapabilities": {"list": {}, "close": {}, "delete": {}},
                },
                "authMethods": [
                    {"id": "agent-id", "name": "Agent"},
                    {
                        "id": "term",
                        "name": "Terminal",
                        "type": "terminal",
                        "args": ["setup"],
                        "env": {"A": "1"},
                    },
                ],
            },
        }
    )
    client, _ = wire.take()
    result = client[0]["result"]
    assert result["protocolVersion"] == 2
    assert result["info"] == {"name": "trio-acp", "version": "9"}
    assert result["capabilities"] == {
        "session": {
            "prompt": {"image": {}, "embeddedContext": {}},
            "mcp": {"stdio": {}, "http": {}},
            "delete": {},
        }
    }
    assert result["authMethods"] == [
        {"type": "agent", "methodId": "agent-id", "name": "Agent"},
        {
            "type": "terminal",
            "methodId": "term",
            "name": "Terminal",
            "args": ["setup"],
            "env": [{"name": "A", "value": "1"}],
        },
    ]


def test_a_turn_is_accepted_at_once_and_reported_by_state_updates() -> None:
    wire = Wire()
    wire.open_session()
    wire.prompt(7, "hello")
    client, agent = wire.take()
    assert client[0]["id"] == 7
    message_id = client[0]["result"]["messageId"]
    assert client[1]["params"]["update"] == {
        "sessionUpdate": "user_message",
        "messageId": message_id,
        "content": [{"type": "text", "text": "hello"}],
    }
    assert states(client) == ["running"]
    # The agent gets a v1 prompt under the gateway's own id.
    (prompt,) = agent
    assert prompt["method"] == "session/prompt" and prompt["id"] != 7
    assert validate_type("PromptRequest", prompt["params"]) == []

    wire.update(
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m1",
            "content": {"type": "text", "text": "Hi"},
        }
    )
    wire.update(
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "m1",
            "content": {"type": "text", "text": "!"},
        }
    )
    wire.update({"sessionUpdate": "current_mode_update", "currentModeId": "ask"})
    wire.update(
        {
            "sessionUpdate": "plan",
            "entries": [{"content": "a", "priority": "high", "status": "pending"}],
        }
    )
    wire.update(
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t1",
            "title": "Edit a.py",
            "kind": "edit",
            "status": "pending",
            "content": [
                {"type": "diff", "path": "/p/a.py", "oldText": "a\n", "newText": "b\n"},
                {"type": "terminal", "terminalId": "client-term"},
            ],
        }
    )
    wire.from_agent({"id": prompt["id"], "result": {"stopReason": "end_turn"}})
    client, agent = wire.take()
    assert agent == []
    assert kinds(client) == [
        "agent_message",  # the message announced (content: []) before its first chunk
        "agent_message_chunk",
        "agent_message_chunk",
        "plan_update",
        "tool_call_update",
        "state_update",
    ]
    assert client[0]["params"]["update"] == {
        "sessionUpdate": "agent_message",
        "messageId": "m1",
        "content": [],
    }
    tool = client[4]["params"]["update"]
    # A v1 terminal item is the pseudo-terminal of a local command: v2's agent terminal.
    assert [c["type"] for c in tool["content"]] == ["diff", "terminal"]
    assert tool["content"][0]["changes"] == [{"operation": "modify", "path": "/p/a.py"}]
    assert "-a\n+b\n" in tool["content"][0]["patch"]["text"]
    assert client[-1]["params"]["update"] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "end_turn",
    }


def test_a_permission_question_is_framed_by_requires_action_and_running() -> None:
    wire = Wire()
    wire.open_session()
    wire.prompt(1, "run it")
    _, (prompt,) = wire.take()
    wire.from_agent(
        {
            "id": 50,
            "method": "session/request_permission",
            "params": {
                "sessionId": SID,
                "toolCall": {"toolCallId": "t1", "title": "ls", "kind": "execute"},
                "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
            },
        }
    )
    client, _ = wire.take()
    assert kinds(client) == ["state_update", "session/request_permission"]
    assert states(client) == ["requires_action"]
    question = client[1]["params"]
    assert question["title"] == "ls"
    assert question["subject"]["type"] == "tool_call"
    assert question["subject"]["toolCall"]["toolCallId"] == "t1"
    # A custom outcome (v2 allows `_` ones) is not an approval for the v1 agent.
    wire.from_client({"id": 50, "result": {"outcome": {"outcome": "_later"}}})
    client, agent = wire.take()
    assert agent == [{"jsonrpc": "2.0", "id": 50, "result": {"outcome": {"outcome": "cancelled"}}}]
    assert states(client) == ["running"]
    wire.from_agent({"id": prompt["id"], "result": {"stopReason": "end_turn"}})
    assert states(wire.take()[0]) == ["idle"]


def test_a_withdrawn_permission_question_resumes_running() -> None:
    wire = Wire()
    wire.open_session()
    wire.prompt(1, "run it")
    wire.take()
    wire.from_agent(
        {
            "id": 51,
            "method": "session/request_permission",
            "params": {
                "sessionId": SID,
                "toolCall": {"toolCallId": "t1"},
                "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"}],
            },
        }
    )
    wire.take()
    wire.from_agent({"method": "$/cancel_request", "params": {"requestId": 51}})
    client, _ = wire.take()
    assert kinds(client) == ["state_update", "$/cancel_request"]
    assert states(client) == ["running"]


def test_prompts_sent_during_a_turn_are_accepted_and_inserted_one_after_the_other() -> None:
    wire = Wire()
    wire.open_session()
    wire.prompt(1, "first")
    _, (first,) = wire.take()
    wire.prompt(2, "second")
    wire.prompt(3, "third")
    client, agent = wire.take()
    # Accepted at once, each with its own message id; not inserted yet.
    assert [f["id"] for f in client] == [2, 3]
    assert len({f["result"]["messageId"] for f in client}) == 2
    second_id = client[0]["result"]["messageId"]
    assert agent == []  # the agent still sees one prompt at a time
    wire.from_agent({"id": first["id"], "result": {"stopReason": "end_turn"}})
    client, agent = wire.take()
    assert kinds(client) == ["state_update", "user_message", "state_update"]
    assert states(client) == ["idle", "running"]
    assert client[1]["params"]["update"]["messageId"] == second_id
    assert [a["params"]["prompt"][0]["text"] for a in agent] == ["second"]
    wire.from_agent({"id": agent[0]["id"], "result": {"stopReason": "end_turn"}})
    client, agent = wire.take()
    assert [a["params"]["prompt"][0]["text"] for a in agent] == ["third"]


def test_cancel_drops_the_queued_prompts_and_ends_the_turn_cancelled() -> None:
    wire = Wire()
    wire.open_session()
    wire.prompt(1, "first")
    _, (first,) = wire.take()
    wire.prompt(2, "queued")
    wire.take()
    wire.from_client({"method": "session/cancel", "params": {"sessionId": SID}})
    client, agent = wire.take()
    assert client == []
    assert agent == [{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": SID}}]
    wire.from_agent({"id": first["id"], "result": {"stopReason": "cancelled"}})
    client, agent = wire.take()
    assert agent == []  # the queued prompt was never inserted
    assert [f["params"]["update"] for f in client] == [
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}
    ]


def test_a_turn_that_fails_after_insertion_ends_idle_with_the_error() -> None:
    wire = Wire()
    wire.open_session()
    wire.prompt(1, "boom")
    _, (prompt,) = wire.take()
    wire.from_agent({"id": prompt["id"], "error": {"code": -32603, "message": "the model failed"}})
    client, _ = wire.take()
    assert client[0]["params"]["update"] == {
        "sessionUpdate": "state_update",
        "state": "idle",
        "stopReason": "error",
        "error": {"code": -32603, "message": "the model failed"},
    }


def test_a_prompt_for_an_unknown_session_is_refused_by_the_agent_before_insertion() -> None:
    wire = Wire()
    wire.from_client(
        {
            "id": 9,
            "method": "session/prompt",
            "params": {"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]},
        }
    )
    client, agent = wire.take()
    assert client == [] and agent[0]["id"] == 9
    error = {"code": -32002, "message": "Resource not found"}
    wire.from_agent({"id": 9, "error": error})
    assert wire.take()[0] == [{"jsonrpc": "2.0", "id": 9, "error": error}]


@pytest.mark.parametrize(
    ("replay", "v1_method"),
    [({"type": "start"}, "session/load"), (None, "session/resume")],
)
def test_resume_replays_the_history_only_when_asked(replay: Any, v1_method: str) -> None:
    wire = Wire()
    params: dict[str, Any] = {"sessionId": SID, "cwd": CWD}
    if replay is not None:
        params["replayFrom"] = replay
    wire.from_client({"id": 4, "method": "session/resume", "params": params})
    _, (request,) = wire.take()
    assert request["method"] == v1_method
    assert request["params"] == {"sessionId": SID, "cwd": CWD, "mcpServers": []}
    if replay is not None:
        wire.update(
            {
                "sessionUpdate": "user_message_chunk",
                "messageId": "u1",
                "content": {"type": "text", "text": "old"},
            }
        )
    wire.from_agent({"id": 4, "result": {"modes": _MODES, "configOptions": []}})
    client, _ = wire.take()
    assert client[-1]["result"] == {"configOptions": []}
    # The session is this connection's now: a prompt to it is accepted.
    wire.prompt(5, "again")
    assert "messageId" in wire.take()[0][0]["result"]


def test_methods_v2_dropped_and_uncancellable_items_are_refused() -> None:
    wire = Wire()
    wire.open_session()
    wire.from_client({"id": 1, "method": "session/load", "params": {"sessionId": SID, "cwd": CWD}})
    wire.from_client(
        {"id": 2, "method": "tool_call/cancel", "params": {"sessionId": SID, "toolCallId": "t"}}
    )
    wire.from_client(
        {"id": 3, "method": "terminal/cancel", "params": {"sessionId": SID, "terminalId": "x"}}
    )
    client, agent = wire.take()
    assert agent == []
    assert [(f["id"], f["error"]["code"]) for f in client] == [
        (1, -32601),
        (2, -32602),
        (3, -32602),
    ]


def test_a_client_tool_request_never_reaches_a_v2_client() -> None:
    wire = Wire()
    wire.from_agent(
        {"id": 8, "method": "fs/read_text_file", "params": {"sessionId": SID, "path": "/a"}}
    )
    client, agent = wire.take()
    assert client == []
    assert agent[0]["id"] == 8 and agent[0]["error"]["code"] == -32601


def test_config_option_values_lose_v2s_id_tag() -> None:
    wire = Wire()
    wire.from_client(
        {
            "id": 1,
            "method": "session/set_config_option",
            "params": {"sessionId": SID, "configId": "mode", "type": "id", "value": "ask"},
        }
    )
    _, (request,) = wire.take()
    assert request["params"] == {"sessionId": SID, "configId": "mode", "value": "ask"}
    assert validate_type("SetSessionConfigOptionRequest", request["params"]) == []


def test_a_new_file_diff_is_an_add_with_a_patch() -> None:
    item = tool_call_content({"type": "diff", "path": "/p/new.txt", "newText": "x"})
    assert item is not None
    assert validate_v2_type("ToolCallContent", item) == []
    assert item["changes"] == [{"operation": "add", "path": "/p/new.txt"}]


def test_initialize_request_keeps_the_client_info() -> None:
    params = initialize_request({"protocolVersion": 2, "info": {"name": "c", "version": "1"}})
    assert params["clientInfo"] == {"name": "c", "version": "1"}


def test_the_commands_come_with_the_session_not_after_its_answer() -> None:
    v1_commands = [{"name": "help", "description": "Help.", "input": {"hint": "topic"}}]
    v2_commands = [
        {
            "type": "command",
            "name": "help",
            "description": "Help.",
            "input": {"type": "text", "hint": "topic"},
        }
    ]
    wire = Wire()
    wire.gateway = Gateway(available_commands=v2_commands)
    wire.from_client({"id": 1, "method": "session/new", "params": {"cwd": CWD}})
    wire.from_agent({"id": 1, "result": {"sessionId": SID}})
    wire.update({"sessionUpdate": "available_commands_update", "availableCommands": v1_commands})
    client, _ = wire.take()
    # In the answer (v2's NewSessionResponse has them); the agent's update right after
    # it would reach a v2 client as a late update of the session: not sent again.
    assert client == [
        {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID, "availableCommands": v2_commands}}
    ]
    # A later change of the commands is an update as usual.
    wire.update({"sessionUpdate": "available_commands_update", "availableCommands": []})
    assert kinds(wire.take()[0]) == ["available_commands_update"]


def test_options_and_mcp_servers_are_respelled_both_ways() -> None:
    wire = Wire()
    wire.from_client(
        {
            "id": 1,
            "method": "session/new",
            "params": {
                "cwd": CWD,
                "mcpServers": [
                    {"type": "stdio", "name": "fs", "command": "/bin/mcp"},
                    {"type": "http", "name": "web", "url": "http://127.0.0.1:1"},
                ],
            },
        }
    )
    _, (request,) = wire.take()
    assert validate_type("NewSessionRequest", request["params"]) == []
    assert request["params"]["mcpServers"] == [
        {"name": "fs", "command": "/bin/mcp", "args": [], "env": []},
        {"headers": [], "type": "http", "name": "web", "url": "http://127.0.0.1:1"},
    ]
    mode = {
        "id": "mode",
        "name": "Mode",
        "category": "mode",
        "type": "select",
        "currentValue": "ask",
        "options": [{"group": "g", "name": "G", "options": [{"value": "ask", "name": "Ask"}]}],
    }
    wire.from_agent({"id": 1, "result": {"sessionId": SID, "configOptions": [mode]}})
    client, _ = wire.take()
    (option,) = client[0]["result"]["configOptions"]
    assert option["configId"] == "mode" and "id" not in option
    assert option["options"][0]["groupId"] == "g"


def test_closing_a_session_at_work_drops_its_queue_and_ends_the_turn_cancelled() -> None:
    wire = Wire()
    wire.open_session()
    wire.prompt(1, "first")
    _, (first,) = wire.take()
    wire.prompt(2, "queued")
    wire.take()
    wire.from_client({"id": 3, "method": "session/close", "params": {"sessionId": SID}})
    _, agent = wire.take()
    assert [a["method"] for a in agent] == ["session/close"]
    # The v1 agent cancels the turn it closes; its answer to the prompt comes first.
    wire.from_agent({"id": first["id"], "result": {"stopReason": "cancelled"}})
    wire.from_agent({"id": 3, "result": {}})
    client, agent = wire.take()
    assert agent == []  # the queued prompt never reaches the agent
    assert [f["params"]["update"] for f in client[:1]] == [
        {"sessionUpdate": "state_update", "state": "idle", "stopReason": "cancelled"}
    ]
    assert client[1] == {"jsonrpc": "2.0", "id": 3, "result": {}}
    # Closed: a prompt to it is the agent's to refuse now.
    wire.prompt(4, "after close")
    client, agent = wire.take()
    assert client == [] and agent[0]["id"] == 4
