"""`trio-acp agent-server`: a server started right, and a session through it (issue 23.4c, 23.5).

The command binds 127.0.0.1, generates its keys into a 0600 file, sets
`LITELLM_LOCAL_MODEL_COST_MAP` (the import deadlock that fails `python -m
openhands.agent_server` about 3 starts in 10), and hands the keys to the server through its
config file, never its environment: the model's shell, through the server, finds neither
key in the server's `/proc/<pid>/environ`, in its own parent's (the terminal's tmux
server, which would inherit the key the server exports into its environment), or in `env`.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from trio_acp.openhands.backends.agent_server_command import (
    CONFIG_FILE,
    KEYS_FILE,
    AgentServerCommandError,
    prepare,
)
from trio_acp.testing import Reply, Scenario, ScriptedLLM, ToolCall, scenario_prompt, scripted_env
from trio_acp.testing.agent_server import START_TIMEOUT, free_port
from trio_acp.testing.raw_agent import RawAgent

pytestmark = pytest.mark.timeout(600)


def test_prepare_writes_private_keys_and_refuses_keys_in_the_environment(tmp_path):
    env: dict[str, str] = {"LITELLM_LOCAL_MODEL_COST_MAP": "False"}
    keys = prepare(tmp_path / "srv", env)
    path = tmp_path / "srv" / KEYS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "srv").stat().st_mode) == 0o700
    assert json.loads(path.read_text())["session_api_key"] == keys.session_api_key
    # The same keys on the next start: what the server stored stays readable.
    assert prepare(tmp_path / "srv", dict(env)) == keys
    config = Path(env["OPENHANDS_AGENT_SERVER_CONFIG_PATH"])
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    # The variable that keeps litellm's import from deadlocking, whatever was set.
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert keys.session_api_key not in repr(keys)
    with pytest.raises(AgentServerCommandError, match="OH_SESSION_API_KEYS_0"):
        prepare(tmp_path / "other", {"OH_SESSION_API_KEYS_0": "k"})
    path.chmod(0o644)
    with pytest.raises(AgentServerCommandError, match="chmod 600"):
        prepare(tmp_path / "srv", {})


def _server_user() -> str | None:
    """As root: an unprivileged user who can run this interpreter (`--user`: the tools
    then cannot read the keys file), else root itself (the same code path, no other
    user); None when not root."""
    if os.geteuid() != 0:
        return None
    check = [sys.executable, "-c", "import trio_acp, openhands.agent_server"]
    runuser = shutil.which("runuser")
    if runuser is not None:
        try:
            done = subprocess.run(
                [runuser, "-u", "nobody", "--", *check], capture_output=True, timeout=120
            )
        except (OSError, subprocess.TimeoutExpired):
            done = None
        if done is not None and done.returncode == 0:
            return "nobody"
    return "root"


def _probe(server_pid: int, keys_file: Path | None) -> Scenario:
    command = (
        f"tr '\\0' '\\n' < /proc/{server_pid}/environ | sed 's/^/server:/'; "
        "tr '\\0' '\\n' < /proc/$PPID/environ | sed 's/^/parent:/'; "
        "env | sed 's/^/shell:/'"
    )
    if keys_file is not None:
        command += f"; echo keys:; cat {keys_file} 2>&1"
    return Scenario(
        "environ-probe",
        [
            Reply(
                tool_calls=[
                    ToolCall(
                        "terminal",
                        {"command": command, "summary": "probe", "security_risk": "LOW"},
                    )
                ]
            ),
            Reply(tool_calls=[ToolCall("finish", {"message": "Probed."})]),
        ],
        "read the server's environment",
    )


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited: {log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/ready", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the server did not start: {log.read_text(errors='replace')[-3000:]}")


def test_a_session_runs_through_the_command_and_its_shell_finds_no_key():
    root = Path(tempfile.mkdtemp(prefix="trio-acp-as-cmd-"))
    home, srv = root / "home", root / "srv"
    port = free_port()
    log = root / "server.log"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OH_", "TRIO_ACP_", "LLM_"))}
    server_env = dict(
        base,
        OPENHANDS_PERSISTENCE_DIR=str(home),
        OH_ENABLE_VSCODE="false",
        OH_ENABLE_BROWSER="false",
        OH_PRELOAD_TOOLS="false",
        LOG_LEVEL="WARNING",
    )
    server_env.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)  # the command sets it
    user = _server_user()
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "trio_acp", "agent-server", "--port", str(port)]
            + ["--dir", str(srv), "--configure"]
            + (["--user", user] if user else []),
            env=server_env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, server, log)
        keys = json.loads((srv / KEYS_FILE).read_text())
        secret_values = [keys["session_api_key"], keys["secret_key"]]
        assert stat.S_IMODE((srv / KEYS_FILE).stat().st_mode) == 0o600
        assert not (srv / CONFIG_FILE).exists()  # read once at start, then deleted
        client_config = json.loads((home / "agent_server.json").read_text())
        assert client_config == {"url": url, "api_key": keys["session_api_key"]}
        assert stat.S_IMODE((home / "agent_server.json").stat().st_mode) == 0o600
        environ = Path(f"/proc/{server.pid}/environ").read_bytes().decode(errors="replace")
        assert all(value not in environ for value in secret_values)

        project = srv / "workspace" / "project"
        project.mkdir(parents=True, exist_ok=True)
        other_user = user not in (None, "root")
        if other_user:
            entry = pwd.getpwnam(user)
            os.chown(project, entry.pw_uid, entry.pw_gid)
        keys_file = srv / KEYS_FILE if other_user else None
        with ScriptedLLM(scenarios=[_probe(server.pid, keys_file)]) as llm:
            env = dict(base, **scripted_env(llm.base_url))
            # The server is found through agent_server.json, as --configure wrote it.
            env.update(
                OPENHANDS_PERSISTENCE_DIR=str(home),
                TRIO_ACP_DEFAULT_MODE="always-approve",
                TRIO_ACP_WARM="0",
                LLM_NUM_RETRIES="1",
            )
            with RawAgent.spawn(env, stderr=subprocess.DEVNULL) as agent:
                agent.initialize()
                sid = agent.new_session(str(project), timeout=300)
                status = agent.prompt(sid, "/status", timeout=120)
                assert status["result"]["stopReason"] == "end_turn"
                reply = agent.prompt(sid, scenario_prompt("environ-probe"), timeout=300)
                assert reply["result"]["stopReason"] == "end_turn", reply
                frames = json.dumps(agent.frames)
            seen = json.dumps([m for r in llm.requests for m in r.messages])
        assert f"the agent-server at {url}" in frames  # /status: the session runs there
        # The probe ran and its output reached the model: the server's environment, the
        # shell's parent's and the shell's own.
        assert "server:OH_ENABLE_VSCODE=false" in seen
        assert "parent:" in seen and "shell:" in seen
        if other_user:  # the tools run as that user: the keys file is not theirs to read
            assert "keys:" in seen and "Permission denied" in seen
        assert [value for value in secret_values if value in seen] == []
        assert [value for value in secret_values if value in frames] == []
    finally:
        if server.poll() is None:
            os.killpg(server.pid, 15)
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, 9)
                server.wait()
        shutil.rmtree(root, ignore_errors=True)
