"""End to end: model failures as an editor sees them, `trio-acp` under the official Python client.

One agent process for all checks (its SDK import costs ~10 s): a rejected API key fails
at once with a message that says what to do, and a `session/cancel` during the back-off
before a retry answers `cancelled` before that back-off could have ended.
"""

from __future__ import annotations

import asyncio

import pytest

acp = pytest.importorskip("acp")

from _oh_harness import TIMEOUT, Client, Wire, _prompt, _run, agent_env, new_session, trio_acp_agent  # noqa: E402
from acp.exceptions import RequestError as AcpRequestError  # noqa: E402
from acp.schema import AgentThoughtChunk, TextContentBlock  # noqa: E402

from trio_acp.testing import scenario_prompt  # noqa: E402


def _thoughts(client: Client) -> str:
    return "".join(
        u.content.text
        for u in client.of(AgentThoughtChunk)
        if isinstance(u.content, TextContentBlock)
    )


async def _failures(llm, home, ws):
    client, wire, out = Client(), Wire(), {}
    env = agent_env(llm, home)
    # Our default attempts (not the harness's single one), with a ten-minute back-off:
    # a turn that ends before it did so because the cancel cut it short.
    del env["LLM_NUM_RETRIES"]
    env.update(LLM_RETRY_MIN_WAIT="600", LLM_RETRY_MAX_WAIT="600")
    async with trio_acp_agent(client, wire, env) as (conn, process):
        sid = (await new_session(conn, ws)).session_id

        with pytest.raises(AcpRequestError) as info:
            await _prompt(conn, wire, sid, scenario_prompt("error401"))
        out["auth"] = info.value
        out["auth_calls"] = [r.outcome for r in llm.requests]

        llm.clear_requests()
        task = asyncio.create_task(_prompt(conn, wire, sid, scenario_prompt("error500")))
        for _ in range(int(TIMEOUT * 20)):
            if "Retrying" in _thoughts(client):
                break
            await asyncio.sleep(0.05)
        out["note"] = _thoughts(client)
        await conn.cancel(session_id=sid)
        out["cancelled"] = await asyncio.wait_for(task, TIMEOUT)
        out["cancel_calls"] = [r.outcome for r in llm.requests]

        out["after"] = await _prompt(conn, wire, sid, scenario_prompt("echo", "still here"))
    out["client"], out["wire"] = client, wire
    return out


def test_model_failures_under_the_official_client():
    out = _run(_failures)
    auth = out["auth"]
    assert out["auth_calls"] == ["http401"]  # no retry
    assert auth.code == -32603
    message = str(auth)
    assert "rejected the API key (HTTP 401)" in message and "LLM_API_KEY" in message
    assert auth.data["model"]["kind"] == "auth" and auth.data["model"]["retryable"] is False

    assert "Retrying in 600 s, attempt 2 of 4" in out["note"]
    assert out["cancelled"].stop_reason == "cancelled"
    assert out["cancel_calls"] == ["http500"]  # answered before the retry was due

    assert out["after"].stop_reason == "end_turn"
    assert "still here" in out["client"].text()
    errors, _ = out["wire"].schema_errors()
    assert errors == []
    assert out["wire"].updates_after_responses() == []
