"""The rest of the user's OpenHands set-up, read the way the OpenHands CLI reads it.

`settings.py` reads the model (`agent_settings.json`'s `llm` and the `LLM_*` variables).
This module reads the other files an OpenHands CLI user has, without importing the SDK (so
a broken file is reported before any heavy work, and reading costs nothing at start-up):

- `cli_config.json`: the critic and iterative-refinement settings (`critic` object, or the
  legacy top-level fields, which the CLI migrates the same way), validated as the CLI does
  (thresholds in 0..1, 1..10 refinement iterations). A file the CLI would reject gives the
  defaults, as in the CLI, plus a warning the user sees. The CLI reads it from
  `$PERSISTENCE_DIR` (default `~/.openhands`), which we follow; when only
  `OPENHANDS_PERSISTENCE_DIR` is set we read it from there, so one variable moves it all.
  We never write the user's files (the CLI rewrites a migrated `cli_config.json`).
- `mcp.json`: the MCP servers the user added with `openhands mcp add`; only those enabled
  (a server without `enabled` counts as enabled, as in the CLI). The CLI's bookkeeping
  fields (`enabled`, and the `null`s it writes for unset fields) are dropped.
- `hooks.json`: the project's `<cwd>/.openhands/hooks.json`, else the user's
  `<persistence dir>/hooks.json` (the first that exists, as the SDK's `HookConfig.load`
  searches; the user's file is looked up in our persistence directory, which the SDK's own
  search would not honour).
- the critic's own variables: `TRIO_ACP_CRITIC_URL` (a critic server for a model that is
  not behind the OpenHands LLM proxy), `TRIO_ACP_CRITIC_CHAT_TEMPLATE` (the critic's chat
  template from a file, so it needs no network) and `TRIO_ACP_CRITIC_TIMEOUT` (`critic.py`).
- a stored conversation's tools: the `agent.tools` of its `base_state.json`, so a resumed
  conversation keeps the tools it was created with (the SDK refuses to resume a
  conversation whose tools were removed).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import attrs

from trio_acp.credentials import secret_values
from trio_acp.openhands.sessions.small_files import loads_json
from trio_acp.openhands.setup.settings import Settings, SettingsError
from trio_acp.openhands.translate.shapes import JsonObject

#: One `mcpServers` entry (a command, or a URL, with each transport's own keys): JSON that
#: the SDK's MCP config validates.
McpServerEntry = JsonObject
#: A tool spec as a stored conversation records it (`name`, `params`): JSON.
ToolSpec = JsonObject

CLI_CONFIG_FILE = "cli_config.json"
MCP_CONFIG_FILE = "mcp.json"
HOOKS_FILE = "hooks.json"
BASE_STATE_FILE = "base_state.json"

# Seconds one critic request may take. The SDK's default (300 s) is as long as a model
# call; the critic answers in a second or two, and while it runs the turn waits (under the
# conversation's lock, where a cancel cannot reach it).
DEFAULT_CRITIC_TIMEOUT = 60.0

_LEGACY_CRITIC_FIELDS = (
    "enable_critic",
    "enable_iterative_refinement",
    "critic_threshold",
    "issue_threshold",
    "max_refinement_iterations",
)


@attrs.frozen
class CriticSettings:
    """The CLI's critic settings (`openhands_cli.stores.cli_settings.CriticSettings`)."""

    enable_critic: bool = True
    enable_iterative_refinement: bool = False
    # Refinement triggers when the critic's predicted success falls below this...
    critic_threshold: float = 0.6
    # ...or when any single issue's probability reaches this.
    issue_threshold: float = 0.75
    max_refinement_iterations: int = 3


@attrs.frozen
class CliConfig:
    critic: CriticSettings = CriticSettings()
    path: Path | None = None
    # Why the file's values were not used (the CLI falls back to defaults silently).
    warning: str | None = None


def cli_config_path(persistence_dir: Path, env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("PERSISTENCE_DIR")
    return (Path(base).expanduser() if base else persistence_dir) / CLI_CONFIG_FILE


def load_cli_config(persistence_dir: Path, env: Mapping[str, str] | None = None) -> CliConfig:
    path = cli_config_path(persistence_dir, env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return CliConfig()
    except OSError as exc:
        return CliConfig(
            path=path, warning=f"cannot read {path}: {exc}; using the default critic settings"
        )
    try:
        data = loads_json(text)
        if not isinstance(data, dict):
            raise ValueError("it is not a JSON object")
        critic = _critic_settings(data)
    except (ValueError, TypeError) as exc:
        return CliConfig(
            path=path, warning=f"{path} is not usable ({exc}); using the default critic settings"
        )
    return CliConfig(critic=critic, path=path)


def _critic_settings(data: JsonObject) -> CriticSettings:
    nested = data.get("critic")
    fields: JsonObject = {}
    if isinstance(nested, dict):
        fields.update(nested)
    elif nested is not None:
        raise ValueError("'critic' must be an object")
    # The CLI's migration: legacy top-level fields move under `critic` (and win there).
    for name in _LEGACY_CRITIC_FIELDS:
        if name in data:
            fields[name] = data[name]
    kwargs: JsonObject = {}
    for name in _LEGACY_CRITIC_FIELDS:
        if name not in fields:
            continue
        value = fields[name]
        if name.startswith("enable_"):
            kwargs[name] = _bool(name, value)
        elif name == "max_refinement_iterations":
            number = _number(name, value)
            if number != int(number):
                raise ValueError(f"{name} must be a whole number, got {value!r}")
            if not 1 <= number <= 10:
                raise ValueError(f"{name} must be between 1 and 10, got {value!r}")
            kwargs[name] = int(number)
        else:
            number = _number(name, value)
            if not 0.0 <= number <= 1.0:
                raise ValueError(f"{name} must be between 0.0 and 1.0, got {value!r}")
            kwargs[name] = float(number)
    return CriticSettings(**kwargs)


def _bool(name: str, value: object) -> bool:
    # pydantic's lax bool: true/false, 0/1 and their common spellings.
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in (
        "true",
        "false",
        "1",
        "0",
        "yes",
        "no",
        "on",
        "off",
    ):
        return value.strip().lower() in ("true", "1", "yes", "on")
    raise ValueError(f"{name} must be true or false, got {value!r}")


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, got {value!r}") from None


# Fields `openhands mcp add` writes that are bookkeeping, not server configuration.
_MCP_BOOKKEEPING = ("enabled",)


def load_mcp_file(persistence_dir: Path) -> dict[str, McpServerEntry]:
    """The enabled servers of `<persistence dir>/mcp.json`, as `mcpServers` entries.

    Raises `SettingsError` naming the file when it exists but cannot be used (the CLI
    refuses to start a session then, too)."""
    path = persistence_dir / MCP_CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc}") from exc
    try:
        data = loads_json(text)
    except ValueError as exc:
        raise SettingsError(f"{path} is not valid JSON ({exc}); fix it or remove it") from exc
    servers = data.get("mcpServers", {}) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise SettingsError(f"{path} has no 'mcpServers' object")
    enabled: dict[str, McpServerEntry] = {}
    for name, server in servers.items():
        if not isinstance(server, dict):
            raise SettingsError(f"{path}: server {name!r} is not an object")
        if not _bool(f"{name}.enabled", server.get("enabled", True)):
            continue
        if not isinstance(server.get("command"), str) and not isinstance(server.get("url"), str):
            raise SettingsError(f"{path}: server {name!r} has neither a 'command' nor a 'url'")
        enabled[name] = {
            key: value
            for key, value in server.items()
            if key not in _MCP_BOOKKEEPING and value is not None
        }
    return enabled


def mcp_file_secrets(persistence_dir: Path) -> set[str]:
    """The credentials in `<persistence dir>/mcp.json`: the values of its servers' headers
    and environment named like one (`Authorization`, `GITHUB_TOKEN`, `X-Api-Key`: as the
    model's settings, credentials.py), disabled servers' too, for masking. A file that
    cannot be read gives none (`load_mcp_file` says what is wrong with it)."""
    try:
        data = loads_json((persistence_dir / MCP_CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return set()
    found: set[str] = set()
    for server in servers.values():
        if isinstance(server, dict):
            found |= secret_values(
                {"headers": server.get("headers") or {}, "env": server.get("env") or {}}
            )
    return found


def hooks_file(persistence_dir: Path, cwd: str | Path) -> Path | None:
    for candidate in (Path(cwd) / ".openhands" / HOOKS_FILE, persistence_dir / HOOKS_FILE):
        if candidate.is_file():
            return candidate
    return None


def stored_tools(conversation_dir: Path) -> list[ToolSpec] | None:
    """The tool specs a stored conversation was created with, or None if unknown."""
    try:
        data = loads_json((conversation_dir / BASE_STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # nested too deeply included (small_files.py)
        return None
    agent = data.get("agent") if isinstance(data, dict) else None
    tools = agent.get("tools") if isinstance(agent, dict) else None
    if not isinstance(tools, list) or not tools:
        return None
    if not all(isinstance(tool, dict) and isinstance(tool.get("name"), str) for tool in tools):
        return None
    return tools


@attrs.frozen
class SessionSetup:
    """Everything one session's agent is built from, read from files and variables."""

    settings: Settings
    cwd: str
    # The client's `mcpServers` (session/new, load, resume), as `mcpServers` entries.
    client_mcp: dict[str, McpServerEntry]
    mcp_file: dict[str, McpServerEntry]
    hooks_path: Path | None
    stored_tools: list[ToolSpec] | None
    cli: CliConfig
    # LLM_MODEL / LLM_API_KEY / LLM_BASE_URL as set in the environment (the overrides the
    # CLI applies to the condenser's model too).
    env_llm: dict[str, str]
    public_skills: bool = True
    # The critic (critic.py): an explicit server URL, a chat template, a request timeout.
    critic_url: str | None = None
    critic_template: str | None = None
    critic_timeout: float = DEFAULT_CRITIC_TIMEOUT


def load_critic_template(path: str) -> str:
    """A chat template: a `tokenizer_config.json` (its `chat_template`) or a Jinja file."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"TRIO_ACP_CRITIC_CHAT_TEMPLATE: cannot read {path}: {exc}") from exc
    try:
        data = loads_json(text)
    except ValueError:
        return text  # not JSON: the template itself
    template = data.get("chat_template") if isinstance(data, dict) else None
    if not isinstance(template, str) or not template.strip():
        raise SettingsError(
            f"TRIO_ACP_CRITIC_CHAT_TEMPLATE: {path} is JSON without a 'chat_template' string"
        )
    return template


def _critic_timeout(value: str | None) -> float:
    if not value:
        return DEFAULT_CRITIC_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise SettingsError(f"TRIO_ACP_CRITIC_TIMEOUT must be a number of seconds, not {value!r}")
    return seconds


def read_session_setup(
    settings: Settings,
    cwd: str,
    conversation_dir: Path,
    client_mcp: dict[str, McpServerEntry],
    env: Mapping[str, str] | None = None,
) -> SessionSetup:
    """Read the files of one session's set-up; raises `SettingsError` naming a bad file."""
    env = os.environ if env is None else env
    pdir = settings.persistence_dir
    return SessionSetup(
        settings=settings,
        cwd=cwd,
        client_mcp=client_mcp,
        mcp_file=load_mcp_file(pdir),
        hooks_path=hooks_file(pdir, cwd),
        stored_tools=stored_tools(conversation_dir),
        cli=load_cli_config(pdir, env),
        env_llm={
            name: env[f"LLM_{name.upper()}"]
            for name in ("model", "api_key", "base_url")
            if env.get(f"LLM_{name.upper()}")
        },
        public_skills=env.get("TRIO_ACP_PUBLIC_SKILLS", "1").strip().lower()
        not in ("0", "false", "no", "off"),
        critic_url=env.get("TRIO_ACP_CRITIC_URL") or None,
        critic_template=load_critic_template(env["TRIO_ACP_CRITIC_CHAT_TEMPLATE"])
        if env.get("TRIO_ACP_CRITIC_CHAT_TEMPLATE")
        else None,
        critic_timeout=_critic_timeout(env.get("TRIO_ACP_CRITIC_TIMEOUT")),
    )
