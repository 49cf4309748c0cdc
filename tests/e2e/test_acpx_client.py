"""End to end: `trio-acp` under acpx, a third-party headless ACP client (npm `acpx`).

acpx is what people script coding agents with from a shell; it is built on an older
release of the official TypeScript SDK (1.9) than our other TS tests (2.4), advertises the
client terminal, keeps named sessions across its own invocations (a queue-owner process
that re-launches the agent and resumes the session), and sends `session/cancel` from a
second invocation. Each behaviour here is one a user of acpx meets on the first day. The
model is the scripted server; acpx and the agent get a private HOME. Every acpx command is a
new launch of `trio-acp`, so the module runs a warm server (README, Warm start) as a
shell user of acpx would: launches after its start skip the SDK import.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from trio_acp import warm
from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env

ROOT = Path(__file__).resolve().parents[2]
# Two acpx releases are locked in tests/js: 0.15.1 (the official TS SDK 1.9 era) as "acpx"
# and 0.19.1 as "acpx-0.19". Both install a bin named "acpx", so each is named by its file.
ACPX = ROOT / "tests" / "js" / "node_modules" / "acpx" / "dist" / "cli.js"
ACPX_019 = ROOT / "tests" / "js" / "node_modules" / "acpx-0.19" / "dist" / "cli.js"
NODE = shutil.which("node")
PERMISSION_DENIED = 5  # acpx's exit code when it refused a permission during the turn
SLEEP_SECONDS = 47  # a figure no other test sleeps, so the leftover check is this test's own

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed (needed for acpx)"),
    pytest.mark.skipif(
        not ACPX.exists(),
        reason="acpx is not installed: run `scripts/dev lint` (it installs tests/js)",
    ),
    pytest.mark.skipif(not warm.supported(), reason="warm start needs Linux"),
    pytest.mark.timeout(600),
]


class Acpx:
    def __init__(self, tmp: Path, base_url: str) -> None:
        self.home = tmp / "home"
        self.ws = tmp / "ws"
        self.home.mkdir()
        self.ws.mkdir()
        self.env = dict(os.environ)
        self.env.update(scripted_env(base_url))
        self.env.update(
            HOME=str(self.home),
            OPENHANDS_PERSISTENCE_DIR=str(self.home / ".openhands"),
            LLM_NUM_RETRIES="1",
            LLM_TIMEOUT="30",
            TRIO_ACP_WARM_DIR=str(tmp / "warm"),
            # A loaded machine may take longer than the default half-second to fork.
            TRIO_ACP_WARM_WAIT="20",
        )
        self.env.pop("TRIO_ACP_WARM", None)
        # acpx splits --agent like a shell would; the interpreter path has no spaces here.
        self.agent = f"{sys.executable} -m trio_acp"

    def argv(
        self, *args: str, policy: str = "--approve-all", cli: Path = ACPX, fmt: str = "json"
    ) -> list[str]:
        return [
            str(cli),
            "--agent",
            self.agent,
            "--cwd",
            str(self.ws),
            policy,
            "--format",
            fmt,
            "--timeout",
            "180",
            *args,
        ]

    def run(
        self, *args: str, policy: str = "--approve-all", exit_code: int = 0, **how: Any
    ) -> list[dict[str, Any]]:
        return frames(self.output(*args, policy=policy, exit_code=exit_code, **how))

    def output(
        self,
        *args: str,
        policy: str = "--approve-all",
        exit_code: int = 0,
        cli: Path = ACPX,
        fmt: str = "json",
        env: dict[str, str] | None = None,
    ) -> str:
        """acpx's stdout: what its user reads (``fmt="text"``) or its frames (json)."""
        proc = subprocess.run(
            self.argv(*args, policy=policy, cli=cli, fmt=fmt),
            cwd=self.ws,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert proc.returncode == exit_code, (
            f"acpx {args} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
        return proc.stdout

    def warm(self, command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trio_acp", "warm", command],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            cwd=self.ws,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def frames(out: str) -> list[dict[str, Any]]:
    result = []
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            result.append(json.loads(line))
    return result


def prompt_result(fs: list[dict[str, Any]]) -> dict[str, Any]:
    # Both sides number their requests from 0, so an id alone does not say whose answer a
    # frame is; the prompt's is the one with a stop reason.
    results = [f["result"] for f in fs if "stopReason" in (f.get("result") or {})]
    assert len(results) == 1, fs
    return results[0]


def requests(fs: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    return [f["params"] for f in fs if f.get("method") == method and "id" in f]


def updates(fs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        f["params"]["update"]
        for f in fs
        if f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == kind
    ]


@pytest.fixture(scope="module")
def acpx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Acpx]:
    with ScriptedLLM() as llm:
        client = Acpx(tmp_path_factory.mktemp("acpx"), llm.base_url)
        started = client.warm("start", timeout=300)
        assert started.returncode == 0, started.stderr
        try:
            yield client
        finally:
            # Whatever acpx keeps alive for its named sessions goes with them.
            subprocess.run(
                client.argv("sessions", "close", "work"),
                cwd=client.ws,
                env=client.env,
                capture_output=True,
                timeout=60,
            )
            client.warm("stop")


def test_one_shot_command_runs_in_the_clients_terminal(acpx: Acpx) -> None:
    fs = acpx.run("exec", scenario_prompt("terminal", "", command="echo hi from acpx"))
    assert prompt_result(fs) == {"stopReason": "end_turn"}
    # acpx advertises the terminal: the command ran there, and was released.
    creates = requests(fs, "terminal/create")
    assert len(creates) == 1 and "echo hi from acpx" in json.dumps(creates[0])
    assert len(requests(fs, "terminal/release")) == 1
    done = [u for u in updates(fs, "tool_call_update") if u.get("status") == "completed"]
    assert done and "hi from acpx" in json.dumps(done)
    assert requests(fs, "session/request_permission")  # asked, and acpx approved


#: Both locked acpx releases, for what each shows its user.
RELEASES = [
    pytest.param(ACPX, id="acpx-0.15.1"),
    pytest.param(
        ACPX_019,
        id="acpx-0.19.1",
        marks=pytest.mark.skipif(not ACPX_019.exists(), reason="acpx 0.19.1 is not installed"),
    ),
]


@pytest.mark.parametrize("cli", RELEASES)
def test_the_terminal_acpx_runs_and_shows_is_the_command_the_model_wrote(
    acpx: Acpx, cli: Path
) -> None:
    """acpx asks its user to approve `command` + `args` of `terminal/create`, and prints a
    tool call's first title: both are the model's command, not trio-acp's set-up."""
    command = "echo the user sees this"
    fs = acpx.run("exec", scenario_prompt("terminal", "", command=command), cli=cli)
    assert prompt_result(fs) == {"stopReason": "end_turn"}
    (create,) = requests(fs, "terminal/create")
    assert (create["command"], create["args"]) == ("bash", ["-c", command])
    (start,) = updates(fs, "tool_call")
    assert start["title"] == command
    done = [u for u in updates(fs, "tool_call_update") if u.get("status") == "completed"]
    assert done and "the user sees this" in json.dumps(done)
    # What a user of acpx reads: the tool, titled with its command, from the start.
    shown = acpx.output(
        "exec", scenario_prompt("terminal", "", command=command), cli=cli, fmt="text"
    )
    assert f"[tool] {command} (pending)" in shown, shown
    assert f"[tool] {command} (completed)" in shown, shown
    assert "Run a terminal command" not in shown and "setsid" not in shown


@pytest.mark.parametrize("cli", RELEASES)
def test_a_terminal_acpx_refuses_fails_with_its_reason(acpx: Acpx, cli: Path) -> None:
    """`--deny-all` with the agent in always-approve: acpx refuses `terminal/create`
    itself, answering -32603 "Internal error" with the reason in `data.details`."""
    fs = acpx.run(
        "exec",
        scenario_prompt("terminal", "", command="echo never runs"),
        policy="--deny-all",
        exit_code=PERMISSION_DENIED,
        cli=cli,
        env={"TRIO_ACP_DEFAULT_MODE": "always-approve"},
    )
    assert prompt_result(fs)["stopReason"] == "end_turn"
    assert requests(fs, "terminal/create") and not requests(fs, "terminal/wait_for_exit")
    (failed,) = [u for u in updates(fs, "tool_call_update") if u.get("status") == "failed"]
    (shown,) = [c["content"]["text"] for c in failed["content"]]
    assert shown == "The editor did not run the command: Permission denied for terminal/create"
    assert failed["rawOutput"]["exit_code"] is None


def test_refused_edit_leaves_the_disk_alone(acpx: Acpx) -> None:
    target = acpx.ws / "refused.txt"
    fs = acpx.run(
        "exec",
        scenario_prompt("edit", "", path=str(target)),
        policy="--deny-all",
        exit_code=PERMISSION_DENIED,
    )
    assert prompt_result(fs)["stopReason"] == "end_turn"
    assert requests(fs, "session/request_permission")
    assert not requests(fs, "fs/write_text_file")
    failed = [u for u in updates(fs, "tool_call_update") if u.get("status") == "failed"]
    assert failed
    assert not target.exists()


def test_named_session_remembers_across_launches_and_cancels(acpx: Acpx) -> None:
    created = acpx.run("sessions", "new", "--name", "work")
    assert created is not None
    fs = acpx.run("prompt", "-s", "work", scenario_prompt("echo", "", word="pelican"))
    assert prompt_result(fs)["stopReason"] == "end_turn"
    fs = acpx.run("prompt", "-s", "work", scenario_prompt("remember", "what was it"))
    said = "".join(u["content"].get("text", "") for u in updates(fs, "agent_message_chunk"))
    assert "pelican" in said

    # A second acpx invocation cancels the running prompt; the client's terminal is killed
    # and released and nothing keeps running.
    running = acpx.popen(
        "prompt", "-s", "work", scenario_prompt("sleep", "", seconds=SLEEP_SECONDS)
    )
    assert running.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 180
    for line in running.stdout:
        seen.append(line)
        if '"terminal/create"' in line:
            break
        assert time.monotonic() < deadline, "the sleep never reached the terminal"
    time.sleep(0.5)
    acpx.run("cancel", "-s", "work")
    rest, err = running.communicate(timeout=60)
    fs = frames("".join(seen) + rest)
    assert running.returncode == 0, err[-3000:]
    assert prompt_result(fs) == {"stopReason": "cancelled"}
    # The terminal was killed and released before the turn's answer.
    methods = [
        f.get("method") or ("stopReason" in (f.get("result") or {}) and "answer") for f in fs
    ]
    assert "terminal/kill" in methods and "terminal/release" in methods, methods
    assert methods.index("terminal/kill") < methods.index("answer")
    assert methods.index("terminal/release") < methods.index("answer")
    # acpx 0.15 signals only the process it spawned when a command comes with arguments
    # (ours: `bash -c SCRIPT`); the command's own processes go all the same.
    assert leftover_sleeps() == []

    # The session goes on after the cancel.
    fs = acpx.run("prompt", "-s", "work", "[scenario:echo] still here")
    assert prompt_result(fs)["stopReason"] == "end_turn"


def leftover_sleeps(within: float = 15.0) -> list[int]:
    """Our `sleep` still running after `within` seconds (a bound on waiting, not a figure);
    any found are killed, not left behind."""
    deadline = time.monotonic() + within
    while True:
        found = []
        for proc in psutil.process_iter(["cmdline", "status"]):
            if proc.info["cmdline"] == ["sleep", str(SLEEP_SECONDS)] and (
                proc.info["status"] != psutil.STATUS_ZOMBIE
            ):
                found.append(proc)
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for proc in found:
        proc.kill()
    return [proc.pid for proc in found]


def test_the_launches_went_through_the_warm_server(acpx: Acpx) -> None:
    status = json.loads(acpx.warm("status").stdout)
    assert status["launches"] >= 3, status
