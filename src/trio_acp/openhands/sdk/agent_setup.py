"""The SDK's side of a session's agent: the calls `setup/agent_spec.py`, `setup/critic.py`
and `setup/public_skills.py` make once they have decided what the agent is made of.

Imports the SDK: imported inside the functions that need it, after the SDK's load
(`loaded.py`), as the set-up it serves runs in a worker thread after `session/new` waited
for the import.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable
from pathlib import Path

import httpx
from openhands.sdk import AgentContext
from openhands.sdk.context import load_project_skills
from openhands.sdk.context.condenser import CondenserBase
from openhands.sdk.critic.impl.api import APIBasedCritic
from openhands.sdk.critic.impl.api.chat_template import ChatTemplateRenderer
from openhands.sdk.hooks import HookConfig
from openhands.sdk.skills import Skill, merge_skills_by_name
from openhands.sdk.skills import skill as sdk_skill
from openhands.sdk.tool.registry import list_registered_tools
from openhands.tools.preset.default import register_builtins_agents
from pydantic import SecretStr

from trio_acp.openhands.sdk import delegation

# Tool names the SDK registers only when their module is imported (the CLI imports them
# through `register_builtins_agents`). A stored conversation may name them.
TOOL_MODULES = {
    "task_tool_set": "openhands.tools.task",
    "delegate": "openhands.tools.delegate",
    "glob": "openhands.tools.glob",
    "grep": "openhands.tools.grep",
    "apply_patch": "openhands.tools.apply_patch",
    "planning_file_editor": "openhands.tools.planning_file_editor",
    "browser_tool_set": "openhands.tools.browser_use",
}


@functools.cache
def enable_delegation() -> None:
    """The CLI's built-in sub-agents (browser-less, as the CLI registers them) and our
    `task_tool_set` (`delegation.py`); once per process."""
    register_builtins_agents(enable_browser=False)
    delegation.register()


def register_tools(names: Iterable[str]) -> None:
    """Have the SDK know each of these tools (a stored conversation's), when we know the
    module that registers it."""
    registered = set(list_registered_tools())
    for name in names:
        if name not in registered and name in TOOL_MODULES:
            importlib.import_module(TOOL_MODULES[name])


def condenser_of_kind(spec: dict[str, object]) -> CondenserBase:
    """A condenser of another kind than the summarizing one, validated by the SDK as is."""
    return CondenserBase.model_validate(spec)


def project_skills(cwd: str) -> list[Skill]:
    """The project's skills and `AGENTS.md` (the git root's too); blocking, may raise."""
    return load_project_skills(cwd)


def agent_context(skills: list[Skill], suffix: str, public: list[Skill]) -> AgentContext:
    """The CLI's `AgentContext`: `skills` (the project's), the user's skills, and `public`
    below them (the SDK's ranking: public < user < project), never fetching the public
    skills itself (public_skills.py does, once per process)."""
    context = AgentContext(
        skills=skills,
        system_message_suffix=suffix,
        load_user_skills=True,
        load_public_skills=False,
    )
    if public:
        context = context.model_copy(
            update={"skills": merge_skills_by_name(context.skills, public)}
        )
    return context


def hook_config(path: Path | str) -> HookConfig | None:
    """The SDK's `HookConfig` of a hooks file, or None when it configures nothing."""
    config = HookConfig.load(path=path)
    return None if config.is_empty() else config


def public_skills_source() -> tuple[bool, str]:
    """(read from a local copy, `EXTENSIONS_PATH`; the git ref the SDK fetches)."""
    import os

    return bool(os.environ.get(sdk_skill.PUBLIC_SKILLS_PATH_ENV)), sdk_skill.PUBLIC_SKILLS_REF


def load_public_skills() -> list[Skill]:
    """The SDK's fetch (or local read) of the public skills; blocking."""
    return sdk_skill.load_public_skills()


def api_critic(
    *,
    server_url: str,
    api_key: str | SecretStr,
    model_name: str,
    issue_threshold: float,
    timeout_seconds: float,
    client: httpx.Client,
    chat_template: str | None,
) -> APIBasedCritic:
    """The SDK's API critic, its HTTP client ours (abandoned by a cancel: critic.py) and,
    with `chat_template`, its renderer built from that template instead of the fetched
    tokenizer config."""
    critic = APIBasedCritic(
        server_url=server_url,
        api_key=api_key,
        model_name=model_name,
        issue_threshold=issue_threshold,
        timeout_seconds=timeout_seconds,
    )
    critic._client = client
    if chat_template is not None:
        critic._template_renderer = ChatTemplateRenderer(chat_template=chat_template)
    return critic


def prime_template(critic: APIBasedCritic) -> None:
    """Fetch (or load from the SDK's cache) the critic's chat template now; blocking."""
    critic._get_template_renderer()
