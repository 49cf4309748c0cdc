"""The peers' profiles point them at the scripted model and keep them out of the user's
home (`profiles.py`; the runs they made: `conformance/PEERS.md`)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from trio_acp.testing.scripted_llm import DEFAULT_MODEL
from trio_acp_conformance.profiles import PROFILES

URL = "http://127.0.0.1:9/v1"
PEER_PROFILES = ["qwen-code", "opencode", "fast-agent", "mistral-vibe"]


@pytest.mark.parametrize("name", PEER_PROFILES)
def test_a_peer_runs_in_a_home_of_its_own(name, tmp_path):
    prepared = PROFILES[name](URL, tmp_path, {"EXTRA": "1"})
    env = prepared.env
    assert Path(env["HOME"]).is_relative_to(tmp_path)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        assert Path(env[var]).is_relative_to(tmp_path)
    assert env["EXTRA"] == "1"  # --env wins


def test_qwen_code_uses_its_openai_auth_on_the_server(tmp_path):
    env = PROFILES["qwen-code"](URL, tmp_path, {}).env
    settings = json.loads((Path(env["HOME"]) / ".qwen" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "openai"
    assert (env["OPENAI_BASE_URL"], env["OPENAI_MODEL"]) == (URL, DEFAULT_MODEL)


def test_opencode_has_one_provider_the_server_and_asks_before_tools(tmp_path):
    env = PROFILES["opencode"](URL, tmp_path, {}).env
    config = json.loads(env["OPENCODE_CONFIG_CONTENT"])
    [(provider, spec)] = config["provider"].items()
    assert spec["options"]["baseURL"] == URL
    assert config["model"] == f"{provider}/{DEFAULT_MODEL}"
    assert config["permission"] == {"edit": "ask", "bash": "ask"}


def test_fast_agent_generic_provider_and_home(tmp_path):
    env = PROFILES["fast-agent"](URL, tmp_path, {}).env
    assert env["GENERIC_BASE_URL"] == URL
    assert Path(env["FAST_AGENT_HOME"]).is_relative_to(tmp_path)


def test_mistral_vibe_config_names_the_server(tmp_path):
    env = PROFILES["mistral-vibe"](URL, tmp_path, {}).env
    config = tomllib.loads((Path(env["VIBE_HOME"]) / "config.toml").read_text())
    [provider] = config["providers"]
    [model] = config["models"]
    assert provider["api_base"] == URL and env[provider["api_key_env_var"]]
    assert model["provider"] == provider["name"]
    assert config["active_model"] == model["alias"]
