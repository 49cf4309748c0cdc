"""The typed connections, both ends in memory, with the echo agent from examples/."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_acp import schema
from trio_acp.connection import (
    AgentHooks,
    CapabilityError,
    open_agent_connection,
    open_client_connection,
)
from trio_acp.rpc import ErrorCode, RequestError
from trio_acp.testing.pair import open_in_memory_pair

_spec = importlib.util.spec_from_file_location(
    "echo_agent", Path(__file__).resolve().parents[2] / "examples" / "echo_agent.py"
)
echo_agent = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(echo_agent)


class RecordingClient:
    def __init__(self, permission_outcome=None) -> None:
        self.updates: list[schema.SessionNotification] = []
        self.permission_requests: list[schema.RequestPermissionRequest] = []
        self.permission_outcome = permission_outcome or schema.SelectedPermissionOutcome(
            option_id="yes"
        )
        self.first_update = trio.Event()

    async def session_update(self, params: schema.SessionNotification) -> None:
        self.updates.append(params)
        self.first_update.set()

    async def request_permission(self, params):
        self.permission_requests.append(params)
        if self.permission_outcome == "wait":
            await trio.sleep_forever()
        return schema.RequestPermissionResponse(outcome=self.permission_outcome)

    def texts(self) -> str:
        return "".join(
            u.update.content.text
            for u in self.updates
            if isinstance(u.update, schema.AgentMessageChunk)
        )


async def _session(agent_proxy) -> str:
    init = await agent_proxy.initialize(protocol_version=1)
    assert init.protocol_version == 1
    new = await agent_proxy.new_session(cwd="/tmp", mcp_servers=[])
    return new.session_id


async def test_prompt_updates_arrive_before_the_response():
    client = RecordingClient()
    async with open_in_memory_pair(echo_agent.EchoAgent(), client) as (_, conn):
        sid = await _session(conn.agent)
        response = await conn.agent.prompt(
            session_id=sid, prompt=[schema.TextContent(text="flood 500")]
        )
        assert response.stop_reason == "end_turn"
        # Every update of the turn was delivered before prompt() returned, in order.
        assert len(client.updates) == 500
        assert client.texts().split() == [f"w{i}" for i in range(500)]
        assert all(u.session_id == sid for u in client.updates)


async def test_cancel_mid_turn_answers_cancelled_and_session_stays_usable():
    client = RecordingClient()
    async with open_in_memory_pair(echo_agent.EchoAgent(), client) as (_, conn):
        sid = await _session(conn.agent)
        async with trio.open_nursery() as nursery:
            result = {}

            async def run():
                result["r"] = await conn.agent.prompt(
                    session_id=sid, prompt=[schema.TextContent(text="slow 1000")]
                )

            nursery.start_soon(run)
            await client.first_update.wait()
            await conn.agent.cancel(session_id=sid)
        assert result["r"].stop_reason == "cancelled"
        again = await conn.agent.prompt(
            session_id=sid, prompt=[schema.TextContent(text="hello again")]
        )
        assert again.stop_reason == "end_turn"
        assert client.texts().endswith("hello again")


async def test_cancel_while_agent_awaits_permission_does_not_deadlock():
    # trio-jsonrpc deadlocked here: session/cancel arriving while a handler awaits a
    # client request. The client answers `cancelled` only after seeing the cancel.
    client = RecordingClient(permission_outcome="wait")
    async with open_in_memory_pair(echo_agent.EchoAgent(), client) as (_, conn):
        sid = await _session(conn.agent)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                result = {}

                async def run():
                    result["r"] = await conn.agent.prompt(
                        session_id=sid, prompt=[schema.TextContent(text="ask")]
                    )

                nursery.start_soon(run)
                while not client.permission_requests:
                    await trio.sleep(0.01)
                await conn.agent.cancel(session_id=sid)
        assert result["r"].stop_reason == "cancelled"


async def test_permission_round_trip():
    client = RecordingClient()
    async with open_in_memory_pair(echo_agent.EchoAgent(), client) as (_, conn):
        sid = await _session(conn.agent)
        await conn.agent.prompt(session_id=sid, prompt=[schema.TextContent(text="ask")])
        assert client.permission_requests[0].tool_call.tool_call_id == "t1"
        assert "selected" in client.texts()


async def test_extension_method_and_unknown_methods():
    async with open_in_memory_pair(echo_agent.EchoAgent(), RecordingClient()) as (_, conn):
        assert await conn.agent.ext_method("_echo/ping", {"x": 1}) == {"pong": {"x": 1}}
        with pytest.raises(RequestError) as info:
            await conn.agent.ext_method("_nope", {})
        assert info.value.code == ErrorCode.METHOD_NOT_FOUND
        # Optional methods the agent lacks answer -32601, not a crash.
        with pytest.raises(RequestError) as info:
            await conn.agent.load_session(session_id="x", cwd="/tmp", mcp_servers=[])
        assert info.value.code == ErrorCode.METHOD_NOT_FOUND
        with pytest.raises(RequestError) as info:
            await conn.peer.request("session/unknown", {})
        assert info.value.code == ErrorCode.METHOD_NOT_FOUND


async def test_invalid_params_answer_32602_and_connection_survives():
    async with open_in_memory_pair(echo_agent.EchoAgent(), RecordingClient()) as (_, conn):
        await conn.agent.initialize(protocol_version=1)
        with pytest.raises(RequestError) as info:
            await conn.peer.request(
                "session/prompt", {"sessionId": "x", "prompt": {"not": "a list"}}
            )
        assert info.value.code == ErrorCode.INVALID_PARAMS
        assert "prompt" in json.dumps(info.value.data)
        new = await conn.agent.new_session(cwd="/tmp", mcp_servers=[])
        assert new.session_id


async def test_agent_must_not_call_unadvertised_client_capabilities():
    class Probe(AgentHooks):
        async def initialize(self, params):
            return schema.InitializeResponse(protocol_version=1)

        async def new_session(self, params):
            out = {}
            for name, call in [
                ("read", lambda: self.client.read_text_file(session_id="s", path="/x")),
                (
                    "write",
                    lambda: self.client.write_text_file(session_id="s", path="/x", content=""),
                ),
                ("terminal", lambda: self.client.create_terminal(session_id="s", command="ls")),
            ]:
                try:
                    await call()
                    out[name] = "called"
                except CapabilityError:
                    out[name] = "refused"
            self.outcome = out
            return schema.NewSessionResponse(session_id="s")

        async def prompt(self, params):
            raise AssertionError

        async def cancel(self, params):
            pass

        def on_connect(self, client):
            self.client = client

    probe = Probe()
    client = RecordingClient()
    async with open_in_memory_pair(probe, client) as (_, conn):
        # The official Python client omits clientCapabilities entirely: all unsupported.
        await conn.peer.request("initialize", {"protocolVersion": 1})
        await conn.agent.new_session(cwd="/tmp", mcp_servers=[])
    assert probe.outcome == {"read": "refused", "write": "refused", "terminal": "refused"}


async def test_required_methods_are_checked_up_front():
    class Incomplete:
        async def initialize(self, params):
            return schema.InitializeResponse(protocol_version=1)

    a, _ = trio.testing.memory_stream_pair()
    with pytest.raises(TypeError, match="new_session"):
        async with open_agent_connection(a, Incomplete()):
            pass
    with pytest.raises(TypeError, match="request_permission"):
        async with open_client_connection(a, object()):
            pass


class _Minimal:
    """The required methods and nothing else."""

    def __init__(self) -> None:
        self.prompts: list[schema.PromptRequest] = []

    async def initialize(self, params):
        return schema.InitializeResponse(protocol_version=1)

    async def new_session(self, params):
        return schema.NewSessionResponse(session_id="s")

    async def prompt(self, params):
        self.prompts.append(params)
        return schema.PromptResponse(stop_reason="end_turn")

    async def cancel(self, params):
        pass


async def test_an_agent_hooks_subclass_hears_of_its_connection_and_of_prompts_as_read():
    heard: list[object] = []

    class Hooked(_Minimal, AgentHooks):
        def on_connect(self, client):
            heard.append(("connect", client))

        def prompt_received(self, params):
            heard.append(("received", params))

    agent = Hooked()
    with trio.fail_after(10):
        async with open_in_memory_pair(agent, RecordingClient()) as (agent_conn, conn):
            await _session(conn.agent)
            await conn.agent.prompt(session_id="s", prompt=[schema.TextContent(text="hi")])
    assert heard[0] == ("connect", agent_conn.client)
    # The hook and the agent's `prompt` get the same object (decoded once, when read).
    assert heard[1][0] == "received" and heard[1][1] is agent.prompts[0]


async def test_an_agent_without_hooks_is_served_and_hears_nothing_more():
    agent = _Minimal()
    with trio.fail_after(10):
        async with open_in_memory_pair(agent, RecordingClient()) as (_, conn):
            await _session(conn.agent)
            response = await conn.agent.prompt(session_id="s", prompt=[])
    assert response.stop_reason == "end_turn" and len(agent.prompts) == 1


async def test_hooks_defined_without_agent_hooks_are_refused_not_silently_dropped():
    # Written when the hooks were found by name: they would no longer be called.
    class Old(_Minimal):
        def on_connect(self, client):
            raise AssertionError("not called")

        def prompt_received(self, params):
            raise AssertionError("not called")

    a, _ = trio.testing.memory_stream_pair()
    with pytest.raises(TypeError, match="on_connect and prompt_received.*AgentHooks"):
        async with open_agent_connection(a, Old()):
            pass
