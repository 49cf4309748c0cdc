"""End to end: the echo agent as a subprocess, driven by the official Python ACP client.

The client is the `acp` package from PyPI (asyncio), which nobody here wrote: it launches
`python examples/echo_agent.py` with `acp.spawn_agent_process` and talks to it over real
stdio pipes. Every frame in both directions is checked against the official JSON Schema
(from the npm package) through the connection's stream observer.

pytest-trio runs in trio_mode, so the test functions are sync and call `asyncio.run`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp")

from acp.connection import StreamDirection, StreamEvent  # noqa: E402
from acp.schema import (  # noqa: E402
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    Implementation,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallStart,
)

from trio_acp.testing.wire_check import FrameChecker  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ECHO_AGENT = ROOT / "examples" / "echo_agent.py"
TIMEOUT = 30.0


class RecordingClient:
    """An official-SDK client that records what the agent sends it."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permission_requests: list[dict[str, Any]] = []
        self.first_update = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.first_update.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ):
        self.permission_requests.append(
            {
                "session_id": session_id,
                "tool_call_id": tool_call.tool_call_id,
                "options": [o.option_id for o in options],
            }
        )
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id="yes")
        )

    def texts(self, session_id: str) -> list[str]:
        return [
            u.content.text
            for sid, u in self.updates
            if sid == session_id
            and isinstance(u, AgentMessageChunk)
            and isinstance(u.content, TextContentBlock)
        ]


class WireRecorder:
    """Records every frame through the official connection's stream observer.

    Checked afterwards, from both ends, by FrameChecker: the agent's checker gets the
    frames the agent received (`received`) and sent (`sent`); a second checker does the
    same from the client's side, so the client's frames are validated too. The observer
    may see a response before the request it answers (the request is reported after its
    send completes), so the requests are registered first: ids never repeat here.
    """

    def __init__(self) -> None:
        self.frames: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: StreamEvent) -> None:
        direction = "to_agent" if event.direction is StreamDirection.OUTGOING else "from_agent"
        self.frames.append((direction, event.message))

    def check(self) -> tuple[FrameChecker, FrameChecker]:
        agent_side, client_side = FrameChecker(), FrameChecker()
        for direction, frame in self.frames:
            (agent_side if direction == "to_agent" else client_side).received(frame)
        for direction, frame in self.frames:
            (agent_side if direction == "from_agent" else client_side).sent(frame)
        return agent_side, client_side


async def _scenario() -> dict[str, Any]:
    client = RecordingClient()
    wire = WireRecorder()
    out: dict[str, Any] = {}
    async with acp.spawn_agent_process(
        client,
        sys.executable,
        str(ECHO_AGENT),
        cwd=str(ROOT),
        transport_kwargs={"stderr": None},  # inherit: a PIPE nobody reads could fill up
    ) as (conn, process):
        conn._conn.add_observer(wire)

        init = await asyncio.wait_for(
            conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="official-python-e2e", version="0.0.1"),
            ),
            TIMEOUT,
        )
        out["init"] = init

        new = await asyncio.wait_for(conn.new_session(cwd=str(ROOT), mcp_servers=[]), TIMEOUT)
        sid = new.session_id
        out["sid"] = sid

        # A prompt with updates: every chunk is seen before prompt() returns.
        response = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[acp.text_block("flood 200")]), TIMEOUT
        )
        out["flood_stop"] = response.stop_reason
        out["flood_texts_at_return"] = list(client.texts(sid))
        response = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[acp.text_block("hello world")]), TIMEOUT
        )
        out["hello_stop"] = response.stop_reason
        out["hello_last"] = client.texts(sid)[-1]

        # Cancel mid `slow`, in a second session: nothing for it may follow the response.
        sid2 = (
            await asyncio.wait_for(conn.new_session(cwd=str(ROOT), mcp_servers=[]), TIMEOUT)
        ).session_id
        out["sid2"] = sid2
        client.first_update.clear()
        before = len(client.texts(sid2))
        prompt_task = asyncio.create_task(
            conn.prompt(session_id=sid2, prompt=[acp.text_block("slow 1000")])
        )
        while len(client.texts(sid2)) <= before:
            await asyncio.wait_for(client.first_update.wait(), TIMEOUT)
            client.first_update.clear()
        await conn.cancel(session_id=sid2)
        cancelled = await asyncio.wait_for(prompt_task, TIMEOUT)
        out["cancel_stop"] = cancelled.stop_reason
        out["slow_updates_at_return"] = len(client.texts(sid2))
        # Give a stray late update time to show up, then make sure none did.
        await asyncio.sleep(0.3)
        out["slow_updates_later"] = len(client.texts(sid2))
        # The session stays usable.
        again = await asyncio.wait_for(
            conn.prompt(session_id=sid2, prompt=[acp.text_block("hello again")]), TIMEOUT
        )
        out["again_stop"] = again.stop_reason
        out["again_last"] = client.texts(sid2)[-1]

        # The permission round trip: the client answers `yes`, the agent echoes it.
        ask = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=[acp.text_block("ask")]), TIMEOUT
        )
        out["ask_stop"] = ask.stop_reason
        out["permission_requests"] = list(client.permission_requests)
        out["ask_last"] = client.texts(sid)[-1]
        out["tool_calls"] = [
            u for s, u in client.updates if s == sid and isinstance(u, ToolCallStart)
        ]

        # An extension method: the official client prefixes `_`.
        out["ping"] = await asyncio.wait_for(
            conn.ext_method("echo/ping", {"x": 1, "s": "é"}), TIMEOUT
        )

        # An unknown method and an unknown extension method: -32601.
        for name, method in (("unknown", "session/unknown"), ("unknown_ext", "_nope/nothing")):
            try:
                await asyncio.wait_for(conn._conn.send_request(method, {}), TIMEOUT)
            except acp.RequestError as exc:
                out[name] = exc.code
            else:
                out[name] = "answered"

        # One more round trip so that every frame above has gone through the observer.
        await asyncio.wait_for(conn.ext_method("echo/ping", {}), TIMEOUT)
    out["returncode"] = process.returncode
    out["wire"] = wire
    out["client"] = client
    return out


@pytest.fixture(scope="module")
def scenario() -> dict[str, Any]:
    return asyncio.run(asyncio.wait_for(_scenario(), 60))


def test_initialize(scenario):
    init = scenario["init"]
    assert init.protocol_version == 1
    assert init.agent_info is not None
    assert init.agent_info.name == "trio-acp-echo"
    assert init.agent_info.version


def test_prompt_updates_arrive_before_the_response(scenario):
    assert scenario["flood_stop"] == "end_turn"
    assert [t.strip() for t in scenario["flood_texts_at_return"]] == [f"w{i}" for i in range(200)]
    assert scenario["hello_stop"] == "end_turn"
    assert scenario["hello_last"] == "hello world"
    client = scenario["client"]
    assert {sid for sid, _ in client.updates} <= {scenario["sid"], scenario["sid2"]}


def test_cancel_mid_slow_answers_cancelled_and_nothing_follows(scenario):
    assert scenario["cancel_stop"] == "cancelled"
    assert 1 <= scenario["slow_updates_at_return"] < 1000
    assert scenario["slow_updates_later"] == scenario["slow_updates_at_return"]
    # On the wire too: after the cancelled response, the only update for that session is
    # the next prompt's echo.
    frames = scenario["wire"].frames
    sid2 = scenario["sid2"]
    first_prompt_id = next(
        m["id"]
        for d, m in frames
        if d == "to_agent"
        and m.get("method") == "session/prompt"
        and m["params"]["sessionId"] == sid2
    )
    cancelled_at = next(
        i
        for i, (d, m) in enumerate(frames)
        if d == "from_agent" and m.get("id") == first_prompt_id and "result" in m
    )
    after = [
        m["params"]["update"]
        for d, m in frames[cancelled_at + 1 :]
        if d == "from_agent"
        and m.get("method") == "session/update"
        and m["params"]["sessionId"] == sid2
    ]
    assert [u["content"]["text"] for u in after] == ["hello again"]
    assert scenario["again_stop"] == "end_turn"
    assert scenario["again_last"] == "hello again"


def test_permission_flow(scenario):
    assert scenario["ask_stop"] == "end_turn"
    assert scenario["permission_requests"] == [
        {"session_id": scenario["sid"], "tool_call_id": "t1", "options": ["yes", "no"]}
    ]
    assert [t.tool_call_id for t in scenario["tool_calls"]] == ["t1"]
    assert "selected" in scenario["ask_last"] and "yes" in scenario["ask_last"]


def test_extension_method(scenario):
    assert scenario["ping"] == {"pong": {"x": 1, "s": "é"}}


def test_unknown_methods_answer_method_not_found(scenario):
    assert scenario["unknown"] == -32601
    assert scenario["unknown_ext"] == -32601


def test_every_frame_matches_the_official_schema(scenario):
    agent_side, client_side = scenario["wire"].check()
    assert agent_side.errors == []
    assert client_side.errors == []
    # Flood (200 updates) + slow + the rest: every agent frame went through the checker...
    assert agent_side.checked >= 200 + 10
    # ...and every client frame: initialize, 2 × new, 4 prompts, cancel, permission answer, 4 ext/unknown.
    assert client_side.checked >= 13
    assert agent_side.checked + client_side.checked == len(scenario["wire"].frames)


def test_agent_exits_after_stdin_closes(scenario):
    assert scenario["returncode"] == 0
