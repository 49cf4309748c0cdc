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

import attrs
import pytest
from _remote_e2e import answer_permission, send_prompt

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


@attrs.frozen
class ServerUser:
    """Who `trio-acp agent-server --user` makes the server, and the Python it runs on."""

    name: str | None  # None: not root, no --user
    python: str
    env: dict[str, str]  # what that Python needs in its environment


# What of the interpreter's tree the server never imports: not copied.
_NOT_COPIED = {"test", "site-packages", "idlelib", "tkinter", "turtledemo", "ensurepip"}


def _python_for(user: str, where: Path) -> ServerUser | None:
    """This interpreter, runnable by `user`, with this environment's packages; None if the
    machine does not allow it.

    Here the interpreter lives under /root (0700): once `--user` drops root, the server
    could not import a module it had not imported yet. A tree of hard links to it (no
    copy: one file system) outside /root, its site-packages a path file naming this
    environment's, is the same interpreter that `user` can reach.
    """
    base = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    try:
        where.mkdir(mode=0o755)
        (where / "bin").mkdir()
        os.link(os.path.realpath(sys.executable), where / "bin" / version)
        for directory, dirs, files in os.walk(base / "lib"):
            dirs[:] = [d for d in dirs if d not in _NOT_COPIED]
            target = where / Path(directory).relative_to(base)
            target.mkdir(exist_ok=True)
            for name in files:
                os.link(Path(directory, name), target / name, follow_symlinks=False)
        site = where / "lib" / version / "site-packages"
        site.mkdir()
        packages = [p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix)]
        (site / "trio_acp_test.pth").write_text(
            "".join(f"import site; site.addsitedir({p!r})\n" for p in packages)
        )
    except OSError:
        return None
    # Its libpython is found through an absolute path under /root (RUNPATH) otherwise.
    env = {"LD_LIBRARY_PATH": str(where / "lib")}
    python = str(where / "bin" / version)
    try:
        done = subprocess.run(
            ["runuser", "-u", user, "--", "env", *(f"{k}={v}" for k, v in env.items()), python]
            + ["-c", "import trio_acp, openhands.agent_server"],
            capture_output=True,
            timeout=180,
            cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return ServerUser(user, python, env) if done.returncode == 0 else None


def _server_user(where: Path) -> ServerUser:
    """As root: an unprivileged user (`nobody`) who can run this interpreter (`--user`:
    the tools then cannot read the keys file), else root itself (the same code path, no
    other user); no user when not root."""
    if os.geteuid() != 0:
        return ServerUser(None, sys.executable, {})
    if shutil.which("runuser") is not None:
        for python in (sys.executable, None):
            if python is not None:
                check = [python, "-c", "import trio_acp, openhands.agent_server"]
                done = subprocess.run(
                    ["runuser", "-u", "nobody", "--", *check], capture_output=True, timeout=180
                )
                if done.returncode == 0:
                    return ServerUser("nobody", python, {})
            else:
                found = _python_for("nobody", where / "python")
                if found is not None:
                    return found
    return ServerUser("root", sys.executable, {})


def _probe(server_pid: int, key_files: list[Path]) -> Scenario:
    command = (
        f"tr '\\0' '\\n' < /proc/{server_pid}/environ | sed 's/^/server:/'; "
        "tr '\\0' '\\n' < /proc/$PPID/environ | sed 's/^/parent:/'; "
        "env | sed 's/^/shell:/'"
    )
    command += "; echo whoami:$(id -un)"
    for n, path in enumerate(key_files):
        command += f"; echo keys{n}:; cat {path} 2>&1"
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
        TRIO_ACP_WARM="0",  # for any trio-acp launched under it (on by default)
    )
    server_env.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)  # the command sets it
    # Another user (the server's, its Python's) reaches what is under it: not the keys (0600).
    root.chmod(0o755)
    runs_as = _server_user(root)
    user = runs_as.name
    server_env.update(runs_as.env)
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [runs_as.python, "-m", "trio_acp", "agent-server", "--port", str(port)]
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
        if shutil.which("runuser") is not None and os.geteuid() == 0:
            # Root here: the server must have become an unprivileged user (issue 23.4c).
            assert other_user, "no unprivileged user could run the server's Python"
        if other_user:
            assert user is not None
            entry = pwd.getpwnam(user)
            os.chown(project, entry.pw_uid, entry.pw_gid)
            # The server runs as that user, all its ids (real, effective, saved, fs).
            status = Path(f"/proc/{server.pid}/status").read_text()
            uids = next(line for line in status.splitlines() if line.startswith("Uid:"))
            assert uids.split()[1:] == [str(entry.pw_uid)] * 4, uids
        # The launcher's key files: the server's keys, and the client's copy of its key.
        key_files = [srv / KEYS_FILE, home / "agent_server.json"] if other_user else []
        with ScriptedLLM(scenarios=[_probe(server.pid, key_files)]) as llm:
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
                rid = send_prompt(agent, sid, scenario_prompt("environ-probe"))
                if other_user:
                    # It names trio-acp's agent_server.json: asked, in every mode (and
                    # through the server: confirm.py); allowed, the server's user is
                    # refused it by the file's mode.
                    request = answer_permission(agent, "allow_once")
                    assert "agent_server.json" in request["params"]["toolCall"]["title"]
                reply = agent.response(rid, timeout=300)
                assert reply["result"]["stopReason"] == "end_turn", reply
                frames = json.dumps(agent.frames)
            seen = json.dumps([m for r in llm.requests for m in r.messages])
        assert f"the agent-server at {url}" in frames  # /status: the session runs there
        # The probe ran and its output reached the model: the server's environment, the
        # shell's parent's and the shell's own.
        if other_user:
            # Non-dumpable, and not root's to read: not even its own user reads it.
            assert f"/proc/{server.pid}/environ: Permission denied" in seen
        else:
            assert "server:OH_ENABLE_VSCODE=false" in seen
        assert "parent:" in seen and "shell:" in seen
        if other_user:  # the tools run as that user: the key files are not theirs to read
            assert f"whoami:{user}" in seen
            for n, path in enumerate(key_files):
                assert f"keys{n}:" in seen
                assert f"cat: {path}: Permission denied" in seen
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
