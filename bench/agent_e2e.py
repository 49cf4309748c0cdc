"""Benchmark driver: the OpenHands agent (`python -m trio_acp`) end to end, over stdio.

    python -m bench.agent_e2e --llm BASE_URL [--phases startup,stream,cancel] [options]

Normally run by `python -m bench agent` (bench/agent_main.py), which hosts the scripted
model and prints the figures; this prints one JSON line. Phases:

startup  `--spawns` agents are spawned one after the other; each is timed from spawn to its
         `initialize` response. The last one goes on: spawn → first `session/new` response
         (cold: it waits for the SDK import started at launch), then `--warm` more
         `session/new`s in the same process (warm).
stream   in that same process, a fresh session and one warm-up turn; a 100-token first
         prompt in one more session (what starting a session's tools costs); then
         `--stream-runs` `long` turns of `--tokens` tokens (4-character chunks, one token
         per chunk) in the warm-up's session: every agent_message_chunk is counted and
         concatenated, and the text must equal what the scenario sent (`long_text`).
first    right after the cold `session/new`, in that same process: first-token latency (prompt
         sent → first agent_message_chunk) of the first and the second prompt of three
         sessions: the process's first session and a second one, each prompted after a
         `--first-pause` (the user typing), and a third prompted at once.
cancel   in that same process, one more session and `--cancels` turns, each cancelled
         mid-LLM-stream (`slow`) or mid-tool (`sleep`), alternately: the time from sending
         `session/cancel` to the `{"stopReason": "cancelled"}` response, plus checks
         (no `sleep` process left, no update after a response, a working follow-up turn).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import trio

from trio_acp import schema
from trio_acp.process import spawn_agent
from trio_acp.testing import scenario_prompt
from trio_acp.testing.scenarios import long_text

from ._common import OUR_ECHO_AGENT as ECHO_AGENT
from ._common import emit, process_cpu_seconds
from .agent_common import (
    agent_command,
    agent_env,
    latency_summary,
    median,
    profile_phase_start,
    profile_phase_stop,
    profiled_env,
    schedstat_delta,
    tail,
    thread_schedstats,
)

TURN_TIMEOUT = 120.0


class RecordingClient:
    """Counts and timestamps the session updates of the current turn."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.chunks = 0
        self.parts: list[str] = []
        self.first_chunk: float | None = None
        self.last_chunk: float | None = None
        self.updates: dict[str, int] = {}
        self.total_updates = 0
        self.first_update = trio.Event()
        self.tool_running = trio.Event()
        self.responded = False
        self.late_updates = 0  # updates that arrived after the turn's response

    async def session_update(self, params: schema.SessionNotification) -> None:
        update = params.update
        name = type(update).__name__
        self.updates[name] = self.updates.get(name, 0) + 1
        self.total_updates += 1
        if self.responded:
            self.late_updates += 1
        if isinstance(update, schema.AgentMessageChunk):
            now = time.monotonic()
            if self.first_chunk is None:
                self.first_chunk = now
            self.last_chunk = now
            self.chunks += 1
            self.parts.append(getattr(update.content, "text", ""))
        elif isinstance(update, (schema.ToolCallStart, schema.ToolCallProgress)):
            if update.status == "in_progress":
                self.tool_running.set()
        self.first_update.set()

    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        option = next((o for o in params.options if o.kind == "allow_once"), params.options[0])
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id=option.option_id)
        )


def live_children(pid: int, name: str | None = None) -> list[psutil.Process]:
    """Descendants of `pid` that are still running (zombies excluded), optionally by name."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    out = []
    for child in children:
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            if name is None or child.name() == name:
                out.append(child)
        except psutil.Error:
            continue
    return out


async def prompt_text(agent: Any, session_id: str, text: str) -> schema.PromptResponse:
    with trio.fail_after(TURN_TIMEOUT):
        return await agent.prompt(session_id=session_id, prompt=[schema.TextContent(text=text)])


# --- phases -------------------------------------------------------------------------------


async def stream_turn(
    agent: Any, client: RecordingClient, agent_pid: int, session_id: str, tokens: int
) -> dict[str, Any]:
    """One `long` turn of `tokens` tokens, timed; every character checked.

    Timestamps are time.monotonic() (CLOCK_MONOTONIC, shared by every process on Linux), so
    that `python -m bench agent` can line them up with the scripted server's own records."""
    client.reset()
    expected = long_text(tokens)
    cpu0 = (time.process_time(), process_cpu_seconds(agent_pid))
    sched0 = thread_schedstats(agent_pid)
    t0 = time.monotonic()
    response = await prompt_text(agent, session_id, scenario_prompt("long", tokens=tokens))
    t1 = time.monotonic()
    sched1 = thread_schedstats(agent_pid)
    cpu1 = (time.process_time(), process_cpu_seconds(agent_pid))
    text = "".join(client.parts)
    sizes = [len(p) for p in client.parts]
    return {
        "tokens": tokens,
        "stop_reason": response.stop_reason,
        "t_prompt": t0,
        "t_first_chunk": client.first_chunk,
        "t_last_chunk": client.last_chunk,
        "t_response": t1,
        "wall_s": t1 - t0,
        "first_chunk_s": None if client.first_chunk is None else client.first_chunk - t0,
        "stream_s": None if client.first_chunk is None else client.last_chunk - client.first_chunk,
        "chunk_updates": client.chunks,
        "text_chars": len(text),
        "expected_chars": len(expected),
        "text_ok": text == expected,
        "first_mismatch": _first_mismatch(text, expected),
        "largest_update_chars": max(sizes, default=0),
        "last_update_chars": sizes[-1] if sizes else 0,
        "updates": dict(client.updates),
        "client_cpu_s": cpu1[0] - cpu0[0],
        "agent_cpu_s": None if cpu0[1] is None or cpu1[1] is None else cpu1[1] - cpu0[1],
        "agent_threads": schedstat_delta(agent_pid, sched0, sched1, t1 - t0),
    }


async def stream_phase(
    agent: Any, client: RecordingClient, agent_pid: int, cwd: str, args
) -> dict[str, Any]:
    session_id = (await agent.new_session(cwd=cwd, mcp_servers=[])).session_id
    # Warm-up, in the same session: a prompt sent right after session/new waits for the
    # session's tools to start (the terminal's shell), and, if it is the process's first,
    # for the rest of the warm-up after session/new (the model call path).
    warmup = await stream_turn(agent, client, agent_pid, session_id, args.warmup_tokens)
    # A new session's first prompt, in a warm process: what a session's tool start costs.
    other = (await agent.new_session(cwd=cwd, mcp_servers=[])).session_id
    first_prompt = await stream_turn(agent, client, agent_pid, other, 100)
    runs = []
    await profile_phase_start(args.profile_pid)
    for _ in range(args.stream_runs):
        runs.append(await stream_turn(agent, client, agent_pid, session_id, args.tokens))
    await profile_phase_stop(args.profile_pid, args.profile, 1, f"{args.profile}.stream")
    return {"warmup": warmup, "first_prompt": first_prompt, "runs": runs}


async def first_token_phase(
    agent: Any, client: RecordingClient, first_session: str, cwd: str, args
) -> dict[str, Any]:
    """Prompt → first token of a session's first and second prompt (`echo`: an instant model).

    The process's first session is `first_session` (made by the cold session/new)."""
    plan = [
        ("the process's first session", first_session, args.first_pause),
        ("a second session", None, args.first_pause),
        ("a third session, prompted at once", None, 0.0),
    ]
    sessions = []
    for label, session_id, pause in plan:
        if session_id is None:
            session_id = (await agent.new_session(cwd=cwd, mcp_servers=[])).session_id
        await trio.sleep(pause)
        prompts = []
        for i in range(2):
            client.reset()
            t0 = time.monotonic()
            response = await prompt_text(
                agent, session_id, scenario_prompt("echo", f"prompt {i + 1}")
            )
            prompts.append(
                {
                    "t_prompt": t0,
                    "first_chunk_s": None
                    if client.first_chunk is None
                    else client.first_chunk - t0,
                    "wall_s": time.monotonic() - t0,
                    "stop_reason": response.stop_reason,
                }
            )
        sessions.append({"label": label, "pause_s": pause, "prompts": prompts})
    return {"pause_s": args.first_pause, "sessions": sessions}


def _first_mismatch(text: str, expected: str) -> int | None:
    if text == expected:
        return None
    for i, (a, b) in enumerate(zip(text, expected, strict=False)):
        if a != b:
            return i
    return min(len(text), len(expected))


async def cancel_phase(
    agent: Any, client: RecordingClient, agent_pid: int, cwd: str, args
) -> dict[str, Any]:
    session_id = (await agent.new_session(cwd=cwd, mcp_servers=[])).session_id
    samples: list[dict[str, Any]] = []
    errors: list[str] = []
    await profile_phase_start(args.profile_pid)
    for i in range(args.cancels):
        kind = "stream" if i % 2 == 0 else "tool"
        if kind == "stream":
            # 1,000 × 20 ms: still streaming for 20 s, long after the cancel.
            text = scenario_prompt("slow", chunks=1000, delay_ms=20)
        else:
            text = scenario_prompt("sleep", seconds=30)
        client.reset()
        result: dict[str, Any] = {}

        async def run_turn() -> None:
            try:
                response = await prompt_text(agent, session_id, text)
                result["stop_reason"] = response.stop_reason
            except Exception as exc:  # recorded, the bench goes on
                result["error"] = f"{type(exc).__name__}: {exc}"
            result["t_response"] = time.perf_counter()
            client.responded = True

        t_prompt = time.perf_counter()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_turn)
            trigger = "first update"
            with trio.move_on_after(30) as wait_scope:
                await client.first_update.wait()
                if kind == "tool":
                    # Mid-tool means the `sleep` really runs: wait for its process.
                    trigger = "sleep running"
                    while not live_children(agent_pid, "sleep"):
                        await trio.sleep(0.005)
            if wait_scope.cancelled_caught:
                errors.append(f"cancel {i} ({kind}): the trigger ({trigger}) never came")
            t_trigger = time.perf_counter()
            updates_before_cancel = client.total_updates
            t_cancel = time.perf_counter()
            await agent.cancel(session_id=session_id)
        # The turn task has finished: the response is in.
        if "error" in result:
            errors.append(f"cancel {i} ({kind}): {result['error']}")
            continue
        latency = result["t_response"] - t_cancel
        survivors = [p.pid for p in live_children(agent_pid, "sleep")]
        survived_1s = []
        if survivors:
            await trio.sleep(1.0)
            survived_1s = [p.pid for p in live_children(agent_pid, "sleep")]
        await trio.sleep(0.02)  # room for a (wrong) late update to arrive
        samples.append(
            {
                "kind": kind,
                "latency_s": latency,
                "stop_reason": result.get("stop_reason"),
                "trigger_s": t_trigger - t_prompt,
                "updates_before_cancel": updates_before_cancel,
                "sleep_survivors": len(survivors),
                "sleep_survivors_after_1s": len(survived_1s),
                "late_updates": client.late_updates,
            }
        )
        if result.get("stop_reason") != "cancelled":
            errors.append(f"cancel {i} ({kind}): stop reason {result.get('stop_reason')!r}")
    stream_dumps = 1 if "stream" in args.phases.split(",") else 0
    await profile_phase_stop(
        args.profile_pid, args.profile, stream_dumps + 1, f"{args.profile}.cancel"
    )
    for p in live_children(agent_pid, "sleep"):
        errors.append(f"a sleep process survived the cancels: pid {p.pid}")

    # The session must still work, history intact.
    client.reset()
    t0 = time.perf_counter()
    follow_up: dict[str, Any]
    try:
        response = await prompt_text(
            agent, session_id, scenario_prompt("echo", "are you still there?")
        )
        reply = "".join(client.parts)
        follow_up = {
            "stop_reason": response.stop_reason,
            "seconds": time.perf_counter() - t0,
            "reply": reply[:120],
            "ok": response.stop_reason == "end_turn" and reply.startswith("Echo:"),
        }
    except Exception as exc:
        follow_up = {"error": f"{type(exc).__name__}: {exc}", "ok": False}

    def summary(kind: str | None) -> dict[str, Any]:
        chosen = [s for s in samples if kind is None or s["kind"] == kind]
        out = latency_summary([s["latency_s"] for s in chosen])
        out["cancelled"] = sum(s["stop_reason"] == "cancelled" for s in chosen)
        out["trigger_median_s"] = median([s["trigger_s"] for s in chosen])
        return out

    return {
        "all": summary(None),
        "stream": summary("stream"),
        "tool": summary("tool"),
        "sleep_survivors": sum(s["sleep_survivors"] for s in samples),
        "sleep_survivors_after_1s": sum(s["sleep_survivors_after_1s"] for s in samples),
        "late_updates": sum(s["late_updates"] for s in samples),
        "follow_up": follow_up,
        "errors": errors,
        "samples": samples,
    }


# --- driver -------------------------------------------------------------------------------


async def drive(args: argparse.Namespace) -> dict[str, Any]:
    phases = set(args.phases.split(","))
    home = tempfile.mkdtemp(prefix="trio-acp-bench-home-")
    cwd = tempfile.mkdtemp(prefix="trio-acp-bench-cwd-")
    env = agent_env(args.llm, home)
    result: dict[str, Any] = {"phases": sorted(phases)}
    needs_session = bool(phases & {"first", "stream", "cancel"})
    spawns = args.spawns if "startup" in phases else 1
    init_s: list[float] = []
    exit_s: list[float] = []
    echo_init_s: list[float] = []
    new_s: list[float] = []
    args.profile_pid = None
    for i in range(spawns):
        last = i == spawns - 1
        if "startup" in phases:
            # The project's echo agent, spawned the same way right before each of ours:
            # `initialize` against the floor of this protocol stack (issue 27, item 4).
            echo_init_s.append(await echo_initialize(cwd))
        log_path = Path(home) / f"agent-{i}.log"
        profiled = bool(last and args.profile)
        client = RecordingClient()
        with open(log_path, "wb") as log:
            t_spawn = time.perf_counter()
            try:
                async with spawn_agent(
                    agent_command(profiled),
                    client,
                    cwd=cwd,
                    stderr=log,
                    env=profiled_env(env, args.profile) if profiled else env,
                ) as proc:
                    agent = proc.agent
                    args.profile_pid = proc.process.pid if profiled else None
                    with trio.fail_after(60):
                        await agent.initialize(protocol_version=1)
                    init_s.append(time.perf_counter() - t_spawn)
                    if not last and "startup" in phases:
                        # Answered before the SDK's import is over (deferred_build.py): a
                        # sample on every spawn costs little now.
                        with trio.fail_after(180):
                            await agent.new_session(cwd=cwd, mcp_servers=[])
                        new_s.append(time.perf_counter() - t_spawn)
                    if last and ("startup" in phases or needs_session):
                        with trio.fail_after(180):
                            cold = await agent.new_session(cwd=cwd, mcp_servers=[])
                        result["cold_new_session_s"] = time.perf_counter() - t_spawn
                        new_s.append(result["cold_new_session_s"])
                        if "startup" in phases and "first" not in phases:
                            # What a user who prompts at once waits for: the session's
                            # build (the SDK's import) before the first reply.
                            t0 = time.perf_counter()
                            await prompt_text(agent, cold.session_id, scenario_prompt("echo", "hi"))
                            result["cold_first_prompt_s"] = time.perf_counter() - t_spawn
                            result["cold_first_prompt_wait_s"] = time.perf_counter() - t0
                        if "first" in phases:
                            # Before anything else warms the process: what an editor's user sees.
                            result["first_token"] = await first_token_phase(
                                agent, client, cold.session_id, cwd, args
                            )
                        warm = []
                        for _ in range(args.warm if "startup" in phases else 0):
                            t0 = time.perf_counter()
                            await agent.new_session(cwd=cwd, mcp_servers=[])
                            warm.append(time.perf_counter() - t0)
                        result["warm_new_session_s"] = warm
                        if "stream" in phases:
                            result["stream"] = await stream_phase(
                                agent, client, proc.process.pid, cwd, args
                            )
                        if "cancel" in phases:
                            result["cancel"] = await cancel_phase(
                                agent, client, proc.process.pid, cwd, args
                            )
                    t_close = time.perf_counter()
                exit_s.append(time.perf_counter() - t_close)
            except BaseException:
                sys.stderr.write(f"agent {i} failed; its log ends with:\n{tail(log_path)}\n")
                raise
    result["initialize_s"] = init_s
    result["exit_s"] = exit_s
    result["echo_initialize_s"] = echo_init_s
    result["cold_new_session_all_s"] = new_s
    return result


async def echo_initialize(cwd: str) -> float:
    """Spawn → `initialize` response of examples/echo_agent.py, spawned as ours is."""
    t_spawn = time.perf_counter()
    async with spawn_agent([sys.executable, str(ECHO_AGENT)], RecordingClient(), cwd=cwd) as proc:
        with trio.fail_after(60):
            await proc.agent.initialize(protocol_version=1)
        return time.perf_counter() - t_spawn


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--llm", required=True, help="base URL of the scripted model")
    parser.add_argument("--phases", default="startup,stream,cancel")
    parser.add_argument("--spawns", type=int, default=7)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--warmup-tokens", type=int, default=500)
    parser.add_argument("--stream-runs", type=int, default=3)
    parser.add_argument("--cancels", type=int, default=50)
    parser.add_argument(
        "--first-pause",
        type=float,
        default=3.0,
        help="seconds between session/new and the first prompt in the first phase (3)",
    )
    parser.add_argument(
        "--profile",
        metavar="PREFIX",
        help="run the last agent under cProfile (bench/agent_profiled.py), profiling the "
        "timed streaming turns into PREFIX.stream and the cancels into PREFIX.cancel",
    )
    args = parser.parse_args()
    result = trio.run(drive, args)
    emit(_finite(result))


def _finite(value: Any) -> Any:
    """JSON has no NaN: make them None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


if __name__ == "__main__":
    main()
