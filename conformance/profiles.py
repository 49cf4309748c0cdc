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


PROFILES: dict[str, Callable[[str, Path, Mapping[str, str]], Prepared]] = {
    "generic": generic,
    "openhands-cli": openhands_cli,
}
