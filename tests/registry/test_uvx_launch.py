"""The agent launched as the ACP registry launches it: `uvx trio-acp==VERSION`.

The registry's entry (`registry/trio-acp/agent.json`) says `uvx` with a pinned package; a
client installing from the registry runs exactly that in a fresh environment.  This test
builds the wheel from this checkout (`uv build`), then runs the entry's own command through
`uv tool run` (what `uvx` is) in an isolated environment, offline: the wheel from a
`--find-links` folder, every dependency from uv's cache at the versions of
`constraints.txt` (= uv.lock).  The official Python client then drives it in a fresh HOME
on the scripted model: `initialize` (the registry's auth check: an `agent` or `terminal`
method), `session/new` and a prompt; and, as the registry's launch check does, with stdin
at EOF: a clean exit.  The wheel builds in ~2 s and each environment links in <1 s; the
prompt test's ~25 s of CPU (30-60 s on a loaded 2-core machine) is the agent's first SDK
import without compiled bytecode, as a user's first `uvx` launch has it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import (
    AgentMessageChunk,
    ClientCapabilities,
    Implementation,
    TextContentBlock,
)

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120.0


def uv() -> str:
    # `uv run` tells its children where it is; otherwise the one on PATH.
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        pytest.skip("uv is not installed")
    return found


class Client:
    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    def text(self) -> str:
        return "".join(
            u.content.text
            for u in self.updates
            if isinstance(u, AgentMessageChunk) and isinstance(u.content, TextContentBlock)
        )


def cache_dir() -> str:
    found = subprocess.run(
        [uv(), "cache", "dir"], capture_output=True, text=True, check=True, timeout=30
    )
    return found.stdout.strip()


def build_wheel(out: Path) -> Path:
    subprocess.run(
        [uv(), "build", "--wheel", "--offline", "--quiet", "-o", str(out), str(ROOT)],
        check=True,
        timeout=120,
    )
    [wheel] = out.glob("trio_acp-*.whl")
    return wheel


def registry_command(wheels: Path) -> list[str]:
    """The entry's `uvx PACKAGE ARGS`, offline, against the built wheel and the lock."""
    uvx = json.loads((ROOT / "registry" / "trio-acp" / "agent.json").read_text())
    uvx = uvx["distribution"]["uvx"]
    return [
        uv(),
        "tool",
        "run",
        "--offline",
        "--isolated",
        "--no-config",
        "--find-links",
        str(wheels),
        "--constraints",
        str(ROOT / "constraints.txt"),
        "--python",
        sys.executable,
        uvx["package"],
        *uvx.get("args", []),
    ]


async def drive(command: list[str], env: dict[str, str], workspace: str) -> None:
    client = Client()
    async with acp.spawn_agent_process(
        client, command[0], *command[1:], env=env, transport_kwargs={"stderr": None}
    ) as (conn, _process):
        init = await asyncio.wait_for(
            conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                # What the registry's check sends: no auth.terminal.
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="registry-launch", version="1.0.0"),
            ),
            TIMEOUT,
        )
        methods = [m.model_dump(by_alias=True, exclude_none=True) for m in init.auth_methods]
        assert any(m.get("type", "agent") in ("agent", "terminal") for m in methods), methods
        assert init.agent_info is not None and init.agent_info.name == "trio-acp"
        session = await asyncio.wait_for(conn.new_session(cwd=workspace, mcp_servers=[]), TIMEOUT)
        prompt = scenario_prompt("echo", "hello from the registry")
        response = await asyncio.wait_for(
            conn.prompt(
                session_id=session.session_id,
                prompt=[TextContentBlock(type="text", text=prompt)],
            ),
            TIMEOUT,
        )
        assert response.stop_reason == "end_turn"
        assert client.text() == f"Echo: {prompt}"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wheels")
    build_wheel(folder)
    return folder


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "TRIO_ACP_"))}
    # Not this checkout's venv: the command makes its own environment.
    for name in (
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "UV_PROJECT_ENVIRONMENT",
        "OPENHANDS_PERSISTENCE_DIR",
    ):
        env.pop(name, None)
    # uv's cache is found from HOME: the real one, where the locked wheels are.
    env.update(HOME=str(home), UV_CACHE_DIR=cache_dir())
    # A warm server the launch started would outlive the test (it is on by default).
    env["TRIO_ACP_WARM"] = "0"
    return env


def test_the_registry_launch_check_sees_a_clean_exit(wheels, tmp_path):
    # The registry's CI also starts each agent with stdin at EOF and no client: an agent
    # that exits 0 (or is still running when it gives up) passes.  trio-acp exits 0 on
    # stdin EOF, and writes nothing to stdout (only protocol frames go there).
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        registry_command(wheels),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=clean_env(home),
        cwd=home,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert done.stdout == b""


def test_the_registry_entry_launches_offline_from_a_built_wheel(wheels, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    with ScriptedLLM() as llm, tempfile.TemporaryDirectory() as workspace:
        env = clean_env(home)
        env.update(scripted_env(llm.base_url), LLM_NUM_RETRIES="1")
        asyncio.run(
            asyncio.wait_for(drive(registry_command(wheels), env, os.path.realpath(workspace)), 240)
        )
    assert llm.requests, "the prompt never reached the model"
