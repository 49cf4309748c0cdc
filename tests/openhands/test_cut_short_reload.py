"""A turn cut short keeps what it showed: a reload shows the reply the user read (issue 22.2).

The SDK saves a reply only once its model call is over. A cancel mid-stream, or a model
call that fails mid-stream, ends the turn with no event for what was streamed: the turn
journal (sessions/journal.py) held it, and was cleared when the turn ended, so a
`session/load` — in this process or the next — showed nothing of it. Now the turn keeps
it in the conversation before it answers (recovery.unsaved_text), ending with the note
that says why it stops there.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import trio

from _inprocess import RecordingClient, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.translate.interruptions import CANCEL_TEXT, FAILED_TEXT
from trio_acp.rpc import RequestError
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair

WAIT = 60.0  # a bound against hanging, never reached when the test passes


def _text(updates: list[Any]) -> str:
    return "".join(
        u.content.text
        for u in updates
        if isinstance(u, schema.AgentMessageChunk) and isinstance(u.content, schema.TextContent)
    )


async def _reloaded(env: dict[str, str], cwd: Path, sid: str) -> list[Any]:
    """`session/load` of `sid` by a new agent (a new process's view): what it replays."""
    client = RecordingClient()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            with trio.fail_after(WAIT):
                await conn.agent.load_session(session_id=sid, cwd=str(cwd), mcp_servers=[])
    return client.updates


async def test_text_streamed_before_a_cancel_is_kept(env, llm, tmp_path):
    client = RecordingClient()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            session = agent._sessions[uuid.UUID(sid)]
            result: dict[str, Any] = {}

            async def run_prompt() -> None:
                result["r"] = await conn.agent.prompt(
                    session_id=sid,
                    prompt=[
                        schema.TextContent(text=scenario_prompt("slow", chunks=2000, delay_ms=20))
                    ],
                )

            with trio.fail_after(WAIT):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(run_prompt)
                    while len(client.of(schema.AgentMessageChunk)) < 5:
                        await trio.sleep(0.01)
                    session.request_cancel()
            shown = _text(client.updates)
    assert result["r"].stop_reason == "cancelled"
    assert "w0001 " in shown
    replayed = _text(await _reloaded(env, tmp_path, sid))
    assert f"{shown}\n\n{CANCEL_TEXT}" in replayed


async def test_text_streamed_before_a_model_failure_is_kept(env, llm, tmp_path):
    # `truncate`: half the reply streams, then the connection closes; one attempt per call.
    client = RecordingClient()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            failed = None
            with trio.fail_after(WAIT):
                try:
                    await conn.agent.prompt(
                        session_id=sid,
                        prompt=[schema.TextContent(text=scenario_prompt("truncate"))],
                    )
                except RequestError as exc:
                    failed = exc
            shown = _text(client.updates)
    assert failed is not None
    assert shown.strip()
    replayed = _text(await _reloaded(env, tmp_path, sid))
    assert FAILED_TEXT in replayed
    # What was shown, up to the cut-off marker the live turn added to it.
    assert shown.split(" […", 1)[0] in replayed
