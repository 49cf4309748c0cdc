"""The user's OpenHands set-up, from files exactly as the OpenHands CLI writes them
(`openhands_cli_files/`, see its README): the model and condenser of `agent_settings.json`,
the MCP servers of `mcp.json`, `cli_config.json`, `hooks.json` and the project's `AGENTS.md`,
each visible in what the model receives or what the client sees."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio

from _inprocess import RecordingClient, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.setup.settings import SettingsError, load_settings
from trio_acp.openhands.setup.user_setup import (
    CriticSettings,
    hooks_file,
    load_cli_config,
    load_mcp_file,
    stored_tools,
)
from trio_acp.testing import (
    Scenario,
    ScriptedLLM,
    ToolCall,
    Turn,
    open_in_memory_pair,
    scenario_prompt,
)

CLI_FILES = Path(__file__).parent / "openhands_cli_files"
SHOUT = Path(__file__).parent / "mcp" / "shout_server.py"


# -- the files, read without the SDK --------------------------------------------------------------


def test_cli_config_as_the_cli_writes_it_gives_the_cli_defaults(tmp_path):
    shutil.copy(CLI_FILES / "cli_config.json", tmp_path)
    config = load_cli_config(tmp_path, env={})
    assert config.critic == CriticSettings() and config.warning is None
    assert config.critic.critic_threshold == 0.6 and config.critic.max_refinement_iterations == 3


def test_cli_config_legacy_fields_and_validation(tmp_path):
    path = tmp_path / "cli_config.json"
    path.write_text(json.dumps({"enable_critic": False, "critic_threshold": 0.3}))
    assert load_cli_config(tmp_path, env={}).critic == CriticSettings(
        enable_critic=False, critic_threshold=0.3
    )
    # What the CLI's pydantic validators reject falls back to the defaults, said aloud here.
    for bad in (
        {"critic": {"critic_threshold": 1.5}},
        {"critic": {"max_refinement_iterations": 0}},
        [1],
    ):
        path.write_text(json.dumps(bad))
        config = load_cli_config(tmp_path, env={})
        assert config.critic == CriticSettings()
        assert str(path) in config.warning
    path.write_text("{not json")
    assert "not usable" in load_cli_config(tmp_path, env={}).warning
    # The CLI reads cli_config.json from $PERSISTENCE_DIR.
    other = tmp_path / "other"
    other.mkdir()
    (other / "cli_config.json").write_text(
        json.dumps({"critic": {"enable_iterative_refinement": True}})
    )
    assert load_cli_config(
        tmp_path, env={"PERSISTENCE_DIR": str(other)}
    ).critic.enable_iterative_refinement


def test_mcp_json_gives_the_enabled_servers_without_the_cli_bookkeeping(tmp_path):
    shutil.copy(CLI_FILES / "mcp.json", tmp_path)
    servers = load_mcp_file(tmp_path)
    assert set(servers) == {"localtool", "remote-api"}  # old-sse is disabled
    assert servers["localtool"] == {
        "command": "python",
        "args": ["-m", "some_server", "--flag"],
        "env": {"GREETING": "hi"},
        "transport": "stdio",
    }
    assert servers["remote-api"] == {
        "url": "http://127.0.0.1:9999/mcp",
        "transport": "http",
        "headers": {"Authorization": "Bearer tok"},
    }
    (tmp_path / "mcp.json").write_text('{"mcpServers": {"x": ')
    with pytest.raises(SettingsError, match="mcp.json is not valid JSON"):
        load_mcp_file(tmp_path)
    (tmp_path / "mcp.json").write_text('{"mcpServers": {"x": {"args": []}}}')
    with pytest.raises(SettingsError, match="neither a 'command' nor a 'url'"):
        load_mcp_file(tmp_path)
    assert load_mcp_file(tmp_path / "absent") == {}


def test_hooks_json_of_the_project_wins_over_the_users(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    (project / ".openhands").mkdir(parents=True)
    home.mkdir()
    assert hooks_file(home, project) is None
    (home / "hooks.json").write_text("{}")
    assert hooks_file(home, project) == home / "hooks.json"
    (project / ".openhands" / "hooks.json").write_text("{}")
    assert hooks_file(home, project) == project / ".openhands" / "hooks.json"


def test_settings_keep_the_whole_file_and_follow_openhands_conversations_dir(tmp_path):
    shutil.copy(CLI_FILES / "agent_settings.json", tmp_path)
    settings = load_settings({"OPENHANDS_PERSISTENCE_DIR": str(tmp_path)})
    assert settings.model == "openai/scripted"
    assert settings.agent_file["condenser"]["kind"] == "LLMSummarizingCondenser"
    assert settings.conversations_dir == tmp_path / "conversations"
    moved = load_settings(
        {"OPENHANDS_PERSISTENCE_DIR": str(tmp_path), "OPENHANDS_CONVERSATIONS_DIR": "/x/convs"}
    )
    assert moved.conversations_dir == Path("/x/convs")


def test_stored_tools_come_from_base_state(tmp_path):
    assert stored_tools(tmp_path) is None
    (tmp_path / "base_state.json").write_text(
        json.dumps(
            {
                "agent": {
                    "tools": [
                        {"name": "terminal", "params": {}},
                        {"name": "task_tool_set", "params": {}},
                    ]
                }
            }
        )
    )
    assert [t["name"] for t in stored_tools(tmp_path)] == ["terminal", "task_tool_set"]
    (tmp_path / "base_state.json").write_text("{broken")
    assert stored_tools(tmp_path) is None


# -- a whole session on the CLI's files ------------------------------------------------------------


@pytest.fixture(scope="module")
def llm():
    def shout_steps(ctx):
        names = [t["function"]["name"] for t in ctx.body.get("tools", [])]
        name = next((n for n in names if "shout" in n), "shout")
        return [
            Turn(tool_calls=[ToolCall(name, {"text": "from the cli's mcp.json"})]),
            Turn(text="Shouted."),
        ]

    with ScriptedLLM(
        scenarios=[Scenario("mcp-shout", shout_steps, "call the shout MCP tool")]
    ) as server:
        yield server


def _cli_home(tmp_path: Path, base_url: str) -> Path:
    """A persistence directory as the CLI leaves it, its model pointed at `base_url`."""
    home = tmp_path / "home"
    home.mkdir()
    spec = json.loads((CLI_FILES / "agent_settings.json").read_text())
    for llm in (spec["llm"], spec["condenser"]["llm"]):
        llm.update(
            base_url=base_url, api_key="scripted", num_retries=1, retry_min_wait=0, retry_max_wait=0
        )
    (home / "agent_settings.json").write_text(json.dumps(spec))
    shutil.copy(CLI_FILES / "cli_config.json", home)
    mcp = json.loads((CLI_FILES / "mcp.json").read_text())
    # The CLI's entries, pointed at a real stdio server (and at one that cannot start,
    # disabled as the CLI disables it: it must not even be tried).
    mcp["mcpServers"]["localtool"].update(
        command=sys.executable, args=[str(SHOUT)], env={"SHOUT_SUFFIX": "?"}
    )
    del mcp["mcpServers"]["remote-api"]
    mcp["mcpServers"]["old-sse"] = dict(
        mcp["mcpServers"]["localtool"], args=["-c", "raise SystemExit(3)"], enabled=False
    )
    (home / "mcp.json").write_text(json.dumps(mcp))
    return home


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / ".openhands").mkdir(parents=True)
    (project / "AGENTS.md").write_text("# House rules\n\nAlways answer like a heron-7731.\n")
    (project / ".openhands" / "skills").mkdir()
    (project / ".openhands" / "skills" / "egret.md").write_text(
        "---\nname: egret-facts\ndescription: Facts about egrets.\ntriggers:\n- egret\n---\nEgrets nest in colonies (skill-5521).\n"
    )
    log = tmp_path / "post-hook.log"
    hooks = {
        "PreToolUse": [
            {
                "matcher": "terminal",
                "hooks": [
                    {
                        "type": "command",
                        # Exit 2 blocks; stderr is the reason.
                        "command": "grep -q forbidden && { echo 'no forbidden commands here' >&2; exit 2; } || exit 0",
                    }
                ],
            }
        ],
        "PostToolUse": [
            {"matcher": "*", "hooks": [{"type": "command", "command": f"cat >> {log}"}]}
        ],
    }
    (project / ".openhands" / "hooks.json").write_text(json.dumps(hooks))
    return project


def _text(text: str) -> list:
    return [schema.TextContent(text=text)]


async def test_a_session_on_the_cli_files_has_their_model_mcp_skills_and_hooks(llm, tmp_path):
    home = _cli_home(tmp_path, llm.base_url)
    project = _project(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_")}
    env.update(
        HOME=str(tmp_path),
        OPENHANDS_PERSISTENCE_DIR=str(home),
        PERSISTENCE_DIR=str(home),
        TRIO_ACP_DEFAULT_MODE="always-approve",
        TRIO_ACP_PUBLIC_SKILLS="0",
    )
    client = RecordingClient()
    blocked_marker = tmp_path / "forbidden-ran"
    with trio.fail_after(120):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                sid = (await conn.agent.new_session(cwd=str(project), mcp_servers=[])).session_id
                first = len(llm.requests)
                r = await conn.agent.prompt(
                    session_id=sid, prompt=_text(scenario_prompt("mcp-shout"))
                )
                assert r.stop_reason == "end_turn"
                request = llm.requests[first]
                r = await conn.agent.prompt(
                    session_id=sid,
                    prompt=_text(
                        scenario_prompt("terminal", command=f"echo forbidden > {blocked_marker}")
                    ),
                )
                assert r.stop_reason == "end_turn"
                r = await conn.agent.prompt(
                    session_id=sid,
                    prompt=_text(scenario_prompt("terminal", command="echo allowed-ran")),
                )
                assert r.stop_reason == "end_turn"
                keyword = len(llm.requests)
                r = await conn.agent.prompt(
                    session_id=sid, prompt=_text(scenario_prompt("echo", "what about an egret?"))
                )
                assert r.stop_reason == "end_turn"
                keyword_request = llm.requests[keyword]
                turns = list(client.updates)
                client.updates.clear()
                r = await conn.agent.prompt(session_id=sid, prompt=_text("/skills"))
                skills_reply = json.dumps([schema.to_wire(u) for u in client.updates])
                client.updates[:0] = turns

    # The model: the CLI's file, streaming (the CLI writes `"stream": false`, the SDK's default).
    assert request.body["model"] == "scripted" or request.body["model"].endswith("scripted")
    assert request.stream
    system = json.dumps(request.messages[0])
    assert "heron-7731" in system  # AGENTS.md
    assert "User operating system" in system and str(project) in system
    tools = [t["function"]["name"] for t in request.body.get("tools", [])]
    assert any("shout" in name for name in tools), tools  # mcp.json's enabled server ...
    outputs = json.dumps([schema.to_wire(u) for u in client.updates])
    assert "FROM THE CLI'S MCP.JSON?" in outputs  # ... with its env
    # The blocking hook: the call failed with the hook's reason, and nothing ran.
    failed = [
        u for u in client.updates if isinstance(u, schema.ToolCallProgress) and u.status == "failed"
    ]
    assert any("no forbidden commands here" in json.dumps(schema.to_wire(u)) for u in failed), (
        failed
    )
    assert not blocked_marker.exists()
    # A keyword skill of the project's .openhands/skills: in context when its word comes up.
    assert "skill-5521" not in system and "egret-facts" in system  # listed, not inlined
    assert "skill-5521" in json.dumps(keyword_request.messages[-1])
    # /skills lists what was loaded.
    assert (
        "egret-facts" in skills_reply
        and "egret" in skills_reply
        and "Always in context" in skills_reply
    )
    # The logging hook saw the tool calls that ran.
    logged = (tmp_path / "post-hook.log").read_text()
    assert "allowed-ran" in logged and "forbidden" not in logged


def test_a_stored_conversations_tools_are_kept_and_its_terminal_is_ours():
    from trio_acp.openhands.setup.agent_spec import session_tools

    sdk = trio.run(loader().get)
    tools = session_tools(
        sdk,
        [
            {"name": "terminal", "params": {}},
            {"name": "file_editor", "params": {}},
            {"name": "task_tool_set", "params": {}},
        ],
    )
    assert [t.name for t in tools] == ["terminal", "file_editor", "task_tool_set"]
    # The subprocess terminal, its shell without a history file (tool_processes.py).
    assert tools[0].params == {"terminal_type": "subprocess", "env": {"HISTFILE": ""}}
    from openhands.sdk.tool.registry import list_registered_tools

    assert "task_tool_set" in list_registered_tools()
    # A stored conversation without delegation does not gain it.
    stored = session_tools(sdk, [{"name": "terminal", "params": {}}])
    assert [t.name for t in stored] == ["terminal"]
    # A new one gets the CLI's default set, delegation included (ours: subagents.py).
    assert [t.name for t in session_tools(sdk, None)] == [
        "terminal",
        "file_editor",
        "task_tracker",
        "task_tool_set",
    ]
    from openhands.sdk.subagent import get_registered_agent_definitions
    from openhands.sdk.tool.registry import resolve_tool

    from trio_acp.openhands.sdk.delegation import SessionTaskExecutor

    assert {"general-purpose", "bash-runner", "code-explorer"} <= {
        d.name for d in get_registered_agent_definitions()
    }
    state = SimpleNamespace(agent=None)
    (task,) = resolve_tool(sdk.Tool(name="task_tool_set"), state)  # type: ignore[arg-type]
    assert task.name == "task"
    assert type(task.executor) is SessionTaskExecutor


# -- MCP servers over http and sse, from the client ------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _serve_shout(nursery, transport: str) -> tuple[str, trio.Process]:
    port = _free_port()
    env = dict(os.environ, SHOUT_SUFFIX=f" via {transport}")
    proc = await nursery.start(
        lambda task_status: trio.run_process(  # noqa: ASYNC105 (nursery.start awaits it)
            [sys.executable, str(SHOUT), transport, str(port)],
            env=env,
            task_status=task_status,
            check=False,
        )
    )
    path = "/mcp" if transport == "http" else "/sse"
    with trio.fail_after(30):
        while True:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.1)
                continue
            await stream.aclose()
            break
    return f"http://127.0.0.1:{port}{path}", proc


async def test_http_and_sse_mcp_servers_from_the_client_become_tools(llm, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_")}
    from trio_acp.testing import scripted_env

    env.update(scripted_env(llm.base_url))
    env.update(
        HOME=str(tmp_path),
        OPENHANDS_PERSISTENCE_DIR=str(tmp_path / "home"),
        TRIO_ACP_DEFAULT_MODE="always-approve",
        TRIO_ACP_PUBLIC_SKILLS="0",
        LLM_NUM_RETRIES="1",
    )
    client = RecordingClient()
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            servers = {t: await _serve_shout(nursery, t) for t in ("http", "sse")}
            async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
                async with open_in_memory_pair(agent, client) as (_, conn):
                    init = await conn.agent.initialize(protocol_version=1)
                    caps = init.agent_capabilities.mcp_capabilities
                    assert caps.http and caps.sse
                    for transport, (url, _) in servers.items():
                        cls = schema.McpServerHttp if transport == "http" else schema.McpServerSse
                        mcp = cls(
                            name=f"shout-{transport}",
                            url=url,
                            headers=[schema.HttpHeader(name="X-Test", value="1")],
                        )
                        sid = (
                            await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[mcp])
                        ).session_id
                        r = await conn.agent.prompt(
                            session_id=sid, prompt=_text(scenario_prompt("mcp-shout"))
                        )
                        assert r.stop_reason == "end_turn"
            for _, proc in servers.values():
                proc.kill()
    outputs = json.dumps([schema.to_wire(u) for u in client.updates])
    assert "FROM THE CLI'S MCP.JSON via http" in outputs
    assert "FROM THE CLI'S MCP.JSON via sse" in outputs


# -- a conversation the OpenHands CLI made ---------------------------------------------------------


async def test_a_conversation_made_by_the_cli_lists_loads_and_continues_with_its_tools(
    llm, tmp_path
):
    home = _cli_home(tmp_path, llm.base_url)
    (home / "mcp.json").unlink()
    shutil.copytree(CLI_FILES / "conversations", home / "conversations")
    sid = "bb8467cc-7d03-476c-a0d2-82587783ceee"
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_")}
    env.update(
        HOME=str(tmp_path),
        OPENHANDS_PERSISTENCE_DIR=str(home),
        TRIO_ACP_DEFAULT_MODE="always-approve",
        TRIO_ACP_PUBLIC_SKILLS="0",
    )
    client = RecordingClient()
    with trio.fail_after(120):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_in_memory_pair(agent, client) as (_, conn):
                await conn.agent.initialize(protocol_version=1)
                listed = (await conn.agent.list_sessions()).sessions
                assert [s.session_id for s in listed] == [sid]
                assert "make a hello file" in (listed[0].title or "")
                await conn.agent.load_session(session_id=sid, cwd=str(work), mcp_servers=[])
                replay = json.dumps([schema.to_wire(u) for u in client.updates])
                assert "make a hello file" in replay  # the user's message
                assert "Demo complete" in replay  # the agent's finish
                kinds = {u.get("sessionUpdate") for u in json.loads(replay)}
                assert {"user_message_chunk", "tool_call", "plan"} <= kinds, kinds
                first = len(llm.requests)
                r = await conn.agent.prompt(
                    session_id=sid, prompt=_text(scenario_prompt("echo", "and now?"))
                )
                assert r.stop_reason == "end_turn"
    # It continues with the tools the CLI gave it, the sub-agent tool set included.
    tools = [t["function"]["name"] for t in llm.requests[first].body.get("tools", [])]
    assert {"terminal", "file_editor", "task_tracker", "task"} <= set(tools), tools
    history = json.dumps(llm.requests[first].messages)
    assert "make a hello file" in history and "and now?" in history


def test_setup_files_nested_too_deeply_are_invalid_json(tmp_path):
    # json raises RecursionError for 100,000 `[`: each file here said something generic
    # (-32603) or nothing; now it is invalid JSON like any other, named as such.
    from trio_acp.openhands.backends.agent_server_config import (
        SETTINGS_FILE as AGENT_SERVER_FILE,
    )
    from trio_acp.openhands.backends.agent_server_config import (
        AgentServerConfigError,
        load_agent_server,
    )
    from trio_acp.openhands.setup.settings import SETTINGS_FILE

    nested = "[" * 100_000
    (tmp_path / SETTINGS_FILE).write_text(nested)
    with pytest.raises(SettingsError, match="is not valid JSON \\(nested too deeply\\)"):
        load_settings({"OPENHANDS_PERSISTENCE_DIR": str(tmp_path)})
    (tmp_path / "mcp.json").write_text(nested)
    with pytest.raises(SettingsError, match="mcp.json is not valid JSON \\(nested too deeply\\)"):
        load_mcp_file(tmp_path)
    (tmp_path / "cli_config.json").write_text(nested)
    assert "not usable" in load_cli_config(tmp_path, env={}).warning
    (tmp_path / AGENT_SERVER_FILE).write_text(nested)
    with pytest.raises(AgentServerConfigError, match="nested too deeply"):
        load_agent_server({}, persistence_dir=tmp_path)
    conversation = tmp_path / "conversation"
    conversation.mkdir()
    (conversation / "base_state.json").write_text(nested)
    assert stored_tools(conversation) is None


def test_a_persistence_dir_under_an_unknown_user_is_a_settings_error():
    with pytest.raises(SettingsError, match="absolute path"):
        load_settings({"OPENHANDS_PERSISTENCE_DIR": "~no-such-user-here/x"})
