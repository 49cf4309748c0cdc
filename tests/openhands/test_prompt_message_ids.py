"""A prompt's message id (the one a v2 client was answered with; v2/gateway.py passes it on
in `_meta.trioAcp.messageId`) comes back on the user message when the session is loaded
(ACP-RESUME-204; translate/messages.py keeps it as the SDK user event's `sender`)."""

from __future__ import annotations

import uuid

import trio
from test_stored_events import check_against_the_sdk

from _inprocess import RecordingClient, agent_env, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair

TIMEOUT = 120


async def test_a_replayed_user_message_has_its_prompts_message_id(tmp_path, llm):
    ws = tmp_path / "ws"
    ws.mkdir()
    env = agent_env(llm, tmp_path / "home")
    mid = f"user-message-{uuid.uuid4()}"
    with trio.fail_after(TIMEOUT):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, RecordingClient()) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(ws), mcp_servers=[])).session_id
                for text, meta in [("first", {"trioAcp": {"messageId": mid}}), ("second", None)]:
                    await conn.agent.prompt(
                        session_id=sid,
                        prompt=[schema.TextContent(text=scenario_prompt("echo", text))],
                        meta=meta,
                    )
        client = RecordingClient()
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                await conn.agent.load_session(session_id=sid, cwd=str(ws), mcp_servers=[])
    users = [u for u in client.updates if isinstance(u, schema.UserMessageChunk)]
    assert [u.message_id for u in users if "first" in u.content.text] == [mid]
    # Without one, the message's own id, as before.
    [second] = [u for u in users if "second" in u.content.text]
    assert second.message_id != mid and uuid.UUID(second.message_id)
    # The load replayed views of the files (sdk/stored_events.py): the SDK's events give
    # the same replay, the sender included.
    check_against_the_sdk(tmp_path / "home" / "conversations" / uuid.UUID(sid).hex, str(ws))
