"""A real OpenHands agent-server on 127.0.0.1, for tests and benchmarks of remote conversations.

`openhands-agent-server` (a dev dependency, pinned to the SDK's version) runs as a subprocess,
started as users start it, `trio-acp agent-server` (docs/agent-server.md): a free port, a
random session API key and secret key in its keys file, its own temporary directory for
conversations, workspace and logs, stdout/stderr into a log file. The server resolves its
storage paths relative to its working directory (`workspace/...`), which the command makes
that directory, so nothing lands anywhere else.

The LLM is not configured here: the client sends the whole agent spec, LLM included, in the
create-conversation request (`RemoteConversation.__init__` posts `agent.model_dump(...)`), so
a test points the agent's LLM at the scripted model server (`scripted_llm.py`) as it would
locally.

Usage::

    with AgentServer() as server:
        server.url, server.api_key, server.workspace
        server.kill()        # SIGKILL, as a crash would
        server.start()       # the same port, key and storage: a restart

`AgentServerUnavailable` is raised when the package is missing or the server does not come
up; tests skip on it with its message.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Any

__all__ = ["AgentServer", "AgentServerUnavailable", "free_port"]

# The agent-server imports the whole SDK before it listens: ~10 s on an idle 2-core machine,
# 40 s and more when it is loaded.
START_TIMEOUT = 180.0


class AgentServerUnavailable(RuntimeError):
    """The agent-server cannot run here (not installed, or it did not become healthy)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AgentServer:
    """One agent-server subprocess; restartable on the same port, key and storage."""

    def __init__(
        self, *, root: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None
    ) -> None:
        self._own_root = root is None
        self.root = Path(root or tempfile.mkdtemp(prefix="trio-acp-agent-server-")).resolve()
        self.port = free_port()
        self.api_key = secrets.token_urlsafe(24)
        self.secret_key = secrets.token_urlsafe(24)
        self.url = f"http://127.0.0.1:{self.port}"
        self.workspace = self.root / "workspace" / "project"
        self.conversations = self.root / "workspace" / "conversations"
        self.log_path = self.root / "agent-server.log"
        self._extra_env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.starts = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> AgentServer:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # Nothing of the test process's own configuration leaks into the server.
        for name in list(env):
            if name.startswith("OH_") or name in (
                "SESSION_API_KEY",
                "OPENHANDS_AGENT_SERVER_CONFIG_PATH",
            ):
                del env[name]
        env.update(
            OH_CONVERSATIONS_PATH=str(self.conversations),
            OH_WORKSPACE_PATH=str(self.workspace),
            OH_BASH_EVENTS_DIR=str(self.root / "workspace" / "bash_events"),
            OH_CONVERSATION_WORKTREE_ROOT=str(self.root / "worktrees"),
            OH_ENABLE_VSCODE="false",
            OH_ENABLE_BROWSER="false",
            OH_PRELOAD_TOOLS="false",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENHANDS_SUPPRESS_BANNER="1",
            LOG_LEVEL="WARNING",
            TMUX_TMPDIR=str(self.root / "tmux"),
        )
        env.update(self._extra_env)
        return env

    def start(self, timeout: float = START_TIMEOUT) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        if importlib.util.find_spec("openhands.agent_server") is None:
            raise AgentServerUnavailable(
                "openhands-agent-server is not installed (uv sync --group dev)"
            )
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.root / "tmux").mkdir(exist_ok=True)
        keys = self.root / "keys.json"
        if not keys.exists():
            # The command's keys file, written first so the key is known (and kept across
            # restarts, as the command keeps it).
            fd = os.open(keys, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"session_api_key": self.api_key, "secret_key": self.secret_key}, f)
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            # As users are told to start it (docs/agent-server.md): its keys from its
            # keys file, never in its environment.
            [
                sys.executable,
                "-m",
                "trio_acp",
                "agent-server",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                str(self.root),
            ],
            cwd=self.root,
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # Its own process group: a kill reaches the tools' shells too, and a Ctrl-C in
            # the test's terminal does not.
            start_new_session=True,
        )
        self.starts += 1
        try:
            self._wait_healthy(timeout)
        except BaseException:
            self.kill()
            raise

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AgentServerUnavailable(
                    f"the agent-server exited with status {self.process.returncode}; see {self.log_path}"
                )
            if self.healthy():
                return
            time.sleep(0.1)
        raise AgentServerUnavailable(
            f"the agent-server did not become healthy in {timeout:.0f} s; see {self.log_path}"
        )

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/ready", timeout=2) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (uvicorn's graceful shutdown), then SIGKILL to the whole group."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
        self._kill_group(process)
        self._closed_process()

    def kill(self) -> None:
        """SIGKILL the server and everything it started, as a crash would."""
        process = self.process
        if process is None:
            return
        self._kill_group(process)
        self._closed_process()

    def restart(self, timeout: float = START_TIMEOUT) -> None:
        self.stop()
        self.start(timeout)

    @staticmethod
    def _kill_group(process: subprocess.Popen[bytes]) -> None:
        # The group is the server's own (start_new_session): only what it started.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)

    def _closed_process(self) -> None:
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def close(self) -> None:
        self.stop()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""
