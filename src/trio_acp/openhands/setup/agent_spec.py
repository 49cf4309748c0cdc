"""The session's SDK `Agent`, assembled from the user's OpenHands set-up as the CLI does.

The pieces come from files read in `settings.py` and `user_setup.py` (no SDK there); this
module turns them into SDK objects, so it runs after the SDK import, in a worker thread.

- **Tools**: a stored conversation keeps the tools it was created with (its
  `base_state.json`; the SDK refuses to resume a conversation whose tools were removed).
  A new conversation gets the CLI's default set: terminal, file editor, task tracker and
  delegation (`task_tool_set`, with the CLI's built-in sub-agents, browser-less), the
  delegation being our variant of the SDK's (`subagents.py`: visible, asked, cancellable).
  The terminal always runs as the subprocess terminal, whatever params were stored: it
  needs no tmux server that could outlive us and is killed with its process group on
  interrupt; and its shell keeps no history file (`tool_processes.terminal_params`).
- **MCP**: the servers of `mcp.json` that are enabled, then the client's `mcpServers`
  (the client's win on a name clash, as in the CLI).
- **Condenser**: the file's `LLMSummarizingCondenser` (its `max_size`, `keep_first`, ...)
  with its own `llm`, the `LLM_MODEL`/`LLM_API_KEY`/`LLM_BASE_URL` overrides applied to it
  as the CLI applies them; `"condenser": null` in the file means none (then `/condense`
  says so). Without a settings file, the summarizing condenser on the session's model.
- **Context**: the project's skills and `AGENTS.md` (`load_project_skills(cwd)`, which also
  reads the git root's), the user's skills, the public skills (`public_skills.py`: fetched
  once per process; a failure is logged once and not retried for a while), and the working
  directory and OS in the system message, as the CLI builds its `AgentContext` — with the
  session's `cwd` as the work dir.
- **Hooks**: `HookConfig` of the project's or the user's `hooks.json` (`hook_config`).
- **Critic**: the SDK's API critic as the CLI derives it (`critic.py`).
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from trio_acp.openhands.permissions.tool_processes import terminal_params
from trio_acp.openhands.setup.critic import session_critic
from trio_acp.openhands.setup.public_skills import public_skills
from trio_acp.openhands.setup.user_setup import SessionSetup, ToolSpec
from trio_acp.openhands.translate.shapes import JsonValue

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import (
        LLM,
        Agent,
        AgentContext,
        CondenserBase,
        HookConfig,
        Tool,
    )
    from trio_acp.openhands.sdk.loaded import Sdk

log = logging.getLogger(__name__)

#: Builds an LLM from the user's fields the way the session's own is built (`sdk.build_llm`).
type BuildLlm = Callable[[Mapping[str, object]], LLM]

# The overrides the CLI applies to the condenser's own LLM (`LLMEnvOverrides`).
_CONDENSER_OVERRIDES = ("model", "api_key", "base_url")


#: The delegation tool set's name (the SDK's `TaskToolSet.name`).
DELEGATION = "task_tool_set"


def default_tools(sdk: Sdk) -> list[Tool]:
    return [
        sdk.Tool(name=sdk.TerminalTool.name, params=terminal_params(None)),
        sdk.Tool(name=sdk.FileEditorTool.name),
        sdk.Tool(name=sdk.TaskTrackerTool.name),
        sdk.Tool(name=DELEGATION),
    ]


def session_tools(sdk: Sdk, stored: list[ToolSpec] | None) -> list[Tool]:
    from trio_acp.openhands.sdk import agent_setup

    agent_setup.enable_delegation()
    if not stored:
        return default_tools(sdk)
    agent_setup.register_tools(spec["name"] for spec in stored)
    tools = []
    for spec in stored:
        name = spec["name"]
        if name == sdk.TerminalTool.name:
            spec = {**spec, "params": terminal_params(spec.get("params"))}
        tools.append(sdk.Tool.model_validate(spec))
    return tools


def condenser(sdk: Sdk, llm: LLM, setup: SessionSetup, build_llm: BuildLlm) -> CondenserBase | None:
    """The condenser: the file's, or ours on the session's model; None if the file says none."""
    spec = (setup.settings.agent_file or {}).get("condenser", _DEFAULT)
    if spec is _DEFAULT:
        return sdk.LLMSummarizingCondenser(llm=llm.model_copy(update={"usage_id": "condenser"}))
    if spec is None:
        return None
    if (
        not isinstance(spec, dict)
        or spec.get("kind", "LLMSummarizingCondenser") != "LLMSummarizingCondenser"
    ):
        # Another condenser kind (none is written by the CLI): the SDK validates it as is.
        from trio_acp.openhands.sdk.agent_setup import condenser_of_kind

        return condenser_of_kind(spec)
    fields = dict(spec.get("llm") or {})
    for name in _CONDENSER_OVERRIDES:
        value = setup.env_llm.get(name)
        if value:
            fields[name] = value
    if not fields.get("model"):
        fields = (
            {name: value for name, value in setup.settings.llm.items()}
            if setup.settings.llm
            else {}
        )
    cond_llm = build_llm(fields).model_copy(update={"usage_id": "condenser"})
    rest = {k: v for k, v in spec.items() if k not in ("llm", "kind")}
    return sdk.LLMSummarizingCondenser.model_validate({**rest, "llm": cond_llm})


_DEFAULT = object()  # no `condenser` key in the agent file


def agent_context(setup: SessionSetup) -> AgentContext:
    from trio_acp.openhands.sdk import agent_setup

    try:
        skills = agent_setup.project_skills(setup.cwd)
    except Exception:  # a broken skill file must not cost the user the session
        log.warning("could not load the project's skills from %s", setup.cwd, exc_info=True)
        skills = []
    suffix = "\n".join(
        [
            f"Your current working directory is: {setup.cwd}",
            f"User operating system: {os_description()}",
        ]
    )
    # The public skills come from `public_skills.py`, not from `load_public_skills`: the
    # SDK would fetch them again on every validation of the context (twice per session).
    # Below the project's and the user's, as the SDK ranks them (public < user < project).
    public = public_skills(setup.settings.persistence_dir) if setup.public_skills else []
    return agent_setup.agent_context(skills, suffix, public)


def os_description() -> str:
    system = platform.system()
    if system == "Linux":
        try:
            info = platform.freedesktop_os_release()
            return f"Linux ({info.get('PRETTY_NAME', 'unknown distribution')})"
        except OSError:
            return "Linux"
    if system == "Darwin":
        return f"macOS {platform.mac_ver()[0]}".strip()
    return f"{system} {platform.release()}".strip()


def build_session_agent(sdk: Sdk, llm: LLM, setup: SessionSetup, build_llm: BuildLlm) -> Agent:
    """The SDK Agent for one session; blocking (reads skill files). `build_llm(fields)`
    builds an LLM the way the session's own is built (retry policy, overflow guard)."""
    # The SDK validates each server's dict into its `MCPServer` (typed so for pydantic's
    # validation, which takes JSON).
    servers: dict[str, JsonValue] = {**setup.mcp_file, **setup.client_mcp}
    return sdk.Agent(
        llm=llm,
        tools=session_tools(sdk, setup.stored_tools),
        mcp_config=servers,
        condenser=condenser(sdk, llm, setup, build_llm),
        agent_context=agent_context(setup),
        critic=session_critic(llm, setup),
    )


def for_agent_server(agent: Agent) -> Agent:
    """The agent as an agent-server runs it (docs/agent-server.md): without delegation and
    without the critic. The server would resolve `task_tool_set` to the SDK's own, which
    approves a sub-agent's actions unasked (ours asks, `subagents.py`), and the critic's
    verdicts are shown by the local turn only (`critic_review.py`)."""
    tools = [tool for tool in agent.tools if tool.name != DELEGATION]
    return agent.model_copy(update={"tools": tools, "critic": None})


def hook_config(setup: SessionSetup) -> HookConfig | None:
    """The SDK's `HookConfig` for the session, or None without a hooks file."""
    if setup.hooks_path is None:
        return None
    from trio_acp.openhands.sdk.agent_setup import hook_config as load

    return load(setup.hooks_path)
