"""No `.env` file reaches the agent or its tools unless the user asks for one.

litellm's `__init__` calls python-dotenv's `load_dotenv()`, which looks for a `.env` from
litellm's own directory upwards: the installation's parent (a project's `.venv`), a uv
tool's `~/.local/share`, the home directory. Whatever it finds went into the agent's
environment after it had withheld its own variables, so an `LLM_API_KEY` written there
reached every command the model ran.

The test puts litellm where such a file is found without touching the real installation:
a directory on `PYTHONPATH` holding a symbolic link to the installed litellm, with a
`.env` beside it, as it would be beside a `.venv`. Python keeps the link's path as the
module's file, so dotenv's search starts there. The agent runs as an editor runs it (a
subprocess on stdio) and its terminal runs `env`.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import sys
from pathlib import Path

import pytest

from trio_acp.testing import Reply, Scenario, ScriptedLLM, ToolCall, scenario_prompt, scripted_env
from trio_acp.testing.raw_agent import RawAgent

CANARY = "TRIO_ACP_DOTENV_CANARY"

# The session/new imports the SDK: slow on a loaded machine.
pytestmark = pytest.mark.timeout(400)


def _installation_with_dotenv(root: Path, text: str) -> Path:
    """`root/lib` is a path entry with litellm in it (a link to the installed one), and
    `root/.env` sits beside it as beside a virtual environment."""
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.origin is not None
    lib = root / "lib"
    lib.mkdir(parents=True)
    (lib / "litellm").symlink_to(Path(spec.origin).parent, target_is_directory=True)
    (root / ".env").write_text(text)
    return lib


def _streamed_and_tool_text(agent: RawAgent) -> str:
    out = []
    for frame in agent.frames:
        if frame.get("method") == "session/update":
            out.append(str(frame["params"]["update"]))
    return "\n".join(out)


def test_a_dotenv_beside_the_installation_reaches_neither_the_agent_nor_its_tools(tmp_path):
    dotenv_key = "sk-dotenv-" + secrets.token_hex(16)
    lib = _installation_with_dotenv(
        tmp_path / "install", f"LLM_API_KEY={dotenv_key}\n{CANARY}=from-dotenv\n"
    )
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    probe = Scenario(
        "env-probe",
        [
            Reply(
                tool_calls=[
                    ToolCall(
                        "terminal",
                        {
                            "command": f'echo "canary=${{{CANARY}:-unset}}"; env',
                            "summary": "env",
                            "security_risk": "LOW",
                        },
                    )
                ]
            ),
            Reply(tool_calls=[ToolCall("finish", {"message": "Probed."})]),
        ],
        "print the environment",
    )
    with ScriptedLLM(scenarios=[probe]) as llm:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "TRIO_ACP_"))}
        env.pop("PYTHON_DOTENV_DISABLED", None)
        env.update(scripted_env(llm.base_url, api_key="the-editors-own-key"))
        env.update(
            PYTHONPATH=os.pathsep.join([str(lib), *filter(None, [env.get("PYTHONPATH")])]),
            OPENHANDS_PERSISTENCE_DIR=str(home),
            TRIO_ACP_DEFAULT_MODE="always-approve",
            TRIO_ACP_WARM="0",
        )
        with RawAgent.spawn(env, argv=[sys.executable, "-m", "trio_acp"], cwd=str(work)) as agent:
            agent.initialize()
            sid = agent.new_session(str(work), timeout=300)
            reply = agent.prompt(sid, scenario_prompt("env-probe"), timeout=300)
            assert reply["result"]["stopReason"] == "end_turn", reply
            shown = _streamed_and_tool_text(agent)
        keys = {r.headers.get("authorization") for r in llm.requests}

    assert "canary=unset" in shown, shown[-2000:]  # the probe ran, and saw no .env variable
    assert "from-dotenv" not in shown
    assert dotenv_key not in shown
    # The model was configured by the editor's environment, not by the file.
    assert keys == {"Bearer the-editors-own-key"}


def test_the_import_sets_no_dotenv_switch_the_tools_would_inherit(monkeypatch):
    """The switch is set for the import only: a user's own programs, run by the agent's
    terminal, still load their `.env` files as they would anywhere."""
    from trio_acp.openhands import sdk

    monkeypatch.delenv(sdk.DOTENV_SWITCH, raising=False)
    with sdk.no_dotenv():
        assert os.environ[sdk.DOTENV_SWITCH] == "1"
    assert sdk.DOTENV_SWITCH not in os.environ
    # A user who set it is left alone, either way.
    monkeypatch.setenv(sdk.DOTENV_SWITCH, "0")
    with sdk.no_dotenv():
        assert os.environ[sdk.DOTENV_SWITCH] == "0"
    assert os.environ[sdk.DOTENV_SWITCH] == "0"
