"""`python -m bench agent-cmd`: the 20,000-token reply through any ACP agent's launch command.

    python -m bench agent-cmd --agent-cmd "python -m trio_acp" [--env K=V ...] [--runs 3]
    python -m bench agent-cmd --agent-cmd "python -m trio_acp" --env TRIO_ACP_FAST_STREAM=0
    python -m bench agent-cmd --agent-cmd "npx -y some-acp-agent" --env SOME_MODEL_VAR=openai/scripted
    python -m bench agent-cmd --openhands-settings --runs 5 --rounds 2 --agents \
        "LLM_STREAM=false python -m trio_acp" "/tmp/ohcli/bin/openhands acp --always-approve"

The last one is issue 27 item 6: the OpenHands CLI (`openhands` on PyPI, in a venv of its own
outside the project: ``uv venv /tmp/ohcli --python 3.12 && uv pip install --python
/tmp/ohcli/bin/python openhands==1.16.0``). Its `openhands acp` reads its model only from
``$OPENHANDS_PERSISTENCE_DIR/agent_settings.json`` (``--openhands-settings`` writes the
scripted model there) and never streams (its entry point leaves `streaming_enabled` off).

The scripted OpenAI-compatible model (`python -m trio_acp.testing.scripted_llm`) runs in a
process of its own; the agent is spawned with the scripted environment
(`trio_acp.testing.scripted_env`: ``LLM_BASE_URL``, ``LLM_MODEL``, ``LLM_API_KEY`` and the
``TRIO_ACP_LLM_*`` names), plus each ``--env``, in which ``{base_url}`` is replaced by the
server's URL (``--env OPENAI_BASE_URL={base_url}`` for an agent that reads another name).
Then, as an editor would over stdio: `initialize`, `session/new`, one warm-up turn of
``--warmup-tokens``, a wait until the agent is idle (``--settle``: an agent that answers
`session/new` before its imports are over is still warming up in the background), and
``--runs`` turns of the `long` scenario (``--tokens`` 4-character tokens, one per chunk).
Each turn: prompt → first `agent_message_chunk`, last chunk → response, prompt → response,
the agent process's CPU, and whether the text received is the text sent. Permission
requests are answered "allow once"; the client offers no file system or terminal.

``--agents`` runs several commands one after the other in each round, alternating
(``--rounds``), so that figures taken on a shared machine compare like with like:
``--agents "python -m trio_acp" "TRIO_ACP_FAST_STREAM=0 python -m trio_acp"`` (a leading
``NAME=VALUE`` of a command is set in its environment).

Prints one JSON line per agent and round, then a table of medians. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from trio_acp.process import spawn_agent
from trio_acp.testing import scripted_env

from ._common import process_cpu_seconds
from .agent_common import tail
from .agent_e2e import RecordingClient, stream_turn


def _command(text: str, extra: list[str]) -> tuple[list[str], dict[str, str]]:
    """A launch command's words and its leading NAME=VALUE assignments, plus `--env`s."""
    words = shlex.split(text)
    env: dict[str, str] = {}
    while words and "=" in words[0] and not words[0].startswith("="):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    for item in extra:
        name, _, value = item.partition("=")
        env[name] = value
    if words and words[0] in ("python", "python3"):
        words[0] = sys.executable  # the bench's own interpreter (the project's venv)
    return words, env


async def run_agent(
    command: str, extra_env: list[str], base_url: str, args: argparse.Namespace
) -> dict[str, Any]:
    words, assigned = _command(command, extra_env)
    home = tempfile.mkdtemp(prefix="trio-acp-bench-cmd-home-")
    cwd = tempfile.mkdtemp(prefix="trio-acp-bench-cmd-cwd-")
    env = dict(os.environ)
    env.update(scripted_env(base_url))
    env.update(
        OPENHANDS_PERSISTENCE_DIR=home,  # trio-acp and the OpenHands CLI: a throw-away home
        HOME=home,  # a peer's settings, caches and history stay out of the user's
        LLM_NUM_RETRIES="1",
        LLM_TIMEOUT="120",
        TRIO_ACP_WARM="0",
    )
    env.update({k: v.replace("{base_url}", base_url) for k, v in assigned.items()})
    if args.openhands_settings:
        _write_openhands_settings(Path(home), base_url)
    client = RecordingClient()
    log_path = Path(home) / "agent.log"
    result: dict[str, Any] = {"command": command, "env": assigned}
    with open(log_path, "wb") as log:
        t_spawn = time.monotonic()
        try:
            async with spawn_agent(words, client, cwd=cwd, stderr=log, env=env) as proc:
                agent = proc.agent
                with trio.fail_after(120):
                    await agent.initialize(protocol_version=1)
                    result["initialize_s"] = time.monotonic() - t_spawn
                    session = await agent.new_session(cwd=cwd, mcp_servers=[])
                    result["session_new_s"] = time.monotonic() - t_spawn
                pid = proc.process.pid
                warmup = await stream_turn(
                    agent, client, pid, session.session_id, args.warmup_tokens
                )
                result["warmup_ok"] = warmup["text_ok"]
                if args.settle > 0:
                    result["settle"] = await settle(pid, args.settle)
                runs = []
                for _ in range(args.runs):
                    turn = await stream_turn(agent, client, pid, session.session_id, args.tokens)
                    runs.append(_turn_figures(turn))
                result["runs"] = runs
        except BaseException as exc:
            result["error"] = f"{type(exc).__name__}: {exc}"
            result["log_tail"] = tail(log_path)
    return result


async def settle(pid: int, limit: float) -> dict[str, Any]:
    """Wait (at most `limit` s) until the agent is idle: no CPU tick in a 0.5 s window.

    An agent that answers `session/new` before its imports are over (trio-acp: issue 27
    item 2) finishes warming up in the background during its first turns (the rest of
    `openai.resources`, the tokenizer: ~0.6 s of CPU after the first turn, bench/README.md
    "Item 6"); an agent that imports everything before answering has nothing left. Timed
    turns start once either is idle, so that they measure a turn and not the start-up.
    """
    t0 = time.monotonic()
    cpu0 = last = process_cpu_seconds(pid)
    idle = False
    while time.monotonic() - t0 < limit:
        await trio.sleep(0.5)
        now = process_cpu_seconds(pid)
        if now is None or last is None:
            break
        if now - last <= 0.01:  # /proc counts in clock ticks (10 ms)
            idle = True
            break
        last = now
    end = process_cpu_seconds(pid)
    return {
        "seconds": time.monotonic() - t0,
        "cpu_s": None if end is None or cpu0 is None else end - cpu0,
        "idle": idle,
    }


def _write_openhands_settings(home: Path, base_url: str) -> None:
    """The scripted model in `agent_settings.json`, as the OpenHands CLI's `openhands acp` needs.

    The CLI's ACP mode reads its model only from this file under OPENHANDS_PERSISTENCE_DIR
    (its `--override-with-envs` is not passed on to `openhands acp`), and streams only when
    told to in code (`run_acp_server(streaming_enabled=...)`, which its entry point leaves
    off), so its turns are the non-streamed ones. trio-acp reads the same file, the
    `LLM_*` variables overriding it field by field (src/trio_acp/openhands/setup/settings.py).
    """
    llm = {
        "model": "openai/scripted",
        "base_url": base_url,
        "api_key": "scripted",
        "usage_id": "agent",
        "num_retries": 1,
        "timeout": 120,
    }
    (home / "agent_settings.json").write_text(json.dumps({"llm": llm}))


def _turn_figures(turn: dict[str, Any]) -> dict[str, Any]:
    last = turn["t_last_chunk"]
    return {
        "wall_s": turn["wall_s"],
        "first_chunk_s": turn["first_chunk_s"],
        "after_last_chunk_s": None if last is None else turn["t_response"] - last,
        "chunk_updates": turn["chunk_updates"],
        "text_ok": turn["text_ok"],
        "stop_reason": turn["stop_reason"],
        "agent_cpu_s": turn["agent_cpu_s"],
    }


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _fmt(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:.2f} s"


def _start_server() -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trio_acp.testing.scripted_llm",
            "--port",
            "0",
            "--exit-on-stdin-close",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


async def drive(args: argparse.Namespace, base_url: str) -> list[dict[str, Any]]:
    results = []
    for round_ in range(args.rounds):
        for command in args.agents:
            load = Path("/proc/loadavg").read_text().split()[:3]
            result = await run_agent(command, args.env, base_url, args)
            result["round"] = round_
            result["loadavg"] = " ".join(load)
            print(json.dumps(result), flush=True)
            results.append(result)
    return results


def _table(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print(f"\n{args.tokens:,}-token reply, medians over rounds × runs:")
    print(
        f"{'agent':52} {'prompt→response':>16} {'→first chunk':>13} {'last→response':>14} "
        f"{'agent CPU':>10} {'text':>5}"
    )
    for command in args.agents:
        turns = [t for r in results if r["command"] == command for t in r.get("runs", [])]
        errors = [r["error"] for r in results if r["command"] == command and "error" in r]
        ok = all(t["text_ok"] for t in turns) and bool(turns)
        print(
            f"{command[:52]:52} {_fmt(_median([t['wall_s'] for t in turns])):>16} "
            f"{_fmt(_median([t['first_chunk_s'] for t in turns])):>13} "
            f"{_fmt(_median([t['after_last_chunk_s'] for t in turns])):>14} "
            f"{_fmt(_median([t['agent_cpu_s'] for t in turns])):>10} "
            f"{'ok' if ok else 'BAD':>5}"
        )
        for error in errors:
            print(f"    error: {error}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench agent-cmd",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--agent-cmd",
        dest="agents",
        action="append",
        default=[],
        help="an ACP agent's launch command (repeatable)",
    )
    parser.add_argument(
        "--agents",
        dest="agents_many",
        nargs="+",
        default=[],
        help="several commands, alternated in each round",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in every agent's environment ({base_url}: the model's URL)",
    )
    parser.add_argument(
        "--openhands-settings",
        action="store_true",
        help="write the scripted model into each agent's agent_settings.json "
        "(the OpenHands CLI's `openhands acp` reads its model only there)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="after the warm-up turn, wait up to this long for the agent to be idle "
        "(no CPU in 0.5 s) before the timed turns (30; 0: start them at once)",
    )
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--warmup-tokens", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3, help="timed turns per agent and round (3)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    args.agents = args.agents + args.agents_many
    if not args.agents:
        parser.error("give --agent-cmd CMD (or --agents CMD ...)")
    server = _start_server()
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        results = trio.run(drive, args, base_url)
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    _table(results, args)


if __name__ == "__main__":
    main()
