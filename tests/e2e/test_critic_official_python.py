"""End to end: the critic and iterative refinement over stdio, under the official Python client.

`cli_config.json` as the OpenHands CLI writes it with refinement on; the critic is the SDK's
API critic pointed at the scripted server's `/vllm/classify` (scores scripted by the
`[critic:...]` tag of each prompt), its chat template from a file: no network.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

acp = pytest.importorskip("acp")

from _oh_harness import (  # noqa: E402 - after the importorskip
    Client,
    Wire,
    _prompt,
    _run,
    agent_env,
    new_session,
    trio_acp_agent,
)
from acp.schema import AgentThoughtChunk, ToolCallStart, UserMessageChunk  # noqa: E402

from trio_acp.testing import scenario_prompt  # noqa: E402

OPENHANDS = Path(__file__).parents[1] / "openhands"
CLI_CONFIG = OPENHANDS / "openhands_cli_files" / "critic_refinement" / "cli_config.json"
TEMPLATE = OPENHANDS / "critic" / "chatml.jinja"


def _verdicts(client: Client) -> list:
    return [u for u in client.of(ToolCallStart) if u.tool_call_id.startswith("critic-")]


def _refinements(client: Client) -> list:
    return client.of(UserMessageChunk)


async def _critic_session(llm, home, ws):
    shutil.copy(CLI_CONFIG, Path(home) / "cli_config.json")
    env = agent_env(llm, home)
    env.pop("PERSISTENCE_DIR", None)
    env.update(
        TRIO_ACP_CRITIC_URL=f"{llm.url}/vllm",
        TRIO_ACP_CRITIC_CHAT_TEMPLATE=str(TEMPLATE),
        TRIO_ACP_PUBLIC_SKILLS="0",
        TRIO_ACP_DEFAULT_MODE="always-approve",
    )
    client, wire, out = Client(), Wire(), {}
    async with trio_acp_agent(client, wire, env) as (conn, _process):
        sid = (await new_session(conn, ws)).session_id
        # Low, then above the threshold (0.6): one refinement in the same turn.
        out["first"] = await _prompt(
            conn, wire, sid, scenario_prompt("echo", "write it [critic:0.2,0.95]")
        )
        out["first_verdicts"], out["first_refinements"] = _verdicts(client), _refinements(client)
        client.updates.clear()
        # Always low: the counter starts at 0 again and stops at 3 of 3.
        out["second"] = await _prompt(conn, wire, sid, scenario_prompt("echo", "more [critic:0.1]"))
        out["second_verdicts"], out["second_refinements"] = (
            _verdicts(client),
            _refinements(client),
        )
        client.updates.clear()
        # The critic's endpoint fails: the turn ends normally, and the user is told.
        out["third"] = await _prompt(
            conn, wire, sid, scenario_prompt("echo", "last [critic:http503]")
        )
        out["third_thoughts"] = [
            u.content.text for u in client.of(AgentThoughtChunk) if hasattr(u.content, "text")
        ]
        out["third_verdicts"] = _verdicts(client)
    out["wire"] = wire
    out["classify"] = list(llm.critic_requests)
    return out


def test_critic_verdicts_and_refinement_in_the_turn():
    out = _run(_critic_session)
    assert out["first"].stop_reason == "end_turn"
    verdicts = out["first_verdicts"]
    assert [v.raw_output["score"] for v in verdicts] == [0.2, 0.95]
    assert verdicts[0].title.startswith("Critic: ") and "20% predicted success" in verdicts[0].title
    assert verdicts[0].status == "completed" and verdicts[0].kind == "think"
    (refinement,) = out["first_refinements"]
    assert refinement.field_meta["trioAcp"]["refinement"] == {"iteration": 1, "maxIterations": 3}
    assert "iteration 1/3, predicted success likelihood: 20.0%" in refinement.content.text

    assert out["second"].stop_reason == "end_turn"
    assert [
        r.field_meta["trioAcp"]["refinement"]["iteration"] for r in out["second_refinements"]
    ] == [
        1,
        2,
        3,
    ]
    assert len(out["second_verdicts"]) == 4
    assert out["second_verdicts"][-1].raw_output["refinement"] is None

    assert out["third"].stop_reason == "end_turn"
    assert out["third_verdicts"] == []
    assert any("critic could not evaluate" in t and "503" in t for t in out["third_thoughts"])
    # 2 + 4 + 1 evaluations, every frame valid, nothing after a response.
    assert len(out["classify"]) == 7
    errors, checked = out["wire"].schema_errors()
    assert errors == [] and checked > 20
    assert out["wire"].updates_after_responses() == []
