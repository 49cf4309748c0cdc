"""What a session's model calls carry for the provider's routing, on the scripted model.

OpenRouter sends a conversation's calls back to the endpoint that holds its warm prompt cache
only when they name the conversation (`session_id` in the body); without it, it keys the route
off the opening messages, which change when the agent condenses. The SDK adds it for models
that go through OpenRouter (an `openrouter/` model, or an `openrouter.ai` base URL), with the
conversation's id: here the ACP session's id. A routing body the user configured
(`litellm_extra_body`, e.g. OpenRouter's `provider.only`) must survive it, and no other
provider may get the field (OpenAI's API refuses arguments it does not know).
"""

from __future__ import annotations

import json

import trio

from _inprocess import RecordingClient, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair

ROUTING = {"provider": {"only": ["scripted"]}}


async def _two_turns(env, cwd) -> str:
    with trio.fail_after(120):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, RecordingClient()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(cwd), mcp_servers=[])).session_id
                for word in ("one", "two"):
                    text = scenario_prompt("echo", word)
                    response = await conn.agent.prompt(
                        session_id=sid, prompt=[schema.TextContent(text=text)]
                    )
                    assert response.stop_reason == "end_turn"
    return sid


async def test_an_openrouter_models_calls_name_the_session_for_sticky_routing(env, tmp_path, llm):
    env.update(LLM_MODEL="openrouter/scripted", LLM_LITELLM_EXTRA_BODY=json.dumps(ROUTING))
    before = len(llm.requests)
    sid = await _two_turns(env, tmp_path)
    bodies = [r.body for r in llm.requests[before:]]
    assert len(bodies) == 2
    for body in bodies:
        assert body["session_id"] == sid
        assert body["provider"] == ROUTING["provider"]


async def test_other_providers_calls_carry_no_session_id(env, tmp_path, llm):
    before = len(llm.requests)
    await _two_turns(env, tmp_path)
    bodies = [r.body for r in llm.requests[before:]]
    assert len(bodies) == 2
    assert all("session_id" not in body for body in bodies)
