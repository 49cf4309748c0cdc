"""`initialize` offers an `agent` (or `terminal`) auth method whatever state the user's
OpenHands settings are in: the ACP registry's CI launches every listed agent in a fresh
HOME, sends `initialize` and rejects an agent whose `authMethods` has none of those types
(docs/registry.md).  Each state runs `python -m trio_acp` as the registry does: a first
stdout line, the `initialize` response, read raw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

#: The client capabilities the registry's check sends (no `auth.terminal`: the agent must
#: not offer the terminal method, so the agent method has to be there).
REGISTRY_CAPS = {
    "terminal": True,
    "fs": {"readTextFile": True, "writeTextFile": True},
    "_meta": {"terminal_output": True, "terminal-auth": True},
}


def registry_methods(home: Path, persistence: Path | None = None) -> list[dict[str, object]]:
    """The `authMethods` of a fresh agent process, as the registry's CI reads them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "TRIO_ACP_"))}
    env["HOME"] = str(home)
    # A warm server this launch started would outlive the test (it is on by default).
    env["TRIO_ACP_WARM"] = "0"
    env.pop("OPENHANDS_PERSISTENCE_DIR", None)
    if persistence is not None:
        env["OPENHANDS_PERSISTENCE_DIR"] = str(persistence)
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": 1,
            "clientInfo": {"name": "registry-check", "version": "1.0.0"},
            "clientCapabilities": REGISTRY_CAPS,
        },
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "trio_acp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=home,
    )
    try:
        # stdin EOF after the request: the agent answers, then exits (bounded: timeout).
        out, err = proc.communicate(json.dumps(request).encode() + b"\n", timeout=60)
    finally:
        proc.kill()
    first = out.split(b"\n", 1)[0]
    assert first, f"no initialize response; stderr: {err.decode(errors='replace')[-2000:]}"
    response = json.loads(first)
    assert "result" in response, response
    methods = response["result"].get("authMethods")
    assert isinstance(methods, list)
    return methods


def offers_registry_method(methods: list[dict[str, object]]) -> bool:
    # The registry's rule: a method's `type`, else its `_meta` key, else "agent".
    return any(m.get("type", "agent") in ("agent", "terminal") for m in methods)


def _no_settings(home: Path) -> Path | None:
    return None


def _settings(text: bytes) -> Callable[[Path], Path | None]:
    def make(home: Path) -> Path | None:
        (home / ".openhands").mkdir()
        (home / ".openhands" / "agent_settings.json").write_bytes(text)
        return None

    return make


def _settings_is_a_folder(home: Path) -> Path | None:
    (home / ".openhands" / "agent_settings.json").mkdir(parents=True)
    return None


def _configured(home: Path) -> Path | None:
    llm = {"model": "openai/x", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}
    return _settings(json.dumps({"llm": llm}).encode())(home)


STATES = {
    "fresh home": _no_settings,
    "configured": _configured,
    "settings not JSON": _settings(b"{not json"),
    "settings without llm": _settings(b"[]"),
    "settings not UTF-8": _settings(b"\xff\xfe\x00{garbage"),
    "settings is a folder": _settings_is_a_folder,
}


@pytest.mark.parametrize("state", list(STATES))
def test_initialize_offers_the_agent_method_in_every_settings_state(state, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    persistence = STATES[state](home)
    methods = registry_methods(home, persistence)
    assert offers_registry_method(methods), methods
    # Never the terminal method to a client that did not say it runs one (spec: MUST NOT).
    assert all(m.get("type") != "terminal" for m in methods)
