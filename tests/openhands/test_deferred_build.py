"""A `session/new` answered before the SDK is imported (sessions/deferred_build.py).

The SDK's import is held by a gate the test opens (`GatedLoader`), so what happens before
and after it is decided by the order of events, never by time: the answer comes while the
gate is shut; the first prompt waits for the build; a cancel answers at once, at each step
of the build (`turn_points`: `build`); a build failure is the prompt's answer.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from _inprocess import agent_env, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.permissions import turn_points
from trio_acp.rpc import RequestError
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair

TIMEOUT = 60


class GatedLoader:
    """The SDK's import as `SdkLoader` offers it, held until `open()` (the real import,
    shared by the test process, behind it)."""

    def __init__(self) -> None:
        self._gate = trio.Event()
        self.events: list[str] = []  # what happened, in order

    @property
    def ready(self) -> bool:
        return self._gate.is_set()

    def open(self) -> None:
        self.events.append("sdk loaded")
        self._gate.set()

    async def get(self) -> Any:
        await self._gate.wait()
        return await loader().get()


class FailingLoader(GatedLoader):
    async def get(self) -> Any:
        await self._gate.wait()
        raise RuntimeError("the OpenHands SDK failed to import: ImportError('no litellm')")


class Client:
    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, params: Any) -> None:
        self.updates.append(params.update)

    async def request_permission(self, params: Any) -> Any:
        raise AssertionError("always-approve: no permission requests here")

    def text(self) -> str:
        return "".join(
            u.content.text for u in self.updates if isinstance(u, schema.AgentMessageChunk)
        )


def _text(text: str) -> list[Any]:
    return [schema.TextContent(text=text)]


@pytest.fixture
def env(llm, tmp_path):
    return agent_env(llm, tmp_path / "home")


async def _received(agent: Any, sid: str) -> None:
    """Until the agent has registered the prompt sent to `sid` (its reader read it)."""
    session = agent._sessions[uuid.UUID(sid)]
    while not session.busy:
        await trio.lowlevel.checkpoint()


async def test_session_new_is_answered_before_the_sdk_is_loaded_and_the_prompt_waits(env, tmp_path):
    gate = GatedLoader()
    client = Client()
    with trio.fail_after(TIMEOUT):
        async with open_openhands_agent(env=env, sdk_loader=gate) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                new = await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])
                gate.events.append("session/new answered")
                assert not gate.ready
                assert new.modes is not None and new.modes.current_mode_id == "always-approve"
                assert {o.id for o in new.config_options} >= {"mode", "model"}
                session = agent._sessions[uuid.UUID(new.session_id)]
                assert session.conversation is None  # built once the SDK is in

                result: dict[str, Any] = {}

                async def prompt() -> None:
                    result["r"] = await conn.agent.prompt(
                        session_id=new.session_id, prompt=_text(scenario_prompt("echo", "hi"))
                    )
                    gate.events.append("prompt answered")

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(prompt)
                    await _received(agent, new.session_id)
                    await trio.testing.wait_all_tasks_blocked()
                    assert "r" not in result  # waiting for the build, not refused
                    gate.open()
                assert result["r"].stop_reason == "end_turn"
                assert "hi" in client.text()
    assert gate.events == ["session/new answered", "sdk loaded", "prompt answered"]
    # What only the built model tells came after the answer: the reasoning effort the
    # scripted model has, as a config_option_update with the complete list.
    updates = [u for u in client.updates if isinstance(u, schema.ConfigOptionUpdate)]
    assert updates and {o.id for o in updates[-1].config_options} >= {"mode", "model"}


async def test_a_cancel_while_the_sdk_loads_answers_cancelled_at_once(env, tmp_path):
    gate = GatedLoader()
    client = Client()
    with trio.fail_after(TIMEOUT):
        async with open_openhands_agent(env=env, sdk_loader=gate) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                result: dict[str, Any] = {}

                async def prompt() -> None:
                    result["r"] = await conn.agent.prompt(
                        session_id=sid, prompt=_text(scenario_prompt("echo", "never"))
                    )

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(prompt)
                    await _received(agent, sid)
                    await conn.agent.cancel(session_id=sid)
                assert result["r"].stop_reason == "cancelled"
                assert not gate.ready  # answered while the import still ran
                gate.open()
                after = await conn.agent.prompt(
                    session_id=sid, prompt=_text(scenario_prompt("echo", "after"))
                )
                assert after.stop_reason == "end_turn"
                assert "after" in client.text() and "never" not in client.text()


# Waiting for the import (`sdk`) is the test above: the cancel comes while the gate is shut.
@pytest.mark.parametrize("step", ["llm", "agent", "open"])
async def test_a_cancel_at_each_step_of_the_build(env, tmp_path, step):
    gate = GatedLoader()
    client = Client()
    sessions: dict[uuid.UUID, Any] = {}
    hit: list[str] = []

    def cancel_at(point: str, detail: Any) -> None:
        if point == "build" and detail == step:
            hit.append(detail)
            for session in sessions.values():
                session.request_cancel()

    with trio.fail_after(TIMEOUT), turn_points.stepping_in(cancel_at):
        async with open_openhands_agent(env=env, sdk_loader=gate) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                sessions.update(agent._sessions)
                result: dict[str, Any] = {}

                async def prompt() -> None:
                    result["r"] = await conn.agent.prompt(
                        session_id=sid, prompt=_text(scenario_prompt("echo", "never"))
                    )

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(prompt)
                    await _received(agent, sid)
                    gate.open()
                assert hit == [step]
                assert result["r"].stop_reason == "cancelled"
                # The build went on: the session works.
                after = await conn.agent.prompt(
                    session_id=sid, prompt=_text(scenario_prompt("echo", "after"))
                )
                assert after.stop_reason == "end_turn"
                assert "never" not in client.text()


async def test_model_settings_the_sdk_refuses_are_the_first_prompts_answer(llm, tmp_path):
    # Only the SDK validates the model's fields: a session answered before its import
    # learns of them when it is built, and says so on what needs the conversation.
    env = agent_env(llm, tmp_path / "home", LLM_TEMPERATURE="hot")
    gate = GatedLoader()
    with trio.fail_after(TIMEOUT):
        async with open_openhands_agent(env=env, sdk_loader=gate) as agent:
            async with open_in_memory_pair(agent, Client()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                gate.open()
                for _ in range(2):  # every prompt, not only the first
                    with pytest.raises(RequestError) as info:
                        await conn.agent.prompt(
                            session_id=sid, prompt=_text(scenario_prompt("echo", "hi"))
                        )
                    assert info.value.code == -32000
                    assert "the model settings are not usable" in info.value.message
                    assert "temperature" in info.value.message
                with pytest.raises(RequestError) as info:
                    await conn.agent.set_session_config_option(
                        session_id=sid, config_id="mode", value="always-ask"
                    )
                assert "the model settings are not usable" in info.value.message
                # With the SDK in, a new session is refused as it always was.
                with pytest.raises(RequestError) as info:
                    await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])
                assert "the model settings are not usable" in info.value.message


async def test_an_sdk_that_failed_to_import_is_the_prompts_answer(env, tmp_path):
    gate = FailingLoader()
    with trio.fail_after(TIMEOUT):
        async with open_openhands_agent(env=env, sdk_loader=gate) as agent:
            async with open_in_memory_pair(agent, Client()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                gate.open()
                with pytest.raises(RequestError) as info:
                    await conn.agent.prompt(session_id=sid, prompt=_text("hello"))
                assert info.value.code == -32603
                assert "could not start the session" in info.value.message
                assert "failed to import" in info.value.message


async def test_set_config_option_and_fork_wait_for_the_build(env, tmp_path):
    gate = GatedLoader()
    with trio.fail_after(TIMEOUT):
        async with open_openhands_agent(env=env, sdk_loader=gate) as agent:
            async with open_in_memory_pair(agent, Client()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                result: dict[str, Any] = {}

                async def set_mode() -> None:
                    result["set"] = await conn.agent.set_session_config_option(
                        session_id=sid, config_id="mode", value="always-ask"
                    )

                async def fork() -> None:
                    result["fork"] = await conn.agent.fork_session(
                        session_id=sid, cwd=str(tmp_path), mcp_servers=[]
                    )

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(set_mode)
                    nursery.start_soon(fork)
                    await trio.testing.wait_all_tasks_blocked()
                    assert result == {}
                    gate.open()
                current = {o.id: o.current_value for o in result["set"].config_options}
                assert current["mode"] == "always-ask"
                assert result["fork"].session_id != sid
                forked = await conn.agent.prompt(
                    session_id=result["fork"].session_id,
                    prompt=_text(scenario_prompt("echo", "forked")),
                )
                assert forked.stop_reason == "end_turn"


async def test_closing_a_session_while_it_is_built(env, tmp_path):
    gate = GatedLoader()
    with trio.fail_after(TIMEOUT):
        async with open_openhands_agent(env=env, sdk_loader=gate) as agent:
            async with open_in_memory_pair(agent, Client()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                await conn.agent.close_session(session_id=sid)
                assert not gate.ready  # never waited for the import
                with pytest.raises(RequestError) as info:
                    await conn.agent.prompt(session_id=sid, prompt=_text("hello"))
                assert info.value.code == -32002
