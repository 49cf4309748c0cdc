"""`python -m bench flood`: a client pipelines requests and reads none of the answers.

One `trio-acp` process, initialized, with `--sessions` sessions (at least one: as an
editor has, and it waits for the SDK's import), settled (RSS steady for 2 s). Then `--requests` requests of one method (`--method`, default `initialize`) go
out in one stream without reading stdout, until they are all written or the agent has
taken nothing for `--stall` seconds (it stopped reading: back-pressure). Then the client
reads, writing the rest meanwhile, until every request is answered.

`--stream-tokens N` floods the other way: one `session/prompt` whose model reply streams N
tokens (the scripted `long` scenario), and a client that reads nothing until the model has
sent them all; then it reads every update and counts the text (the SDK's tokens wait for
the client in the session's bridge: trio_acp/openhands/sessions/token_backlog.py).

Printed: the agent's RSS and threads before the flood (after one request of the method,
so a first call's imports are not counted), at their peak (sampled, and the kernel's
high-water mark VmHWM) and after every answer was read; how much of the flood the agent
took in before it stopped reading; answers, duplicates, error codes. Figures, not
verdicts (bench/README.md, "Flood").
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import selectors
import tempfile
import time
from pathlib import Path
from typing import Any

from trio_acp.testing import ScriptedLLM, scripted_env
from trio_acp.testing.raw_agent import RawAgent


def status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (KiB) and Threads from /proc/<pid>/status."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
    return out


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def params_for(method: str, cwd: str) -> dict[str, Any]:
    if method == "initialize":
        return {"protocolVersion": 1, "clientCapabilities": {}}
    if method == "session/list":
        return {}
    if method == "session/new":
        return {"cwd": cwd, "mcpServers": []}
    return {}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench flood",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--requests", type=int, default=200_000, help="default 200,000")
    parser.add_argument(
        "--method", default="initialize", help="initialize (default), session/list, or any"
    )
    parser.add_argument(
        "--sessions", type=int, default=0, help="sessions made first (for session/list)"
    )
    parser.add_argument(
        "--stall",
        type=float,
        default=5.0,
        help="seconds without the agent taking a byte that end the unread phase (default 5)",
    )
    parser.add_argument(
        "--stream-tokens",
        type=int,
        default=0,
        help="instead: one prompt streaming this many tokens to a client that reads none",
    )
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="trio-acp-flood-"))
    persist, ws, home = (root / n for n in ("persist", "ws", "home"))
    for d in (persist, ws, home):
        d.mkdir()
    with ScriptedLLM() as llm:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(OPENHANDS_PERSISTENCE_DIR=str(persist), HOME=str(home))
        agent = RawAgent.spawn(env, cwd=str(ws))
        try:
            if args.stream_tokens:
                run_stream(agent, llm, args.stream_tokens, str(ws))
            else:
                run(agent, args, str(ws))
        finally:
            if agent.alive():
                agent.process.kill()
                agent.process.wait()


def run(agent: RawAgent, args: argparse.Namespace, cwd: str) -> None:
    agent.initialize()
    # One session at least: it waits for the SDK's import (started with the process), which
    # would otherwise grow the process during the flood.
    for _ in range(max(1, args.sessions)):
        agent.new_session(cwd, timeout=300)
    params = params_for(args.method, cwd)
    agent.result(args.method, params, timeout=300)  # a first call's imports: not the flood's
    pid = agent.pid
    # Settled: RSS unchanged for 2 s.
    last, steady_since = status(pid)["VmRSS"], time.perf_counter()
    while time.perf_counter() - steady_since < 2.0:
        agent.drain(0.5)
        now = status(pid)["VmRSS"]
        if now != last:
            last, steady_since = now, time.perf_counter()
    before = status(pid)
    hwm_before = before["VmHWM"]
    frames = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": args.method, "params": params}).encode()
        + b"\n"
        for i in range(args.requests)
    )
    fd_in = agent.process.stdin.fileno()  # type: ignore[union-attr]
    fd_out = agent.process.stdout.fileno()  # type: ignore[union-attr]
    view = memoryview(frames)
    peak = dict(before)
    started = time.perf_counter()
    last_progress = started
    next_sample = 0.0
    sel = selectors.DefaultSelector()
    sel.register(fd_in, selectors.EVENT_WRITE)

    def sample() -> None:
        now = status(pid)
        for key in ("VmRSS", "Threads"):
            peak[key] = max(peak[key], now[key])

    # Unread: write until all is written or the agent takes nothing for --stall seconds.
    while view and time.perf_counter() - last_progress < args.stall:
        if time.perf_counter() >= next_sample:
            sample()
            next_sample = time.perf_counter() + 0.2
        if sel.select(0.2):
            try:
                written = os.write(fd_in, view[: 1 << 20])
            except BlockingIOError:
                continue
            view = view[written:]
            last_progress = time.perf_counter()
    sample()
    unread_bytes = len(frames) - len(view)
    unread_requests = frames[:unread_bytes].count(b"\n")
    stalled = bool(view)
    unread_seconds = time.perf_counter() - started
    # Reading now (and writing the rest).
    answered: collections.Counter[int] = collections.Counter()
    codes: collections.Counter[Any] = collections.Counter()
    buffer = bytearray()
    sel.register(fd_out, selectors.EVENT_READ)
    if not view:
        sel.unregister(fd_in)
    while len(answered) < args.requests:
        if time.perf_counter() >= next_sample:
            sample()
            next_sample = time.perf_counter() + 0.2
        if not agent.alive():
            break
        for key, _ in sel.select(1.0):
            if key.fd == fd_in:
                try:
                    view = view[os.write(fd_in, view[: 1 << 20]) :]
                except BlockingIOError:
                    continue
                if not view:
                    sel.unregister(fd_in)
            else:
                data = os.read(fd_out, 1 << 20)
                if not data:
                    break
                buffer += data
                lines = buffer.split(b"\n")
                buffer = bytearray(lines.pop())
                for line in lines:
                    frame = json.loads(line)
                    if "method" in frame or not isinstance(frame.get("id"), int):
                        continue
                    answered[frame["id"]] += 1
                    codes[frame.get("error", {}).get("code", "result")] += 1
    drained_seconds = time.perf_counter() - started
    sample()
    time.sleep(1.0)
    after = status(pid)
    sel.close()
    duplicates = sum(1 for n in answered.values() if n > 1)
    print(f"flood: {args.requests:,} × {args.method} ({len(frames) / 2**20:,.1f} MiB)")
    if stalled:
        print(
            f"  unread: the agent took {unread_requests:,} requests ({unread_bytes / 2**20:,.2f} MiB)"
            f" then nothing for {args.stall:g} s (it stopped reading, or fell that far behind)"
        )
    else:
        print(f"  unread: the agent took all of it in {unread_seconds:.1f} s")
    print(
        f"  RSS: before {mib(before['VmRSS'])}, peak {mib(peak['VmRSS'])} sampled"
        f" (VmHWM {mib(hwm_before)} → {mib(after['VmHWM'])}), after draining {mib(after['VmRSS'])}"
        f"; peak - before: {mib(peak['VmRSS'] - before['VmRSS'])}"
    )
    print(
        f"  threads: before {before['Threads']}, peak {peak['Threads']}, after {after['Threads']}"
    )
    print(
        f"  answered {len(answered):,}/{args.requests:,} (duplicates {duplicates}) "
        f"in {drained_seconds:.1f} s; {dict(codes)}"
    )


def settled(pid: int, agent: RawAgent) -> dict[str, int]:
    """The agent's status once its RSS is unchanged for 2 s."""
    last, steady_since = status(pid)["VmRSS"], time.perf_counter()
    while time.perf_counter() - steady_since < 2.0:
        agent.drain(0.5)
        now = status(pid)["VmRSS"]
        if now != last:
            last, steady_since = now, time.perf_counter()
    return status(pid)


def run_stream(agent: RawAgent, llm: ScriptedLLM, tokens: int, cwd: str) -> None:
    from trio_acp.testing import scenario_prompt

    agent.initialize()
    sid = agent.new_session(cwd, timeout=300)
    agent.prompt(sid, scenario_prompt("long", "warm", tokens=200), timeout=300)
    pid = agent.pid
    before = settled(pid, agent)
    calls = len(llm.requests)
    rid = agent.new_id()
    agent.send(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "session/prompt",
            "params": {
                "sessionId": sid,
                "prompt": [{"type": "text", "text": scenario_prompt("long", "x", tokens=tokens)}],
            },
        }
    )
    peak = dict(before)
    started = time.perf_counter()
    # Unread until the model has streamed it all (the agent's stdout pipe fills first).
    while time.perf_counter() - started < 600:
        now = status(pid)
        peak["VmRSS"] = max(peak["VmRSS"], now["VmRSS"])
        done = [r for r in llm.requests[calls:] if r.outcome != "running"]
        if done:
            break
        time.sleep(0.2)
    streamed = time.perf_counter() - started
    time.sleep(1.0)
    peak["VmRSS"] = max(peak["VmRSS"], status(pid)["VmRSS"])
    unread = status(pid)
    fd_out = agent.process.stdout.fileno()  # type: ignore[union-attr]
    buffer = bytearray()
    text: list[str] = []
    updates = 0
    answered = None
    sel = selectors.DefaultSelector()
    sel.register(fd_out, selectors.EVENT_READ)
    while answered is None and time.perf_counter() - started < 900:
        if not sel.select(1.0):
            continue
        try:
            data = os.read(fd_out, 1 << 20)
        except BlockingIOError:
            continue
        if not data:
            break
        buffer += data
        lines = buffer.split(b"\n")
        buffer = bytearray(lines.pop())
        for line in lines:
            frame = json.loads(line)
            if frame.get("id") == rid:
                answered = frame
            update = frame.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "agent_message_chunk":
                updates += 1
                text.append(update["content"].get("text", ""))
    time.sleep(1.0)
    after = status(pid)
    got = "".join(text)
    print(f"stream flood: one turn of {tokens:,} streamed tokens, the client reading none")
    print(f"  the model streamed it all in {streamed:.1f} s while nothing was read")
    print(
        f"  RSS: before {mib(before['VmRSS'])}, unread {mib(unread['VmRSS'])}, peak "
        f"{mib(peak['VmRSS'])} sampled (VmHWM {mib(before['VmHWM'])} → "
        f"{mib(after['VmHWM'])}), after {mib(after['VmRSS'])}; "
        f"peak - before: {mib(peak['VmRSS'] - before['VmRSS'])}"
    )
    print(
        f"  answered: {(answered or {}).get('result')}; {updates:,} message updates, "
        f"{len(got):,} characters of text"
    )
