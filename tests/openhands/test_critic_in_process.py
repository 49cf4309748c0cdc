"""The critic and iterative refinement, in-process with the real SDK (imported once here).

The critic is the SDK's `APIBasedCritic`, pointed at the scripted server's `/vllm/classify`
(`trio_acp.testing.critic_wire`: scores scripted by a `[critic:...]` tag in the prompt), its
chat template from a file (no network); `cli_config.json` as the OpenHands CLI writes it
(`openhands_cli_files/`).
"""

from __future__ import annotations

import contextlib
import shutil
import uuid
from pathlib import Path
from types import SimpleNamespace

import trio

from _inprocess import RecordingClient, agent_env, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.setup.critic import critic_server_url, session_critic
from trio_acp.openhands.setup.user_setup import CliConfig, CriticSettings
from trio_acp.testing import ScriptedLLM, scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair

CLI_FILES = Path(__file__).parent / "openhands_cli_files"
TEMPLATE = Path(__file__).parent / "critic" / "chatml.jinja"


def _env(llm: ScriptedLLM, home: Path, cli_config: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(CLI_FILES / cli_config, home / "cli_config.json")
    return agent_env(
        llm,
        home,
        PERSISTENCE_DIR=None,
        LLM_MAX_INPUT_TOKENS="128000",
        TRIO_ACP_PUBLIC_SKILLS="0",
        TRIO_ACP_CRITIC_URL=f"{llm.url}/vllm",
        TRIO_ACP_CRITIC_CHAT_TEMPLATE=str(TEMPLATE),
        TRIO_ACP_CRITIC_TIMEOUT="10",
    )


class Client(RecordingClient):
    def verdicts(self) -> list:
        return [
            u
            for u in self.of(schema.ToolCallStart)
            if (u.meta or {}).get("trioAcp", {}).get("critic") is not None
        ]

    def refinements(self) -> list:
        return [u for u in self.of(schema.UserMessageChunk) if u.meta]


async def _initialize(conn) -> None:
    await conn.agent.initialize(
        protocol_version=1,
        client_capabilities=schema.ClientCapabilities(
            session=schema.ClientSessionCapabilities(notices=schema.NoticeCapabilities())
        ),
    )


@contextlib.asynccontextmanager
async def _session(env, client, cwd):
    """The agent in process, `client` on the other end, initialized: (agent, conn, session id)
    of a new session in `cwd`."""
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await _initialize(conn)
            sid = (await conn.agent.new_session(cwd=str(cwd), mcp_servers=[])).session_id
            yield agent, conn, sid


async def _prompt(conn, sid: str, text: str):
    return await conn.agent.prompt(session_id=sid, prompt=[schema.TextContent(text=text)])


def test_the_critic_is_derived_as_the_cli_derives_it():
    sdk_llm = SimpleNamespace
    setup = SimpleNamespace(
        cli=CliConfig(), critic_url=None, critic_template=None, critic_timeout=60.0
    )
    proxy = sdk_llm(base_url="https://llm-proxy.app.all-hands.dev/", api_key="sk-x")
    assert critic_server_url(proxy.base_url, setup) == "https://llm-proxy.app.all-hands.dev/vllm"
    assert critic_server_url("https://llm-proxy.eval.all-hands.dev", setup) == (
        "https://llm-proxy.eval.all-hands.dev/vllm"
    )
    for other in ("https://api.openai.com/v1", "https://llm-proxy.all-hands.dev.evil.com", None):
        assert critic_server_url(other, setup) is None
    explicit = SimpleNamespace(**{**vars(setup), "critic_url": "http://127.0.0.1:9/vllm/"})
    assert critic_server_url("https://api.openai.com/v1", explicit) == "http://127.0.0.1:9/vllm"

    critic = session_critic(proxy, setup)
    assert critic is not None
    assert critic.server_url == "https://llm-proxy.app.all-hands.dev/vllm"
    assert critic.model_name == "critic" and critic.issue_threshold == 0.75
    assert critic.iterative_refinement is None  # refinement is driven as the CLI does
    # No key, another provider, or the critic switched off in cli_config.json: none.
    assert session_critic(sdk_llm(base_url=proxy.base_url, api_key=None), setup) is None
    assert session_critic(sdk_llm(base_url="https://api.openai.com/v1", api_key="k"), setup) is None
    off = SimpleNamespace(**{**vars(setup), "cli": CliConfig(CriticSettings(enable_critic=False))})
    assert session_critic(proxy, off) is None


async def test_verdict_refinement_in_the_same_turn_and_the_counter_resets(llm, tmp_path):
    env = _env(llm, tmp_path / "home", "critic_refinement/cli_config.json")
    client = Client()
    llm.critic_requests.clear()
    async with _session(env, client, tmp_path) as (agent, conn, sid):
        # Low, low, then fine: two refinements, then the turn ends.
        first = await _prompt(
            conn, sid, scenario_prompt("echo", "do it [critic:0.2,0.3+loop_behavior=0.9,0.95]")
        )
        verdicts, refinements = client.verdicts(), client.refinements()
        client.updates.clear()
        # Always low: refinements stop at max_refinement_iterations (3), counted anew.
        second = await _prompt(conn, sid, scenario_prompt("echo", "again [critic:0.1]"))
        verdicts2, refinements2 = client.verdicts(), client.refinements()
        session = agent._sessions[uuid.UUID(sid)]
        history = await session.conversation.history()

    assert first.stop_reason == "end_turn" and second.stop_reason == "end_turn"
    scores = [v.raw_output["score"] for v in verdicts]
    assert scores == [0.2, 0.3, 0.95]
    assert [v.raw_output["refinement"] for v in verdicts] == [
        {"iteration": 1, "maxIterations": 3},
        {"iteration": 2, "maxIterations": 3},
        None,
    ]
    assert "20% predicted success" in verdicts[0].title and verdicts[0].kind == "think"
    # The issue above issue_threshold (0.75) is shown and named in the follow-up.
    assert verdicts[1].raw_output["issues"] == [
        {"name": "loop_behavior", "displayName": "Loop Behavior", "probability": 0.9}
    ]
    assert [r.meta["trioAcp"]["refinement"]["iteration"] for r in refinements] == [1, 2]
    assert refinements[0].content.text.startswith(
        "The task appears incomplete (iteration 1/3, predicted success likelihood: 20.0%)."
    )
    assert "- Loop Behavior (90%)" in refinements[1].content.text
    # The follow-ups reached the model as user messages of the same conversation.
    users = [e for e in history if type(e).__name__ == "MessageEvent" and e.source == "user"]
    assert sum("The task appears incomplete" in str(e.llm_message.content) for e in users) == 5
    # The second prompt: counted from 0 again, stopped at 3 of 3.
    assert [r.meta["trioAcp"]["refinement"]["iteration"] for r in refinements2] == [1, 2, 3]
    assert len(verdicts2) == 4 and verdicts2[-1].raw_output["refinement"] is None
    assert "3 of 3 refinements done" in verdicts2[-1].content[0].content.text
    # The critic got the model's key and the classification model's name.
    assert {r["api_key"] for r in llm.critic_requests} == {"scripted"}
    assert {r["body"]["model"] for r in llm.critic_requests} == {"critic"}


async def test_a_failing_critic_ends_the_turn_normally_with_a_notice(llm, tmp_path):
    env = _env(llm, tmp_path / "home", "critic_refinement/cli_config.json")
    client = Client()
    async with _session(env, client, tmp_path) as (_, conn, sid):
        with trio.fail_after(60):
            failed = await _prompt(conn, sid, scenario_prompt("echo", "x [critic:http503]"))
        notices = client.of(schema.NoticeUpdate)
        after = await _prompt(conn, sid, scenario_prompt("echo", "y [critic:0.9]"))
    assert failed.stop_reason == "end_turn" and after.stop_reason == "end_turn"
    assert not client.refinements()
    assert len(notices) == 1
    assert notices[0].title == "The critic could not evaluate the agent's answer"
    assert "503" in notices[0].description
    assert [v.raw_output["score"] for v in client.verdicts()] == [0.9]


async def test_a_critic_that_never_answers_times_out_and_the_turn_ends(llm, tmp_path):
    env = _env(llm, tmp_path / "home", "critic_refinement/cli_config.json")
    env["TRIO_ACP_CRITIC_TIMEOUT"] = "1"
    client = Client()
    async with _session(env, client, tmp_path) as (_, conn, sid):
        with trio.fail_after(60):
            response = await _prompt(conn, sid, scenario_prompt("echo", "x [critic:stall]"))
    assert response.stop_reason == "end_turn"
    (notice,) = client.of(schema.NoticeUpdate)
    assert "timed out" in notice.description.lower()


async def test_without_refinement_the_verdict_is_shown_once(llm, tmp_path):
    env = _env(llm, tmp_path / "home", "cli_config.json")  # the CLI's defaults
    client = Client()
    async with _session(env, client, tmp_path) as (_, conn, sid):
        response = await _prompt(conn, sid, scenario_prompt("echo", "z [critic:0.1]"))
    assert response.stop_reason == "end_turn"
    assert [v.raw_output["score"] for v in client.verdicts()] == [0.1]
    assert not client.refinements()


async def test_an_unusable_cli_config_is_said_and_the_defaults_apply(llm, tmp_path):
    env = _env(llm, tmp_path / "home", "critic_refinement/cli_config.json")
    # What the CLI's validator rejects (a threshold above 1): the CLI's defaults, refinement off.
    (tmp_path / "home" / "cli_config.json").write_text(
        '{"critic": {"enable_iterative_refinement": true, "critic_threshold": 1.5}}'
    )
    client = Client()
    async with _session(env, client, tmp_path) as (_, conn, sid):
        response = await _prompt(conn, sid, scenario_prompt("echo", "x [critic:0.1]"))
    assert response.stop_reason == "end_turn"
    (notice,) = client.of(schema.NoticeUpdate)
    assert "cli_config.json is not usable" in notice.title
    assert "critic_threshold" in notice.description
    assert [v.raw_output["score"] for v in client.verdicts()] == [0.1]
    assert not client.refinements()


async def test_session_load_replays_the_verdicts_after_their_answers(llm, tmp_path):
    env = _env(llm, tmp_path / "home", "critic_refinement/cli_config.json")
    first = Client()
    async with _session(env, first, tmp_path) as (_, conn, sid):
        await _prompt(conn, sid, scenario_prompt("echo", "go [critic:0.2,0.95]"))
    loaded = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, loaded) as (_, conn):
            await _initialize(conn)
            await conn.agent.load_session(session_id=sid, cwd=str(tmp_path), mcp_servers=[])
    assert [v.raw_output["score"] for v in loaded.verdicts()] == [0.2, 0.95]
    kinds = [
        "verdict" if u in loaded.verdicts() else type(u).__name__
        for u in loaded.updates
        if isinstance(u, schema.ToolCallStart | schema.UserMessageChunk | schema.AgentMessageChunk)
    ]
    # prompt, answer, verdict, the follow-up (a user message), answer, verdict.
    assert kinds == [
        "UserMessageChunk",
        "AgentMessageChunk",
        "verdict",
        "UserMessageChunk",
        "AgentMessageChunk",
        "verdict",
    ]
