"""The public entry points for running the agent inside a Trio program
(`trio_acp.openhands`: `open_openhands`, `open_openhands_agent`; README, "The library")."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import pytest
import trio

from _inprocess import RecordingClient, agent_env, loader
from trio_acp import openhands, schema
from trio_acp.credentials import MASK
from trio_acp.openhands import agent as agent_module
from trio_acp.rpc import RequestError
from trio_acp.testing import Reply, Scenario, ScriptedLLM, ToolCall, scenario_prompt


async def test_a_real_turn_through_the_public_entry_point(env, tmp_path):
    client = RecordingClient()
    with trio.fail_after(120):
        async with openhands.open_openhands(client, env=env, sdk_loader=loader()) as agent:
            await agent.initialize(protocol_version=1)
            sid = (await agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            reply = await agent.prompt(
                session_id=sid, prompt=[schema.TextContent(text="Hello there")]
            )
    assert reply.stop_reason == "end_turn"
    text = "".join(u.content.text for u in client.of(schema.AgentMessageChunk))
    assert "Hello there" in text  # the scripted model's default scenario echoes


async def test_a_refused_request_is_one_request_error(env, tmp_path):
    unknown = "00000000-0000-4000-8000-000000000000"
    with trio.fail_after(60):
        async with openhands.open_openhands(
            RecordingClient(), env=env, sdk_loader=loader()
        ) as agent:
            await agent.initialize(protocol_version=1)
            with pytest.raises(RequestError) as caught:
                await agent.prompt(session_id=unknown, prompt=[schema.TextContent(text="hi")])
    assert unknown in str(caught.value.data) or unknown in caught.value.message


async def test_the_bodys_exception_comes_out_as_itself_never_a_group(env):
    with trio.fail_after(60), pytest.raises(KeyError, match="from the body"):
        async with openhands.open_openhands(
            RecordingClient(), env=env, sdk_loader=loader()
        ) as agent:
            await agent.initialize(protocol_version=1)
            raise KeyError("from the body")


class CancelsMidStream(RecordingClient):
    """Cancels `scope` at the turn's first streamed text: the model then stalls forever
    (the `stall` scenario), so the turn is in flight when the cancel lands."""

    def __init__(self, scope: trio.CancelScope) -> None:
        super().__init__()
        self.scope = scope

    async def session_update(self, params: schema.SessionNotification) -> None:
        await super().session_update(params)
        if isinstance(params.update, schema.AgentMessageChunk):
            self.scope.cancel()


async def test_a_cancel_from_the_program_mid_turn_closes_the_agent_and_its_sessions(env, tmp_path):
    # The program's own cancel scope around the block, cancelled while a turn streams: the
    # block ends (closing the session and its stalled model call), nothing raises.
    with trio.fail_after(120):
        with trio.CancelScope() as scope:
            client = CancelsMidStream(scope)
            async with openhands.open_openhands(client, env=env, sdk_loader=loader()) as agent:
                await agent.initialize(protocol_version=1)
                sid = (await agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                await agent.prompt(
                    session_id=sid, prompt=[schema.TextContent(text=scenario_prompt("stall"))]
                )
        assert scope.cancelled_caught
    assert client.of(schema.AgentMessageChunk)


async def test_a_client_without_the_required_methods_is_refused_at_once(env):
    class NoPermissions:
        async def session_update(self, params: schema.SessionNotification) -> None:
            pass

    with trio.fail_after(60), pytest.raises(TypeError, match="request_permission"):
        async with openhands.open_openhands(NoPermissions(), env=env, sdk_loader=loader()):  # type: ignore[arg-type]
            pass


async def test_open_openhands_agent_is_the_agent_existing_callers_get(env):
    async with openhands.open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        assert isinstance(agent, openhands.OpenHandsAgent)
    async with agent_module.open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        assert isinstance(agent, openhands.OpenHandsAgent)


def test_the_pure_modules_do_not_import_the_agent_with_their_package():
    # `trio_acp.openhands` exports its entry points lazily: every module under it imports
    # the package first, and the agent's modules would cost each pure test file ~1 s.
    code = (
        "import sys, trio_acp.openhands.translate, trio_acp.openhands.permissions.policy\n"
        "heavy = ('trio', 'openhands', 'litellm', 'trio_acp.openhands.agent',"
        " 'trio_acp.openhands.embedding', 'trio_acp.connection')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy) and"
        " (m in heavy or m.startswith(tuple(h + '.' for h in heavy)))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


class AsksAndRefuses(RecordingClient):
    """Keeps every permission request as its wire JSON and refuses it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        self.asked.append(json.dumps(schema.to_wire(params)))
        option = next(o for o in params.options if o.kind == "reject_once")
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id=option.option_id)
        )


async def test_the_agents_credentials_are_masked_for_an_in_process_client(tmp_path):
    # The in-memory stream of `open_openhands` passes the same mask as stdio does (the
    # connection's writer): a permission request and an error message that quote the key
    # reach the program with the key masked.
    key = "sk-embed-" + secrets.token_hex(16)
    scenarios = [
        Scenario(
            "echo-key",
            [
                Reply(
                    tool_calls=[
                        ToolCall("terminal", {"command": f"echo {key}", "security_risk": "LOW"})
                    ]
                ),
                Reply(text="Not run."),
            ],
            "a command quoting the key",
        ),
        Scenario(
            "auth-401",
            [Reply(fault="http401", fault_message=f"Incorrect API key provided: {key}")],
            "the provider quotes the key",
        ),
    ]
    client = AsksAndRefuses()
    with ScriptedLLM(scenarios=scenarios) as llm:
        env = agent_env(llm, tmp_path / "home", LLM_API_KEY=key, TRIO_ACP_DEFAULT_MODE="always-ask")
        with trio.fail_after(120):
            async with openhands.open_openhands(client, env=env, sdk_loader=loader()) as agent:
                await agent.initialize(protocol_version=1)
                sid = (await agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                await agent.prompt(
                    session_id=sid,
                    prompt=[schema.TextContent(text=scenario_prompt("echo-key"))],
                )
                with pytest.raises(RequestError) as caught:
                    await agent.prompt(
                        session_id=sid,
                        prompt=[schema.TextContent(text=scenario_prompt("auth-401"))],
                    )
    assert client.asked, "the command was not asked for"
    error = json.dumps([caught.value.message, caught.value.data])
    for seen in [*client.asked, error]:
        assert key not in seen and key[-24:] not in seen
    assert MASK in client.asked[0]
    assert MASK in error
