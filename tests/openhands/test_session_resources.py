"""What a closed session gives back, in-process (the SDK imported once for the module).

Figures for many sessions are in bench/concurrency.py; here, the behaviour: once a session
is closed, nothing of it stays reachable — not its SDK conversation, nor the HTTP clients
litellm cached for its conversation's private event loop (loop_thread.py).
"""

from __future__ import annotations

import gc
import sys
import uuid
import weakref

import pytest
import trio

from _inprocess import agent_env, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair


@pytest.fixture
def env(llm, tmp_path):
    return agent_env(llm, tmp_path / "home", TRIO_ACP_PUBLIC_SKILLS="0")


class Client:
    async def session_update(self, params):
        pass

    async def request_permission(self, params):
        raise AssertionError("no permission requests here")


def _closed(client: object) -> bool:
    # litellm caches an `AsyncOpenAI` (its httpx client in `_client`) or its own
    # `AsyncHTTPHandler` (in `client`).
    inner = getattr(client, "_client", None) or getattr(client, "client", None)
    return bool(getattr(inner, "is_closed", False))


async def test_a_closed_session_leaves_nothing_reachable(env, tmp_path):
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, Client()) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            reply = await conn.agent.prompt(
                session_id=sid,
                prompt=[schema.TextContent(text=scenario_prompt("echo", "hello"))],
            )
            assert reply.stop_reason == "end_turn"
            session = agent._sessions[uuid.UUID(sid)]
            loop_thread = session.conversation._loop
            conversation = weakref.ref(session.conversation.sdk_conversation)
            del session
            cache = sys.modules["litellm"].in_memory_llm_clients_cache.cache_dict
            suffix = f"-{id(loop_thread._loop)}"
            mine = [cache[k] for k in cache if k.endswith(suffix)]
            assert mine, list(cache)  # the model call cached its clients for this loop

            await conn.agent.close_session(session_id=sid)
            await trio.to_thread.run_sync(loop_thread._thread.join, 30)
            assert not loop_thread._thread.is_alive()
            assert [k for k in cache if k.endswith(suffix)] == []
            assert all(_closed(c) for c in mine), mine
            del mine, loop_thread
            # Released once the session's last tasks have ended (they end with its close).
            for _ in range(100):
                gc.collect()
                if conversation() is None:
                    break
                await trio.sleep(0.1)
            assert conversation() is None
