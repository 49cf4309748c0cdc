"""``python -m trio_acp.testing.scripted_llm`` as a separate process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest


def spawn(*args, **kw):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "trio_acp.testing.scripted_llm", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kw,
    )


@pytest.fixture
def proc_factory():
    procs = []

    def make(*args):
        p = spawn(*args)
        procs.append(p)
        return p

    yield make
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(5)
        for f in (p.stdin, p.stdout, p.stderr):
            f.close()


def test_serves_until_sigterm(proc_factory, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(
        json.dumps(
            {
                "scenarios": {"hi": [{"text": "Hi ${who}!"}]},
                "rules": [{"match": "greet", "scenario": "hi"}],
            }
        )
    )
    p = proc_factory("--port", "0", "--scenarios", str(script))
    url = p.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    with httpx.Client(timeout=5) as client:
        assert client.get(url + "/models").status_code == 200
        r = client.post(
            url + "/chat/completions",
            json={"model": "scripted", "messages": [{"role": "user", "content": "greet [who:Bo]"}]},
        )
        assert r.json()["choices"][0]["message"]["content"] == "Hi Bo!"
        r = client.post(
            url + "/chat/completions",
            json={
                "model": "scripted",
                "messages": [{"role": "user", "content": "[scenario:plan]"}],
            },
        )
        assert (
            r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "task_tracker"
        )
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    assert p.wait(5) == 0
    assert time.monotonic() - t0 < 3
    err = p.stderr.read()
    assert "RuntimeWarning" not in err and "Traceback" not in err


def test_kill_and_stdin_close(proc_factory):
    p = proc_factory()
    assert p.stdout.readline().startswith("http://")
    p.kill()
    assert p.wait(5) == -signal.SIGKILL

    p = proc_factory("--exit-on-stdin-close")
    url = p.stdout.readline().strip()
    assert httpx.get(url + "/models", timeout=5).status_code == 200
    p.stdin.close()
    assert p.wait(5) == 0


def test_list_scenarios():
    out = subprocess.run(
        [sys.executable, "-m", "trio_acp.testing.scripted_llm", "--list"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    names = {line.split("\t")[0] for line in out.splitlines()}
    assert {
        "echo",
        "slow",
        "terminal",
        "sleep",
        "edit",
        "plan",
        "demo",
        "long",
        "error500",
        "stall",
        "truncate",
        "remember",
        "error401",
        "error429",
        "context_too_long",
        "badjson",
        "reset",
    } <= names
