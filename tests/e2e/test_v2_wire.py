"""ACP v2 (draft) over the real `trio-acp` process: a client that asks for version 2.

One agent process, the scripted model, raw frames (`RawAgent`); every frame the agent
writes is checked against the official v2 schema (`V2FrameChecker`), which also fails any
call to a method a v2 client does not serve (`fs/*`, `terminal/*`).  The turns hold still
where the test needs them on a permission question (always-ask mode), never on timing.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]
import pytest

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.raw_agent import RawAgent
from trio_acp.testing.wire_check_v2 import V2FrameChecker

# The first session/new imports the SDK (seconds; a minute or more on a loaded machine).
pytestmark = pytest.mark.timeout(300)

Frame = dict[str, Any]


class V2Client:
    """A `RawAgent` spoken to in v2, every frame checked."""

    def __init__(self, agent: RawAgent) -> None:
        self.agent = agent
        self.check = V2FrameChecker()
        self._checked = 0

    def _check_new(self) -> None:
        for frame in self.agent.frames[self._checked :]:
            assert self.check.sent(frame) == [], frame
        self._checked = len(self.agent.frames)

    def send(self, frame: Frame) -> None:
        frame = {"jsonrpc": "2.0", **frame}
        self._check_new()  # what came before this request is not its answer
        self.check.received(frame)
        self.agent.send(frame)

    def request(self, method: str, params: Frame, *, timeout: float = 90.0) -> Frame:
        rid = self.agent.new_id()
        self.send({"id": rid, "method": method, "params": params})
        reply = self.agent.response(rid, timeout=timeout)
        self._check_new()
        return reply

    def wait(self, predicate: Callable[[Frame], bool], what: str, timeout: float = 90.0) -> Frame:
        frame = self.agent.read_until(predicate, timeout=timeout, what=what)
        self._check_new()
        return frame

    def prompt(self, sid: str, text: str) -> str:
        reply = self.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        )
        return str(reply["result"]["messageId"])

    def updates(self, sid: str, start: int = 0) -> list[Frame]:
        return [
            f["params"]["update"]
            for f in self.agent.frames[start:]
            if f.get("method") == "session/update" and f["params"]["sessionId"] == sid
        ]


def is_state(sid: str, state: str, stop: str | None = None) -> Callable[[Frame], bool]:
    def match(frame: Frame) -> bool:
        if frame.get("method") != "session/update" or frame["params"]["sessionId"] != sid:
            return False
        update = frame["params"]["update"]
        return (
            update.get("sessionUpdate") == "state_update"
            and update.get("state") == state
            and (stop is None or update.get("stopReason") == stop)
        )

    return match


def is_question(frame: Frame) -> bool:
    return frame.get("method") == "session/request_permission"


def allow(client: V2Client, question: Frame) -> None:
    option = next(o for o in question["params"]["options"] if o["kind"] == "allow_once")
    client.send(
        {
            "id": question["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": option["optionId"]}},
        }
    )


def test_a_v2_client_gets_v2_turns_queues_cancels_and_resumes(tmp_path: Path) -> None:
    persist, ws, tmp = tmp_path / "persist", tmp_path / "ws", tmp_path / "tmp"
    for d in (persist, ws, tmp):
        d.mkdir()
    with ScriptedLLM() as llm:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=str(persist),
            TMPDIR=str(tmp),
            TRIO_ACP_DEFAULT_MODE="always-ask",
            TRIO_ACP_WARM="0",
        )
        with RawAgent.spawn(env, cwd=str(ws)) as agent:
            client = V2Client(agent)
            init = client.request(
                "initialize",
                {"protocolVersion": 2, "info": {"name": "v2-test", "version": "1"}},
            )["result"]
            assert init["protocolVersion"] == 2
            assert init["info"]["name"] == "trio-acp"
            assert init["capabilities"]["session"]["prompt"]["image"] == {}

            # session/new without mcpServers (optional in v2).
            sid = client.request("session/new", {"cwd": str(ws)}, timeout=240)["result"][
                "sessionId"
            ]

            # -- a turn with a permission question; a second prompt sent meanwhile -------
            start = len(agent.frames)
            first = client.prompt(sid, scenario_prompt("terminal", "one", command="echo v2-one"))
            client.wait(is_state(sid, "running"), "running")
            question = client.wait(is_question, "the permission question")
            assert question["params"]["subject"]["type"] == "tool_call"
            second = client.prompt(sid, scenario_prompt("echo", "two"))
            assert second != first
            # Accepted, not inserted: no user message for it while the first turn waits.
            assert not [u for u in client.updates(sid, start) if u.get("messageId") == second]
            allow(client, question)
            client.wait(is_state(sid, "idle", "end_turn"), "the first turn's end")
            client.wait(is_state(sid, "idle", "end_turn"), "the second turn's end")
            turn = client.updates(sid, start)
            kinds = [
                u["state"] if u["sessionUpdate"] == "state_update" else u["sessionUpdate"]
                for u in turn
                if u["sessionUpdate"] in ("state_update", "user_message")
            ]
            assert kinds == [
                "user_message",
                "running",
                "requires_action",
                "running",
                "idle",
                "user_message",
                "running",
                "idle",
            ]
            users = [u for u in turn if u["sessionUpdate"] == "user_message"]
            assert [u["messageId"] for u in users] == [first, second]
            tool = [u for u in turn if u["sessionUpdate"] == "tool_call_update"]
            assert tool and tool[-1]["status"] == "completed"
            # Run locally (no client terminal): its output streamed in its v2 terminal.
            assert tool[-1]["content"] == [
                {"type": "terminal", "terminalId": tool[-1]["toolCallId"]}
            ]
            # A quick command streams nothing while it runs: its whole output is the
            # terminal's snapshot when it is over.
            (snapshot,) = [
                u["output"]["data"]
                for u in turn
                if u["sessionUpdate"] == "terminal_update" and "output" in u
            ]
            output = base64.b64decode(snapshot)
            assert b"v2-one" in output
            assert any(
                u["sessionUpdate"] == "agent_message_chunk" and "two" in u["content"]["text"]
                for u in turn
            )

            # -- cancel: the running turn ends cancelled, the queued prompt never runs ---
            start = len(agent.frames)
            client.prompt(sid, scenario_prompt("terminal", "three", command="echo v2-three"))
            question = client.wait(is_question, "the permission question")
            dropped = client.prompt(sid, scenario_prompt("echo", "four"))
            client.send({"method": "session/cancel", "params": {"sessionId": sid}})
            client.send({"id": question["id"], "result": {"outcome": {"outcome": "cancelled"}}})
            client.wait(is_state(sid, "idle", "cancelled"), "the cancelled turn's end")
            after = client.prompt(sid, scenario_prompt("echo", "five"))
            client.wait(is_state(sid, "idle", "end_turn"), "the next turn's end")
            ids = [u.get("messageId") for u in client.updates(sid, start)]
            assert dropped not in ids and after in ids

            # -- list, close, resume with the history replayed ---------------------------
            listed = client.request("session/list", {"cwd": str(ws)})["result"]["sessions"]
            assert sid in [s["sessionId"] for s in listed]
            assert client.request("session/close", {"sessionId": sid})["result"] == {}
            start = len(agent.frames)
            resumed = client.request(
                "session/resume",
                {"sessionId": sid, "cwd": str(ws), "replayFrom": {"type": "start"}},
                timeout=120,
            )
            assert "modes" not in resumed["result"]
            replay = client.updates(sid, start)
            texts = str(
                [u.get("content") for u in replay if u["sessionUpdate"] == "user_message_chunk"]
            )
            assert "v2-one" in texts and "five" in texts
            # Not in v2: session/load, tool_call/cancel of an item that offers no cancel.
            assert (
                client.request("session/load", {"sessionId": sid, "cwd": str(ws)})["error"]["code"]
                == -32601
            )
            refused = client.request(
                "tool_call/cancel", {"sessionId": sid, "toolCallId": tool[-1]["toolCallId"]}
            )
            assert refused["error"]["code"] == -32602
            assert client.check.errors == []
            assert agent.bad_lines == []
            assert agent.close() == 0


def test_a_v1_client_still_gets_v1(tmp_path: Path) -> None:
    env = dict(os.environ, TRIO_ACP_WARM="0", OPENHANDS_PERSISTENCE_DIR=str(tmp_path))
    with RawAgent.spawn(env, cwd=str(tmp_path)) as agent:
        init = agent.initialize()
        assert init["protocolVersion"] == 1
        assert "agentCapabilities" in init and "capabilities" not in init
        assert agent.close() == 0


def _running(seconds: str) -> list[int]:
    return [
        p.pid for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", seconds]
    ]


def test_a_v2_client_cancels_one_tool_call_or_terminal_and_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    # tool_call/cancel of a tool call waiting for permission, then of a running command,
    # then terminal/cancel of a running command's terminal: each turn ends end_turn.
    persist, ws, tmp = tmp_path / "persist", tmp_path / "ws", tmp_path / "tmp"
    for d in (persist, ws, tmp):
        d.mkdir()
    with ScriptedLLM() as llm:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=str(persist),
            TMPDIR=str(tmp),
            TRIO_ACP_DEFAULT_MODE="always-ask",
            TRIO_ACP_WARM="0",
        )
        with RawAgent.spawn(env, cwd=str(ws)) as agent:
            client = V2Client(agent)
            client.request("initialize", {"protocolVersion": 2})
            sid = client.request("session/new", {"cwd": str(ws)}, timeout=240)["result"][
                "sessionId"
            ]

            # -- waiting for permission: the question is answered "reject" for the user --
            start = len(agent.frames)
            asked = ws / "asked"
            client.prompt(sid, scenario_prompt("terminal", command=f"touch {asked}"))
            question = client.wait(is_question, "the permission question")
            call_id = question["params"]["subject"]["toolCall"]["toolCallId"]
            offered = [
                u
                for u in client.updates(sid, start)
                if u.get("toolCallId") == call_id and u.get("capabilities")
            ]
            assert offered and offered[-1]["capabilities"] == {"cancel": {}}
            reply = client.request("tool_call/cancel", {"sessionId": sid, "toolCallId": call_id})
            assert reply["result"] == {}
            # The question withdrawn, before the cancel's answer.
            withdrawn = [f for f in agent.frames[start:] if f.get("method") == "$/cancel_request"]
            assert [f["params"]["requestId"] for f in withdrawn] == [question["id"]]
            # A client still answers a withdrawn question; the agent was answered already.
            client.send({"id": question["id"], "result": {"outcome": {"outcome": "cancelled"}}})
            client.wait(is_state(sid, "idle", "end_turn"), "the turn's end")
            final = [u for u in client.updates(sid, start) if u.get("toolCallId") == call_id]
            assert final[-1]["status"] == "cancelled"
            assert final[-1]["capabilities"] is None
            assert not asked.exists()

            # -- a running command: stopped, the model goes on from its result -----------
            client.request(
                "session/set_config_option",
                {"sessionId": sid, "configId": "mode", "type": "id", "value": "always-approve"},
            )
            for method in ("tool_call/cancel", "terminal/cancel"):
                start = len(agent.frames)
                seconds = f"27.{uuid.uuid4().int % 10**6:06d}"
                marker = ws / f"marker-{uuid.uuid4().hex[:8]}"
                said = f"started-{uuid.uuid4().hex[:8]}"
                command = f"echo {said}; sleep {seconds}; touch {marker}"
                client.prompt(sid, scenario_prompt("terminal", command=command))
                # Its terminal streams what the command printed: it is running.
                chunk = client.wait(
                    lambda f, said=said: (
                        f.get("method") == "session/update"
                        and f["params"]["update"].get("sessionUpdate") == "terminal_output_chunk"
                        and said in base64.b64decode(f["params"]["update"]["data"]).decode()
                    ),
                    "the command's first output",
                )
                terminal_id = chunk["params"]["update"]["terminalId"]
                announced = [
                    u
                    for u in client.updates(sid, start)
                    if u["sessionUpdate"] == "terminal_update" and u["terminalId"] == terminal_id
                ]
                assert announced[0]["command"] == command
                assert announced[0]["capabilities"] == {"cancel": {}}
                tool = next(
                    u
                    for u in client.updates(sid, start)
                    if u["sessionUpdate"] == "tool_call_update"
                    and {"type": "terminal", "terminalId": terminal_id} in (u.get("content") or [])
                )
                params = (
                    {"sessionId": sid, "toolCallId": tool["toolCallId"]}
                    if method == "tool_call/cancel"
                    else {"sessionId": sid, "terminalId": terminal_id}
                )
                assert client.request(method, params)["result"] == {}
                client.wait(is_state(sid, "idle", "end_turn"), "the turn's end")
                turn = client.updates(sid, start)
                states = [u["state"] for u in turn if u["sessionUpdate"] == "state_update"]
                assert states == ["running", "idle"]  # the turn never stopped
                (exited,) = [
                    u for u in turn if u["sessionUpdate"] == "terminal_update" and "exitStatus" in u
                ]
                assert exited["exitStatus"] == {"exitCode": 130}
                assert exited["capabilities"] is None
                statuses = [
                    u["status"]
                    for u in turn
                    if u.get("toolCallId") == tool["toolCallId"] and "status" in u
                ]
                # tool_call/cancel ends the tool call `cancelled`; terminal/cancel leaves it
                # the status its command's end gives (v2).
                if method == "tool_call/cancel":
                    assert statuses[-1] == "cancelled"
                else:
                    assert statuses[-1] in ("completed", "failed")
                # The model went on: its next step is the scenario's finish message.
                assert any(u["sessionUpdate"] == "agent_message_chunk" for u in turn)
                assert _running(seconds) == []
                # The same shell runs the next command, after the stopped list's `touch`
                # would have run.
                client.prompt(sid, scenario_prompt("terminal", command="echo next"))
                client.wait(is_state(sid, "idle", "end_turn"), "the next turn's end")
                assert not marker.exists()
            assert client.check.errors == []
            assert agent.bad_lines == []
            assert agent.close() == 0
