"""End to end under acpx (0.15.1 and 0.19.1): what its user sees of the agent's client calls.

* A file the agent creates is one `fs/write_text_file`: no read of a file that does not
  exist yet (acpx printed "[error] RUNTIME: Resource not found: file:///…" for each).
* acpx in a terminal asks its user before it creates a terminal; the agent waits for that
  answer however long it takes, unless `TRIO_ACP_ANSWER_TIMEOUT` bounds the wait. The user
  here answers a few seconds late: with a one-second bound the command is given up, with
  the default it runs (docs/editor-workspace.md, "The wait").

acpx prompts only when its stdin and stderr are terminals, so those runs get a
pseudo-terminal and answer its `(y/N)` questions like a person at the keyboard.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_acpx_client import ACPX, ACPX_019, NODE, Acpx, frames, updates

from trio_acp import warm
from trio_acp.testing import ScriptedLLM, scenario_prompt

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed (needed for acpx)"),
    pytest.mark.skipif(
        not (ACPX.exists() and ACPX_019.exists()),
        reason="acpx is not installed: run `scripts/dev lint` (it installs tests/js)",
    ),
    pytest.mark.skipif(not warm.supported(), reason="warm start needs Linux"),
    pytest.mark.timeout(600),
]

CLIENTS = [pytest.param(ACPX, id="acpx-0.15"), pytest.param(ACPX_019, id="acpx-0.19")]
#: How long the user takes to say yes to the terminal: past a one-second bound.
ANSWER_DELAY = 3.0
#: A guard against a hung acpx, not a timing check.
RUN_GUARD = 240.0


@pytest.fixture(scope="module")
def acpx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Acpx]:
    with ScriptedLLM() as llm:
        client = Acpx(tmp_path_factory.mktemp("acpx-waits"), llm.base_url)
        started = client.warm("start", timeout=300)
        assert started.returncode == 0, started.stderr
        try:
            yield client
        finally:
            client.warm("stop")


def argv(acpx: Acpx, cli: Path, *args: str, policy: str) -> list[str]:
    head = [str(cli), "--agent", acpx.agent, "--cwd", str(acpx.ws), policy]
    return [*head, "--format", "json", "--timeout", "180", *args]


def client_calls_about(fs: list[dict[str, Any]], path: str) -> list[str]:
    return [
        f["method"]
        for f in fs
        if f.get("method", "").startswith("fs/") and "id" in f and f["params"]["path"] == path
    ]


@pytest.mark.parametrize("cli", CLIENTS)
def test_a_new_file_is_one_write_and_no_failing_read(acpx: Acpx, cli: Path) -> None:
    target = acpx.ws / f"new-{cli.parent.parent.name}.txt"
    proc = subprocess.run(
        argv(
            acpx, cli, "exec", scenario_prompt("edit", "", path=str(target)), policy="--approve-all"
        ),
        cwd=acpx.ws,
        env=acpx.env,
        capture_output=True,
        text=True,
        timeout=RUN_GUARD,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    fs = frames(proc.stdout)
    # The create is one write; only the edit after it reads the file (which exists now).
    calls = client_calls_about(fs, str(target))
    assert calls[0] == "fs/write_text_file", calls
    assert calls.count("fs/write_text_file") == 2  # the create, then the edit
    assert not [f for f in fs if (f.get("error") or {}).get("code") == -32002]
    assert "Resource not found" not in proc.stdout + proc.stderr
    assert target.read_text() == "hello trio\n"


def run_at_the_keyboard(
    acpx: Acpx, cli: Path, prompt: str, env: dict[str, str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """acpx with a terminal for stdin and stderr, so it asks its user; every question is
    answered yes, the one about the terminal command `ANSWER_DELAY` seconds late.
    Returns the frames acpx printed and the questions it asked."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        argv(acpx, cli, "exec", prompt, policy="--approve-reads"),
        cwd=acpx.ws,
        env=env,
        stdin=follower,
        stderr=follower,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    os.close(follower)
    questions: list[str] = []
    screen = ""
    deadline = time.monotonic() + RUN_GUARD
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if not ready:
                continue
            try:
                screen += os.read(leader, 65536).decode(errors="replace")
            except OSError:  # acpx closed its terminal
                break
            if "(y/N)" not in screen:
                continue
            question = screen[screen.rfind("[permission]") :]
            questions.append(question)
            if "Allow terminal command" in question:
                time.sleep(ANSWER_DELAY)  # the user reads the command before saying yes
            os.write(leader, b"y\n")
            screen = ""
        out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(leader)
    assert proc.returncode == 0, out[-3000:]
    return frames(out), questions


@pytest.mark.parametrize("cli", CLIENTS)
@pytest.mark.parametrize(
    "bound", [None, "1"], ids=["no-bound-by-default", "TRIO_ACP_ANSWER_TIMEOUT=1"]
)
def test_terminal_create_waits_for_a_late_yes_unless_bounded(
    acpx: Acpx, cli: Path, bound: str | None
) -> None:
    env = dict(acpx.env)
    env.pop("TRIO_ACP_ANSWER_TIMEOUT", None)
    if bound is not None:
        env["TRIO_ACP_ANSWER_TIMEOUT"] = bound
    command = f"echo yes came late {cli.parent.parent.name}"
    fs, questions = run_at_the_keyboard(
        acpx, cli, scenario_prompt("terminal", "", command=command), env
    )
    assert any("Allow terminal command" in q for q in questions), questions
    assert [f for f in fs if f.get("method") == "terminal/create"]
    ends = [
        u for u in updates(fs, "tool_call_update") if u.get("status") in ("completed", "failed")
    ]
    assert len(ends) == 1, ends
    (end,) = ends
    text = json.dumps(end)
    if bound is None:
        # Waited for the user: the command ran in acpx's terminal.
        assert end["status"] == "completed", end
        assert command.removeprefix("echo ") in text
    else:
        # The configured bound, not a fixed one, gave up on the answer.
        assert end["status"] == "failed", end
        assert "terminal/create timed out: the client did not answer within 1 s" in text
