"""Terminal authentication end to end, as an editor does it, under the official Python client.

The agent (no model configured) offers the terminal method to a client that advertises
`auth.terminal`; `session/new` answers -32000; the "editor" runs the agent's command
with the method's args on a real pseudo-terminal and a "user" answers the questions;
then `session/new` on the same agent process works and a prompt reaches the model that
was typed in. Every frame is checked against the official schema.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import signal
import stat
import sys
import time

import pytest

acp = pytest.importorskip("acp")

from _oh_harness import TIMEOUT, Client, Wire, _prompt, _run, agent_env  # noqa: E402
from acp.exceptions import RequestError as AcpRequestError  # noqa: E402
from acp.schema import AuthCapabilities, ClientCapabilities, Implementation  # noqa: E402

from trio_acp.openhands.setup.settings import load_settings  # noqa: E402
from trio_acp.testing import scenario_prompt  # noqa: E402


class Terminal:
    """A command on a pseudo-terminal (it is the child's controlling tty, as in a real one)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: nothing but exec
            # As a user's terminal starts it: no signal blocked (a fork keeps the calling
            # thread's mask, and the test runner's may block SIGINT: Ctrl-C then did nothing).
            signal.pthread_sigmask(signal.SIG_SETMASK, ())
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # nor ignored
            os.execve(argv[0], argv, env)
        self.output = b""

    def expect(self, text: str, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while text.encode() not in self.output:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                raise TimeoutError(
                    f"waiting for {text!r}; got {self.output.decode(errors='replace')!r}"
                )
            try:
                data = os.read(self.fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                data = b""
            if not data:
                raise EOFError(
                    f"waiting for {text!r}; got {self.output.decode(errors='replace')!r}"
                )
            self.output += data

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\r")

    def wait(self, timeout: float = 90) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if ready:
                    self.output += os.read(self.fd, 4096)
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, 9)
        raise TimeoutError(self.output.decode(errors="replace"))


async def _terminal_auth(llm, home, ws):
    env = agent_env(llm, home)
    for key in ("LLM_MODEL", "LLM_API_KEY", "LLM_BASE_URL"):
        env.pop(key)  # nothing configured: the user sets it up in the terminal
    client, wire, out = Client(), Wire(), {}
    command = [sys.executable, "-m", "trio_acp"]
    async with acp.spawn_agent_process(
        client, *command, env=env, transport_kwargs={"stderr": None}
    ) as (conn, _):
        conn._conn.add_observer(wire)
        init = await asyncio.wait_for(
            conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(auth=AuthCapabilities(terminal=True)),
                client_info=Implementation(name="terminal-auth-e2e", version="0.0.1"),
            ),
            TIMEOUT,
        )
        out["init"] = init
        try:
            await asyncio.wait_for(conn.new_session(cwd=ws, mcp_servers=[]), TIMEOUT)
        except AcpRequestError as exc:
            out["before"] = exc.code
            out["before_message"] = str(exc)
        [method] = [m for m in init.auth_methods if getattr(m, "type", None) == "terminal"]
        # What the editor does: the agent's command plus the method's args and env, in a terminal.
        term_env = {**env, **(method.env or {})}
        terminal = Terminal([*command, *(method.args or [])], term_env)

        def user():
            terminal.expect("Model")
            terminal.type("openai/typed-in")
            terminal.expect("Base URL")
            terminal.type(llm.base_url)
            terminal.expect("API key")
            terminal.type("sk-typed-secret")
            return terminal.wait()

        out["exit"] = await asyncio.to_thread(user)
        out["screen"] = terminal.output.decode(errors="replace")
        sid = (await asyncio.wait_for(conn.new_session(cwd=ws, mcp_servers=[]), TIMEOUT)).session_id
        before = len(llm.requests)
        out["prompt"] = await _prompt(conn, wire, sid, scenario_prompt("echo", "configured"))
        out["request"] = llm.requests[before]
    out["client"], out["wire"] = client, wire
    out["settings_mode"] = stat.S_IMODE(os.stat(os.path.join(home, "agent_settings.json")).st_mode)
    out["settings"] = json.loads(open(os.path.join(home, "agent_settings.json")).read())
    out["loaded"] = load_settings({"OPENHANDS_PERSISTENCE_DIR": home})
    out["base_url"] = llm.base_url
    return out


def test_terminal_auth_sets_up_the_model_and_the_running_agent_uses_it():
    out = _run(_terminal_auth)
    assert out["before"] == -32000
    # The answer names the way this client offers (its terminal sign-in), and the command.
    assert '"Set up a model in a terminal"' in out["before_message"]
    assert "trio-acp setup" in out["before_message"]
    assert out["exit"] == 0, out["screen"]
    assert "sk-typed-secret" not in out["screen"]  # the key is not echoed
    assert out["prompt"].stop_reason == "end_turn"
    assert out["client"].text().endswith("configured")
    request = out["request"]
    assert request.body["model"] == "typed-in" and request.api_key == "sk-typed-secret"
    # The OpenHands CLI's file: a serialized Agent, owner-only.
    assert out["settings_mode"] == 0o600
    assert out["settings"]["kind"] == "Agent" and "tools" in out["settings"]
    assert out["settings"]["llm"]["model"] == "openai/typed-in"
    loaded = out["loaded"]
    assert (loaded.llm["model"], loaded.llm["api_key"], loaded.llm["base_url"]) == (
        "openai/typed-in",
        "sk-typed-secret",
        out["base_url"],
    )
    errors, checked = out["wire"].schema_errors()
    assert errors == [] and checked > 0


def _setup_terminal(home) -> Terminal:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLM_")}
    env["OPENHANDS_PERSISTENCE_DIR"] = str(home)
    return Terminal([sys.executable, "-m", "trio_acp", "setup"], env)


def test_setup_updates_an_existing_settings_file_in_place(tmp_path):
    path = tmp_path / "agent_settings.json"
    existing = {
        "llm": {
            "model": "openai/old",
            "api_key": "sk-old",
            "base_url": "http://old/v1",
            "num_retries": 2,
        },
        "condenser": {
            "kind": "LLMSummarizingCondenser",
            "max_size": 80,
            "llm": {"model": "openai/old", "api_key": "sk-old", "base_url": "http://old/v1"},
        },
        "tools": [{"name": "terminal"}],
        "kind": "Agent",
    }
    path.write_text(json.dumps(existing))
    path.chmod(0o644)
    terminal = _setup_terminal(tmp_path)
    terminal.expect("[openai/old]")
    terminal.type("anthropic/new")
    terminal.expect("[http://old/v1]")
    terminal.type("-")  # back to the provider's default
    terminal.expect("Enter keeps the saved key")
    terminal.type("")
    assert terminal.wait() == 0, terminal.output
    data = json.loads(path.read_text())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for llm in (data["llm"], data["condenser"]["llm"]):
        assert (
            llm["model"] == "anthropic/new" and llm["api_key"] == "sk-old" and "base_url" not in llm
        )
    assert data["llm"]["num_retries"] == 2 and data["condenser"]["max_size"] == 80
    assert data["tools"] == existing["tools"] and data["kind"] == "Agent"


def test_setup_interrupted_saves_nothing(tmp_path):
    terminal = _setup_terminal(tmp_path)
    terminal.expect("Model")
    os.write(terminal.fd, b"\x03")  # Ctrl-C
    assert terminal.wait() == 1
    assert "Nothing was saved" in terminal.output.decode()
    assert not (tmp_path / "agent_settings.json").exists()
