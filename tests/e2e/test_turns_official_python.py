"""End to end, under the official Python client: queued prompts, cancel-then-prompt, and a
session's settings surviving an agent restart (via load and via resume).

`trio-acp` runs as a subprocess exactly as an editor launches it; the model is the scripted
server. See `_oh_harness.py`.
"""

from __future__ import annotations

import asyncio

import pytest

acp = pytest.importorskip("acp")


from _oh_harness import TIMEOUT, Client, Wire, _run, agent_env, new_session, trio_acp_agent  # noqa: E402
from acp.schema import TextContentBlock  # noqa: E402

from trio_acp.testing import scenario_prompt  # noqa: E402


def _blocks(text: str) -> list:
    return [TextContentBlock(type="text", text=text)]


async def _queued(llm, home, ws):
    client, wire, out = Client(), Wire(), {}
    async with trio_acp_agent(client, wire, agent_env(llm, home)) as (conn, process):
        sid = (await new_session(conn, ws)).session_id
        # Three prompts at once: the first runs, the others queue behind it (FIFO).
        texts = [
            scenario_prompt("slow", chunks=10, delay_ms=20),
            scenario_prompt("echo", "second"),
            scenario_prompt("echo", "third"),
        ]
        tasks = []
        for text in texts:
            tasks.append(asyncio.create_task(conn.prompt(session_id=sid, prompt=_blocks(text))))
            await asyncio.sleep(0)  # let it write its request: sent in this order
        out["queued"] = await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)

        # Cancel, then the next prompt in the same breath (what editors do on Esc + Enter).
        client.got_update.clear()
        slow = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=_blocks(scenario_prompt("slow")))
        )
        await asyncio.wait_for(client.got_update.wait(), TIMEOUT)
        await conn.cancel(session_id=sid)
        next_prompt = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=_blocks(scenario_prompt("echo", "right after")))
        )
        out["cancelled"] = await asyncio.wait_for(slow, TIMEOUT)
        out["after_cancel"] = await asyncio.wait_for(next_prompt, TIMEOUT)
    out["client"], out["wire"] = client, wire
    return out


def test_queued_prompts_and_a_prompt_right_after_cancel():
    out = _run(_queued)
    assert [r.stop_reason for r in out["queued"]] == ["end_turn"] * 3
    assert out["cancelled"].stop_reason == "cancelled"
    assert out["after_cancel"].stop_reason == "end_turn"
    wire = out["wire"]
    # Wire order: each prompt's response comes after its own updates and before the next
    # prompt's updates.
    frames = [f for d, f in wire.frames if d == "from_agent"]
    prompt_ids = [
        f["id"] for d, f in wire.frames if d == "to_agent" and f.get("method") == "session/prompt"
    ]
    responses = [
        next(i for i, f in enumerate(frames) if f.get("id") == pid and "method" not in f)
        for pid in prompt_ids
    ]
    assert responses == sorted(responses), "responses in the order the prompts were sent"

    def text(lo, hi):
        return "".join(
            f["params"]["update"]["content"].get("text", "")
            for f in frames[lo:hi]
            if f.get("method") == "session/update"
            and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
        )

    assert "w0010" in text(0, responses[0]) and "Echo" not in text(0, responses[0])
    assert "second" in text(responses[0], responses[1]) and "third" not in text(
        responses[0], responses[1]
    )
    assert "third" in text(responses[1], responses[2])
    assert "right after" in text(responses[3], responses[4])
    assert "right after" not in text(0, responses[3])
    errors, _ = wire.schema_errors()
    assert errors == []


class AskingClient(Client):
    """Records every permission request (and allows it)."""

    def __init__(self) -> None:
        super().__init__()
        self.asks: list = []

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asks.append(tool_call)
        return await super().request_permission(session_id, tool_call, options, **kwargs)


async def _settings_survive(llm, home, ws):
    out = {}
    async with trio_acp_agent(Client(), Wire(), agent_env(llm, home)) as (conn, process):
        sid = (await new_session(conn, ws)).session_id
        await conn.set_session_mode(session_id=sid, mode_id="always-approve")
        other = (await new_session(conn, ws)).session_id
        await conn.set_config_option(session_id=other, config_id="mode", value="llm-approve")
    # A new agent process, same persistence directory.
    client = AskingClient()
    async with trio_acp_agent(client, Wire(), agent_env(llm, home)) as (conn, process):
        out["loaded"] = await asyncio.wait_for(
            conn.load_session(session_id=sid, cwd=ws, mcp_servers=[]), TIMEOUT
        )
        out["resumed"] = await asyncio.wait_for(
            conn.resume_session(session_id=other, cwd=ws, mcp_servers=[]), TIMEOUT
        )
        # And what the session does, not only what it says: always-approve asks nothing.
        out["prompt"] = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=_blocks(scenario_prompt("terminal"))), TIMEOUT
        )
        out["asks"] = client.asks
    return out


def test_mode_and_config_options_survive_a_restart_via_load_and_resume():
    out = _run(_settings_survive)
    loaded, resumed = out["loaded"], out["resumed"]
    assert loaded.modes.current_mode_id == "always-approve"
    assert {o.id: o.current_value for o in loaded.config_options}["mode"] == "always-approve"
    assert resumed.modes.current_mode_id == "llm-approve"
    assert {o.id: o.current_value for o in resumed.config_options}["mode"] == "llm-approve"
    assert out["prompt"].stop_reason == "end_turn"
    assert out["asks"] == []  # the restored always-approve is in force, not just reported
