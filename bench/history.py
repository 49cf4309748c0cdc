"""`python -m bench history`: big histories — `session/load` of a long conversation and
`session/list` over many sessions (issue 13, item 10).

The conversations are written the way the SDK writes them: the agent (in this process, on an
in-memory connection, the scripted model) creates a session, so `base_state.json` and our
index are the real ones; the long history is then appended through the SDK's own `EventLog`
with the SDK's event classes — user prompts, streamed-style agent messages with reasoning,
terminal / file-editor / think / task-tracker calls and their observations, a rejected
permission, an interruption marker (trio_acp.openhands.sdk.interruption_event), an agent error.
The listed sessions are copies of a small conversation, each under its own id with its own
index (cwd, title, last update).

Figures: `session/load` wall time (request sent → response), time to its first update, the
number of updates and frames, the growth of the process's peak RSS during the load, and the
process's CPU time during it (every thread: the agent's, and this client's reading — a figure
that a machine shared with other work inflates less than the wall time);
`session/list` first page and a full walk over all pages (first ever: no cache file, as after
an upgrade; cold: a new process's first list, from the cache file the first one saved, with
what this process parsed forgotten; warm: the next ones). Goals: load ≤ 2 s with memory
bounded, list ≤ 200 ms. Nothing asserted.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
import uuid
from pathlib import Path
from typing import Any

import trio
import trio.testing

GOAL_LOAD_S = 2.0
GOAL_LIST_S = 0.200


# --------------------------------------------------------------------------- building


def history_events(n: int, cwd: str) -> list[Any]:
    """About `n` SDK events: turns of a realistic coding conversation."""
    from openhands.sdk.event import (
        ActionEvent,
        AgentErrorEvent,
        MessageEvent,
        ObservationEvent,
        UserRejectObservation,
    )
    from openhands.sdk.llm import Message, MessageToolCall, TextContent
    from openhands.sdk.tool.builtins import ThinkAction, ThinkObservation
    from openhands.tools.file_editor import FileEditorAction, FileEditorObservation
    from openhands.tools.task_tracker import TaskTrackerAction, TaskTrackerObservation
    from openhands.tools.task_tracker.definition import TaskItem
    from openhands.tools.terminal import TerminalAction, TerminalObservation

    from trio_acp.openhands import sdk as oh_sdk

    sdk_ns = types.SimpleNamespace(
        MessageEvent=MessageEvent, Message=Message, TextContent=TextContent
    )

    def action(act, tool, call_id, rid, thought="", reasoning=None):
        arguments = json.dumps(act.model_dump(mode="json", exclude={"kind"}))
        return ActionEvent(
            thought=[TextContent(text=thought)] if thought else [],
            reasoning_content=reasoning,
            action=act,
            tool_name=tool,
            tool_call_id=call_id,
            tool_call=MessageToolCall(
                id=call_id, name=tool, arguments=arguments, origin="completion"
            ),
            llm_response_id=rid,
        )

    def observe(obs, tool, call_id, act):
        return ObservationEvent(
            observation=obs, tool_name=tool, tool_call_id=call_id, action_id=act.id
        )

    def say(text, rid, reasoning=None):
        return MessageEvent(
            source="agent",
            llm_message=Message(
                role="assistant", content=[TextContent(text=text)], reasoning_content=reasoning
            ),
            llm_response_id=rid,
        )

    events: list[Any] = []
    turn = 0
    while len(events) < n:
        turn += 1
        rid = lambda k: f"chatcmpl-{turn}-{k}"  # noqa: E731
        call = lambda k: f"call_{turn}_{k}"  # noqa: E731
        events.append(
            MessageEvent(
                source="user",
                llm_message=Message(
                    role="user",
                    content=[
                        TextContent(
                            text=f"Turn {turn}: fix the failing test in module_{turn % 17}.py"
                        )
                    ],
                ),
            )
        )
        a = action(
            TerminalAction(command=f"pytest -q tests/test_{turn % 17}.py"),
            "terminal",
            call(1),
            rid(1),
            thought="Let me run the tests first.",
            reasoning="The user wants the test fixed; run it.",
        )
        events += [
            a,
            observe(
                TerminalObservation.from_text(
                    text="F.\n"
                    + "E   AssertionError: expected 3, got 4\n" * 8
                    + "1 failed, 1 passed in 0.12s",
                    command=a.action.command,
                    exit_code=1,
                ),
                "terminal",
                call(1),
                a,
            ),
        ]
        path = f"{cwd}/src/module_{turn % 17}.py"
        a = action(FileEditorAction(command="view", path=path), "file_editor", call(2), rid(2))
        events += [
            a,
            observe(
                FileEditorObservation.from_text(
                    text="\n".join(f"{i:6}\tline {i} of the module" for i in range(1, 40)),
                    command="view",
                    path=path,
                ),
                "file_editor",
                call(2),
                a,
            ),
        ]
        a = action(
            FileEditorAction(
                command="str_replace", path=path, old_str="return 4", new_str="return 3"
            ),
            "file_editor",
            call(3),
            rid(3),
            thought="The constant is off by one.",
        )
        events += [
            a,
            observe(
                FileEditorObservation.from_text(
                    text="The file has been edited.",
                    command="str_replace",
                    path=path,
                    old_content="def f():\n    return 4\n",
                    new_content="def f():\n    return 3\n",
                ),
                "file_editor",
                call(3),
                a,
            ),
        ]
        a = action(ThinkAction(thought="Check the other callers too."), "think", call(4), rid(4))
        events += [a, observe(ThinkObservation(), "think", call(4), a)]
        a = action(
            TaskTrackerAction(
                command="plan",
                task_list=[
                    TaskItem(title="Run the tests", status="done"),
                    TaskItem(title="Fix the constant", status="done"),
                    TaskItem(title="Re-run", status="in_progress"),
                ],
            ),
            "task_tracker",
            call(5),
            rid(5),
        )
        events += [
            a,
            observe(
                TaskTrackerObservation.from_text(
                    text="Plan updated.", command="plan", task_list=a.action.task_list
                ),
                "task_tracker",
                call(5),
                a,
            ),
        ]
        if turn % 5 == 0:  # a permission the user refused
            a = action(TerminalAction(command="rm -rf build"), "terminal", call(6), rid(6))
            events += [
                a,
                UserRejectObservation(
                    tool_name="terminal",
                    tool_call_id=call(6),
                    action_id=a.id,
                    rejection_reason="User rejected the action.",
                ),
            ]
        if turn % 7 == 0:  # a turn the user cut short
            events.append(oh_sdk.interruption_event(sdk_ns))
            continue
        if turn % 11 == 0:
            events.append(
                AgentErrorEvent(tool_name="terminal", tool_call_id=call(7), error="Tool timed out.")
            )
        events.append(
            say(
                f"Fixed: module_{turn % 17}.py returned 4 instead of 3; the tests pass now.",
                rid(8),
                reasoning="Done; summarise.",
            )
        )
    return events[:n]


def _agent_env(base_url: str, home: Path) -> dict[str, str]:
    from .agent_common import agent_env

    env = agent_env(base_url, str(home))
    env["TRIO_ACP_DEFAULT_MODE"] = "always-approve"
    return env


class RawClient:
    """JSON lines on the client end of an in-memory connection; counts bytes received.

    Each chunk read is split into lines once: splitting the whole buffer for every line
    copied it again and again (quadratic in the lines a chunk holds), which made this
    client slower than the agent it measures; the agent's writes then waited on a full
    pipe, and its figures were the client's."""

    def __init__(self, stream) -> None:
        self.stream, self.buffer, self.received = stream, b"", 0
        self.lines: collections.deque[bytes] = collections.deque()

    async def send(self, frame: dict) -> None:
        await self.stream.send_all(json.dumps(frame).encode() + b"\n")

    async def receive(self) -> dict:
        while not self.lines:
            data = await self.stream.receive_some()
            if not data:
                raise EOFError("the agent closed its output")
            self.received += len(data)
            *complete, self.buffer = (self.buffer + data).split(b"\n")
            self.lines.extend(complete)
        return json.loads(self.lines.popleft())


_LOADER: Any = None


@contextlib.asynccontextmanager
async def agent(env: dict[str, str]):
    """The agent on an in-memory connection, initialized, the SDK imported (a launch's
    import is not what this measures: see `python -m bench agent --only startup`)."""
    from trio_acp.connection import open_agent_connection
    from trio_acp.openhands.agent import open_openhands_agent
    from trio_acp.openhands.sdk import SdkLoader

    global _LOADER
    if _LOADER is None:
        _LOADER = SdkLoader()
    await _LOADER.get()
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = RawClient(client_stream)
    async with open_openhands_agent(env=env, sdk_loader=_LOADER) as oh_agent:
        async with open_agent_connection(agent_stream, oh_agent):
            await raw.send(
                {
                    "jsonrpc": "2.0",
                    "id": "init",
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                }
            )
            while (await raw.receive()).get("id") != "init":
                pass
            yield raw
            # Let the sessions' warm-up (which starts after a load's response) finish
            # here: an abandoned one would go on importing in the background, during the
            # next run's load.
            with trio.move_on_after(120):
                for session in list(oh_agent._sessions.values()):
                    await session.warmed.wait()
            await client_stream.aclose()


async def _new_session(env: dict[str, str], cwd: str) -> str:
    async with agent(env) as raw:
        await raw.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/new",
                "params": {"cwd": cwd, "mcpServers": []},
            }
        )
        while True:
            frame = await raw.receive()
            if frame.get("id") == 1:
                return frame["result"]["sessionId"]


def append_events(conv_dir: Path, events: list[Any]) -> None:
    """Append through the SDK's own EventLog: its file names, its JSON, its lock.

    As `ConversationState.append_event` does, each event is stamped with its parent (the
    head before it) and `base_state.json`'s head (`leaf_event_id`) ends on the last one:
    the SDK then opens the whole history as the active branch, as it would a conversation
    it wrote itself (without the head, it would open only the session's first event and
    a next prompt would start a branch of its own).
    """
    from openhands.sdk.conversation.event_store import EventLog
    from openhands.sdk.io import LocalFileStore

    log = EventLog(LocalFileStore(str(conv_dir)), "events")
    log._length = log._scan_and_build_index()  # as ConversationState does when it resumes
    base_path = conv_dir / "base_state.json"
    base = json.loads(base_path.read_text())
    leaf = base.get("leaf_event_id") or (log.get_id(len(log) - 1) if len(log) else None)
    for event in events:
        if leaf is not None and event.parent_id is None:
            event = event.model_copy(update={"parent_id": leaf})
        log.append(event)
        leaf = event.id
    base["leaf_event_id"] = leaf
    base["head_is_empty"] = False
    base_path.write_text(json.dumps(base))


def make_sessions(home: Path, seed_dir: Path, count: int, cwd: str) -> None:
    """`count` copies of the seed conversation, each under its own id with its own index."""
    root = home / "conversations"
    base = json.loads((seed_dir / "base_state.json").read_text())
    for i in range(count):
        sid = uuid.uuid4()
        target = root / sid.hex
        shutil.copytree(seed_dir, target)
        base["id"] = str(sid)
        (target / "base_state.json").write_text(json.dumps(base))
        index = json.loads((target / "trio_acp_session.json").read_text())
        index.update(
            title=f"Session {i}: fix the failing test",
            updatedAt=f"2026-{1 + i % 12:02}-{1 + i % 28:02}T10:{i % 60:02}:00Z",
        )
        (target / "trio_acp_session.json").write_text(json.dumps(index))


# --------------------------------------------------------------------------- measuring


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class _GcClock:
    """Time the garbage collector spends in its collections (every thread), and how many."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start
            self.full += info["generation"] == 2

    def start(self) -> None:
        gc.callbacks.append(self)

    def stop(self) -> None:
        gc.callbacks.remove(self)


async def timed_load(raw: Any, sid: str, cwd: str) -> tuple[float, float | None, int, int, dict]:
    """`session/load` of `sid` on `raw`: seconds to the response, to the session's first
    update, the updates, the bytes received, and the response frame."""
    start = time.perf_counter()
    await raw.send(
        {
            "jsonrpc": "2.0",
            "id": "load",
            "method": "session/load",
            "params": {"sessionId": sid, "cwd": cwd, "mcpServers": []},
        }
    )
    first = None
    updates = 0
    received_before = raw.received
    while True:
        frame = await raw.receive()
        if frame.get("method") == "session/update":
            if frame["params"].get("sessionId") != sid:
                continue  # a late update of the session opened before
            updates += 1
            if first is None:
                first = time.perf_counter() - start
        elif frame.get("id") == "load":
            break
    return time.perf_counter() - start, first, updates, raw.received - received_before, frame


async def measure_load(env: dict[str, str], sid: str, cwd: str) -> dict[str, Any]:
    async with agent(env) as raw:
        rss_before = _maxrss_mb()
        gc_clock = _GcClock()
        gc_clock.start()
        cpu_before = time.process_time()
        seconds, first, updates, size, frame = await timed_load(raw, sid, cwd)
        cpu = time.process_time() - cpu_before
        gc_clock.stop()
        return {
            "seconds": seconds,
            "cpu_s": cpu,
            "gc_s": gc_clock.seconds,
            "gc_full": gc_clock.full,
            "first_update_s": first,
            "updates": updates,
            "bytes": size,
            "rss_growth_mb": _maxrss_mb() - rss_before,
            "error": frame.get("error"),
        }


async def measure_load_process(
    env: dict[str, str], sid: str, cwd: str, profile: str | None = None
) -> dict[str, Any]:
    """`session/load` of a real `python -m trio_acp` process, read by this process: what a
    client sees (the agent's CPU is its own; this client's decoding is not in it). The
    process first opens a new session, so the SDK import and the tools' first use are done.
    With `profile`, the agent runs under bench/agent_profiled.py and the load's profile is
    written there."""
    import psutil

    from .agent_common import (
        agent_command,
        profile_phase_start,
        profile_phase_stop,
        profiled_env,
    )

    prefix = None
    if profile is not None:
        prefix = profile + ".part"
        env = profiled_env(env, prefix)
    process = await trio.lowlevel.open_process(
        agent_command(profiled=profile is not None),
        stdin=-1,
        stdout=-1,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    raw = RawClient(trio.StapledStream(process.stdin, process.stdout))
    ids = iter(range(1, 1_000_000))

    async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = next(ids)
        await raw.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            frame = await raw.receive()
            if frame.get("id") == rid:
                return frame

    try:
        await call("initialize", {"protocolVersion": 1})
        await call("session/new", {"cwd": cwd, "mcpServers": []})
        ps = psutil.Process(process.pid)
        # The new session warms up after its response (imports, tools): wait for it to end.
        with trio.move_on_after(60):
            idle = 0
            while idle < 2:
                before = sum(ps.cpu_times()[:2])
                await trio.sleep(0.25)
                idle = idle + 1 if sum(ps.cpu_times()[:2]) - before < 0.01 else 0
        cpu = ps.cpu_times()
        cpu_before = cpu.user + cpu.system
        rss_before = ps.memory_info().rss
        await profile_phase_start(process.pid if profile else None)
        seconds, first, updates, size, frame = await timed_load(raw, sid, cwd)
        cpu = ps.cpu_times()
        if profile is not None:
            await profile_phase_stop(process.pid, prefix, 1, profile)
        return {
            "seconds": seconds,
            "cpu_s": cpu.user + cpu.system - cpu_before,
            "gc_s": 0.0,
            "gc_full": 0,
            "first_update_s": first,
            "updates": updates,
            "bytes": size,
            "rss_growth_mb": (ps.memory_info().rss - rss_before) / 2**20,
            "error": frame.get("error"),
        }
    finally:
        await process.stdin.aclose()
        with trio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def measure_list(env: dict[str, str], cwd: str, runs: int) -> dict[str, Any]:
    async with agent(env) as raw:
        request_id = 0

        async def call(params: dict) -> dict:
            nonlocal request_id
            request_id += 1
            await raw.send(
                {"jsonrpc": "2.0", "id": request_id, "method": "session/list", "params": params}
            )
            while True:
                frame = await raw.receive()
                if frame.get("id") == request_id:
                    return frame

        from trio_acp.openhands.sessions import list_cache, store

        first_page: list[float] = []
        walks: list[float] = []
        total = 0
        cache = Path(env["OPENHANDS_PERSISTENCE_DIR"]) / "conversations" / store.LIST_CACHE_FILE
        # Run 0: the first list ever (no cache file, nothing parsed in this process); run 1:
        # a new process's first list (what run 0 saved, nothing parsed in this process: the
        # parsed entries forgotten as a new process starts without them); then warm ones.
        for run in range(runs + 1):
            if run == 0:
                cache.unlink(missing_ok=True)
            if run <= 1:
                list_cache.LISTINGS.clear()
            start = time.perf_counter()
            page = await call({"cwd": cwd})
            first_page.append(time.perf_counter() - start)
            total = len(page["result"]["sessions"])
            cursor = page["result"].get("nextCursor")
            while cursor:
                page = await call({"cwd": cwd, "cursor": cursor})
                total += len(page["result"]["sessions"])
                cursor = page["result"].get("nextCursor")
            walks.append(time.perf_counter() - start)
        return {
            "first_page_first_s": first_page[0],
            "first_page_cold_s": first_page[1],
            "first_page_warm_s": statistics.median(first_page[2:] or first_page[1:]),
            "walk_first_s": walks[0],
            "walk_cold_s": walks[1],
            "walk_warm_s": statistics.median(walks[2:] or walks[1:]),
            "listed": total,
        }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench history", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--events", type=int, default=10_000, help="events in the long conversation"
    )
    parser.add_argument("--sessions", type=int, default=1_000, help="sessions to list")
    parser.add_argument(
        "--runs", type=int, default=5, help="list runs after the first ever (the first is cold)"
    )
    parser.add_argument(
        "--loads", type=int, default=1, help="session/load runs, each in a fresh agent"
    )
    parser.add_argument(
        "--launches",
        type=int,
        default=0,
        metavar="N",
        help="also time session/list as a new process's first request: N cold and N warm "
        "launches each with and without the list's cache file (bench/history_launch.py)",
    )
    parser.add_argument(
        "--keep", metavar="DIR", help="build in DIR and keep it (reused if it exists)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON line instead of the table"
    )
    parser.add_argument(
        "--process",
        action="store_true",
        help="load in a real `python -m trio_acp` process (what a client sees) instead of in "
        "this process on an in-memory connection",
    )
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="cProfile the last session/load (every thread, Python >= 3.12) into FILE; with "
        "--process, the agent process's",
    )
    args = parser.parse_args(argv)

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
    from trio_acp.testing import ScriptedLLM

    launched: list[str] = []
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="trio-acp-history-"))
    try:
        with ScriptedLLM() as llm:
            home_load, home_list = work / "load", work / "list"
            cwd = str(work / "ws")
            os.makedirs(cwd, exist_ok=True)
            env_load, env_list = (
                _agent_env(llm.base_url, home_load),
                _agent_env(llm.base_url, home_list),
            )
            meta = work / "meta.json"
            t0 = time.perf_counter()
            if meta.exists():
                sid = json.loads(meta.read_text())["sid"]
            else:
                sid = trio.run(_new_session, env_load, cwd)
                conv = home_load / "conversations" / uuid.UUID(sid).hex
                append_events(conv, history_events(args.events, cwd))
                seed = trio.run(_new_session, env_list, cwd)
                seed_dir = home_list / "conversations" / uuid.UUID(seed).hex
                append_events(seed_dir, history_events(24, cwd))
                with tempfile.TemporaryDirectory() as tmp:
                    seed_copy = Path(tmp) / "seed"
                    shutil.copytree(seed_dir, seed_copy)
                    shutil.rmtree(seed_dir)
                    make_sessions(home_list, seed_copy, args.sessions, cwd)
                meta.write_text(json.dumps({"sid": sid}))
            built = time.perf_counter() - t0
            if args.process:
                loads = [
                    trio.run(measure_load_process, env_load, sid, cwd)
                    for _ in range(args.loads - 1)
                ]
                loads.append(trio.run(measure_load_process, env_load, sid, cwd, args.profile))
            else:
                loads = [trio.run(measure_load, env_load, sid, cwd) for _ in range(args.loads - 1)]
                loads.append(profiled(args.profile, measure_load, env_load, sid, cwd))
            listing = trio.run(measure_list, env_list, cwd, args.runs)
            if args.launches > 0:
                from .history_launch import measure_launches

                launched = measure_launches(env_list, cwd, args.launches)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    load = min(loads, key=lambda r: r["seconds"])
    result = {
        "events": args.events,
        "sessions": args.sessions,
        "build_s": built,
        "load": load,
        "load_runs_s": [r["seconds"] for r in loads],
        "list": listing,
        "launches": launched,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"history: python {platform_line()}")
    print(f"built {args.events:,} events + {args.sessions:,} sessions in {built:.1f} s")
    ok = load["seconds"] <= GOAL_LOAD_S and not load["error"]
    print(
        f"session/load {args.events:,} events: {load['seconds'] * 1000:,.0f} ms "
        f"(runs {', '.join(f'{s * 1000:,.0f}' for s in result['load_runs_s'])} ms; "
        f"first update after {(load['first_update_s'] or 0) * 1000:,.0f} ms), "
        f"{load['updates']:,} updates, {load['bytes'] / 1e6:.1f} MB, {'RSS' if args.process else 'peak RSS'} +{load['rss_growth_mb']:.0f} MB, "
        + (
            f"agent process's CPU {load['cpu_s']:.2f} s (every run's: "
            f"{', '.join(f'{r["cpu_s"]:.2f}' for r in loads)} s)"
            if args.process
            else f"CPU {load['cpu_s']:.2f} s (garbage collector {load['gc_s']:.2f} s, "
            f"{load['gc_full']} full collections; every run's CPU: "
            f"{', '.join(f'{r["cpu_s"]:.2f}/{r["gc_s"]:.2f}' for r in loads)} s, total/collector)"
        )
        + f"{'' if not load['error'] else ' ERROR ' + str(load['error'])}  "
        + f"[goal ≤ {GOAL_LOAD_S:.0f} s: {'met' if ok else 'MISSED'}]"
    )
    ok = (
        max(listing["first_page_cold_s"], listing["first_page_warm_s"], listing["walk_warm_s"])
        <= GOAL_LIST_S
    )
    ms = {k: f"{v * 1000:,.0f} ms" for k, v in listing.items() if k.endswith("_s")}
    print(
        f"session/list {listing['listed']:,} sessions: first page {ms['first_page_first_s']} "
        f"first ever, {ms['first_page_cold_s']} cold, {ms['first_page_warm_s']} warm; full walk "
        f"{ms['walk_first_s']} first ever, {ms['walk_cold_s']} cold, {ms['walk_warm_s']} warm  "
        f"[goal ≤ {GOAL_LIST_S * 1000:.0f} ms cold and warm: {'met' if ok else 'MISSED'}]"
    )
    if args.launches > 0:
        print(f"session/list as a new process's first request ({args.launches} launches each):")
        print("\n".join(launched))


def profiled(out: str | None, fn: Any, *args: Any) -> Any:
    """`trio.run(fn, *args)`, under cProfile into `out` if given (e.g. `python -m pstats`)."""
    if out is None:
        return trio.run(fn, *args)
    import cProfile

    profile = cProfile.Profile()

    async def run() -> Any:
        # The whole run: with --loads 1 that includes the process's SDK import and the
        # warm-up's imports; with 2 or more, the earlier runs have done them.
        profile.enable()
        try:
            return await fn(*args)
        finally:
            profile.disable()

    result = trio.run(run)
    profile.dump_stats(out)
    return result


def platform_line() -> str:
    import platform

    return f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs"


if __name__ == "__main__":
    main(sys.argv[1:])
