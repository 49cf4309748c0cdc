"""Agent profiles: how to point an agent at the suite's scripted model.

The suite starts a scripted OpenAI-compatible server on 127.0.0.1 (see `scenarios.py`)
and must tell the agent under test to use it.  Agents differ in how they take a model:

``generic``
    Environment variables: the OpenHands/litellm-style ``LLM_MODEL``, ``LLM_BASE_URL``,
    ``LLM_API_KEY`` (plus ``LLM_NUM_RETRIES=1``, ``LLM_TIMEOUT=30``), trio-acp's
    ``TRIO_ACP_LLM_*``, ``OPENAI_BASE_URL``/``OPENAI_API_KEY``, and
    ``ACP_CONFORMANCE_LLM_BASE_URL`` for agents written against this suite.
    ``OPENHANDS_PERSISTENCE_DIR`` points at a scratch directory.
``openhands-cli``
    The OpenHands CLI (``openhands acp``) reads its model only from
    ``$HOME/.openhands/agent_settings.json`` in ACP mode: the profile writes one in a
    scratch ``HOME``, gives it a private ``TMUX_TMPDIR`` and kills that tmux server after
    each agent process (its terminal tool's tmux outlives it otherwise).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from trio_acp.testing.scripted_llm import DEFAULT_MODEL, scripted_env

#: The variable any agent can read to find the suite's scripted model.
BASE_URL_VAR = "ACP_CONFORMANCE_LLM_BASE_URL"


@attrs.define
class Prepared:
    env: dict[str, str]
    #: Called after every agent process of the run has been stopped.
    cleanup: Callable[[], None] = lambda: None
    #: Mode ids worth trying (in order) to make the agent ask permission before a tool.
    permission_modes: tuple[str, ...] = ()


def _common_env(base_url: str, scratch: Path, extra: Mapping[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(scripted_env(base_url))
    env.update(
        {
            BASE_URL_VAR: base_url,
            "LLM_NUM_RETRIES": "1",
            "LLM_TIMEOUT": "30",
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": "scripted",
            "OPENHANDS_PERSISTENCE_DIR": str(scratch / "persistence"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


def generic(base_url: str, scratch: Path, extra: Mapping[str, str]) -> Prepared:
    return Prepared(_common_env(base_url, scratch, extra))


def openhands_cli(base_url: str, scratch: Path, extra: Mapping[str, str]) -> Prepared:
    home = scratch / "home"
    settings_dir = home / ".openhands"
    settings_dir.mkdir(parents=True, exist_ok=True)
    settings = {
        "llm": {
            "model": DEFAULT_MODEL,
            "base_url": base_url,
            "api_key": "scripted",
            # Its default retries back off for minutes against a server that errors.
            "num_retries": 1,
            "retry_min_wait": 1,
            "retry_max_wait": 1,
            "retry_multiplier": 1,
            "timeout": 30,
        }
    }
    (settings_dir / "agent_settings.json").write_text(
        json.dumps(settings, indent=2), encoding="utf-8"
    )
    tmux_dir = scratch / "tmux"
    tmux_dir.mkdir(parents=True, exist_ok=True)
    env = _common_env(base_url, scratch, {})
    # It reads its settings (and keeps conversations) in OPENHANDS_PERSISTENCE_DIR when set.
    env.update(
        {
            "HOME": str(home),
            "TMUX_TMPDIR": str(tmux_dir),
            "OPENHANDS_PERSISTENCE_DIR": str(settings_dir),
        }
    )
    env.pop("TMUX", None)
    env.update(extra)

    def cleanup() -> None:
        # Every tmux server with a socket in the private TMUX_TMPDIR (it uses `-L openhands`).
        tmux = shutil.which("tmux")
        if not tmux:
            return
        for socket in tmux_dir.glob("tmux-*/*"):
            subprocess.run(
                [tmux, "-S", str(socket), "kill-server"],
                capture_output=True,
                timeout=10,
                check=False,
            )

    return Prepared(env, cleanup, permission_modes=("always-ask",))


def _scratch_home(scratch: Path, env: dict[str, str]) -> Path:
    """A HOME (and XDG directories) of the run's own: a peer's settings, sessions and
    caches stay out of the user's."""
    home = scratch / "home"
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    for var, sub in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
    ):
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(home / sub)
    return home


def qwen_code(base_url: str, scratch: Path, extra: Mapping[str, str]) -> Prepared:
    env = _common_env(base_url, scratch, {})
    home = _scratch_home(scratch, env)
    # Its OpenAI-compatible auth, chosen in its settings (else session/new wants a login).
    settings = {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": DEFAULT_MODEL},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
    }
    (home / ".qwen").mkdir(exist_ok=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    env.update({"OPENAI_MODEL": DEFAULT_MODEL})
    env.update(extra)
    return Prepared(env)


def opencode(base_url: str, scratch: Path, extra: Mapping[str, str]) -> Prepared:
    env = _common_env(base_url, scratch, {})
    _scratch_home(scratch, env)
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "scripted": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "ACP conformance scripted model",
                "options": {"baseURL": base_url, "apiKey": "scripted"},
                "models": {DEFAULT_MODEL: {"name": DEFAULT_MODEL}},
            }
        },
        "model": f"scripted/{DEFAULT_MODEL}",
        "small_model": f"scripted/{DEFAULT_MODEL}",
        "autoupdate": False,
        "share": "disabled",
        # Its defaults run every tool without asking: asking is what the permission
        # checks need (the user's choice in its config; docs in conformance/PEERS.md).
        "permission": {"edit": "ask", "bash": "ask"},
    }
    env.update(
        {
            "OPENCODE_CONFIG_CONTENT": json.dumps(config),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        }
    )
    env.update(extra)
    return Prepared(env)


def fast_agent(base_url: str, scratch: Path, extra: Mapping[str, str]) -> Prepared:
    # The model is its command line's: `fast-agent-acp --model generic.scripted -x`.
    env = _common_env(base_url, scratch, {})
    _scratch_home(scratch, env)
    # Its home (sessions, process registry, log) is `.fast-agent` in its working directory
    # unless FAST_AGENT_HOME names one: the scratch directory, not the suite's.
    env.update(
        {
            "GENERIC_BASE_URL": base_url,
            "GENERIC_API_KEY": "scripted",
            "FAST_AGENT_HOME": str(scratch / "fast-agent-home"),
        }
    )
    env.update(extra)
    return Prepared(env)


def mistral_vibe(base_url: str, scratch: Path, extra: Mapping[str, str]) -> Prepared:
    env = _common_env(base_url, scratch, {})
    _scratch_home(scratch, env)
    vibe_home = scratch / "vibe"
    vibe_home.mkdir(parents=True, exist_ok=True)
    # Its generic (OpenAI-compatible) backend, one provider and one model: the scripted one.
    (vibe_home / "config.toml").write_text(
        "\n".join(
            [
                'active_model = "scripted"',
                "[[providers]]",
                'name = "scripted"',
                f"api_base = {json.dumps(base_url)}",
                'api_key_env_var = "ACP_CONFORMANCE_API_KEY"',
                'backend = "generic"',
                "[[models]]",
                f"name = {json.dumps(DEFAULT_MODEL)}",
                'provider = "scripted"',
                'alias = "scripted"',
                "",
            ]
        ),
        encoding="utf-8",
    )
    env.update({"VIBE_HOME": str(vibe_home), "ACP_CONFORMANCE_API_KEY": "scripted"})
    env.update(extra)
    return Prepared(env)


PROFILES: dict[str, Callable[[str, Path, Mapping[str, str]], Prepared]] = {
    "generic": generic,
    "openhands-cli": openhands_cli,
    "qwen-code": qwen_code,
    "opencode": opencode,
    "fast-agent": fast_agent,
    "mistral-vibe": mistral_vibe,
}
