"""Error boundaries: a failing session ends alone; the agent's context manager raises
one exception, never a group."""

from __future__ import annotations

import pytest
import trio
from test_agent_in_process import Client, _start, _text, env, llm, loader  # noqa: F401  (fixtures)

from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.sessions.session import Session
from trio_acp.rpc import RequestError
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair


async def test_open_openhands_agent_raises_the_bodys_exception_itself():
    class Boom(Exception):
        pass

    with pytest.raises(Boom):  # not an ExceptionGroup around it
        async with open_openhands_agent(sdk_loader=object()):
            raise Boom


async def test_a_session_that_fails_ends_alone_and_says_so(env, tmp_path, monkeypatch):
    warm_up = Session._warm_up

    async def failing_warm_up(self):
        if self.cwd.endswith("doomed"):
            raise RuntimeError("the session's own task failed")
        await warm_up(self)

    monkeypatch.setattr(Session, "_warm_up", failing_warm_up)
    (tmp_path / "doomed").mkdir()
    (tmp_path / "fine").mkdir()
    with trio.fail_after(120):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, Client()) as (_, conn):
                doomed = await _start(conn, tmp_path / "doomed")
                fine = await conn.agent.new_session(cwd=str(tmp_path / "fine"), mcp_servers=[])
                with pytest.raises(RequestError) as info:
                    await conn.agent.prompt(session_id=doomed, prompt=_text("hello"))
                assert info.value.code == -32603
                assert "the session's own task failed" in info.value.message
                # The agent and the other session are unaffected.
                response = await conn.agent.prompt(
                    session_id=fine.session_id, prompt=_text(scenario_prompt("echo", "still here"))
                )
                assert response.stop_reason == "end_turn"
