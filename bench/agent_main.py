"""`python -m bench agent`: the OpenHands agent (`python -m trio_acp`) over real stdio.

The scripted OpenAI-compatible model (trio_acp.testing.ScriptedLLM) runs in this process,
which otherwise only waits; each measurement runs in a driver subprocess of its own, which
spawns the agent as a further subprocess where it needs one:

    bridge    bench/agent_inproc.py  ThreadBridge / the session pump in process (no SDK)
    litellm   bench/agent_litellm.py litellm and the SDK's LLM streaming the same reply alone
    startup   bench/agent_e2e.py     spawn → initialize (× --spawns), cold and warm session/new
    first     bench/agent_e2e.py     first token of a session's first and second prompt
    stream    bench/agent_e2e.py     a 20,000-token streamed reply, every character checked
    cancel    bench/agent_e2e.py     --cancels cancels mid-LLM-stream and mid-tool

startup, first, stream and cancel share one agent process (the last spawn), each in sessions of
its own. Figures are printed with their goals; nothing is asserted. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ._common import ROOT

PY = sys.executable
SECTIONS = ("bridge", "litellm", "startup", "first", "stream", "cancel")

GOAL_INIT_S = 0.5
GOAL_WARM_NEW_S = 0.100
GOAL_BRIDGE_PER_S = 20_000
GOAL_CANCEL_P99_MS = 200.0


def _run(command: list[str], timeout: float) -> dict[str, Any]:
    try:
        proc = subprocess.run(command, cwd=ROOT, stdout=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit status {proc.returncode}; output {proc.stdout[-300:]!r}"}
    return json.loads(lines[-1])


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:,.0f} ms"


def _goal(met: bool | None) -> str:
    return "" if met is None else ("goal met" if met else "GOAL MISSED")


def _ok(flag: bool | None) -> str:
    return "yes" if flag else "NO"


def print_bridge(r: dict[str, Any]) -> None:
    print(
        "\nbridge, in process (no SDK): ThreadBridge.post() from a plain thread → receive_batch() in Trio"
    )
    if "error" in r:
        print(f"  ERROR: {r['error']}")
        return
    b, u = r["burst"], r["pump"]
    print(
        f"  post() cost, burst of {b['items']:,}:           {b['post_cpu_us']:.2f} µs CPU/item "
        f"({b['post_wall_us']:.2f} µs wall; a wake-up is already pending)"
    )
    for p in (r["paced"], r["paced_spin"]):
        print(
            f"  post() cost, {p['items']:,} posts {p['gap_us']:.0f} µs apart, producer {p['producer']:<6}: "
            f"CPU mean {p['post_cpu_mean_us']:4.1f} µs (p50 {p['post_cpu_p50_us']:4.1f}); wall mean "
            f"{p['post_mean_us']:4.1f} µs (p50 {p['post_p50_us']:4.1f}, p99 {p['post_p99_us']:5.1f}); "
            f"{p['batches']:,} wake-ups"
        )
    print(
        "    (the SDK thread's per-token cost; wall includes the woken Trio thread taking the GIL first)"
    )
    print(
        f"  drain through receive_batch():           {b['drain_per_s']:,.0f} items/s "
        f"in {b['batches']} batches, order kept: {_ok(b['in_order'])}   "
        f"goal ≥ {GOAL_BRIDGE_PER_S:,}/s: {_goal(b['drain_per_s'] >= GOAL_BRIDGE_PER_S)}"
    )
    print(
        f"  session pump (bridge → Translator.token → coalesce → client), {u['tokens']:,} token chunks: "
        f"{u['tokens_per_s']:,.0f} tokens/s, {u['trio_cpu_us']:.1f} µs CPU/token on the Trio side, "
        f"{u['updates']:,} updates, text intact: {_ok(u['text_ok'])}"
    )


def print_litellm(r: dict[str, Any]) -> None:
    print("\nlitellm alone: the same reply from the same scripted server, plain asyncio, no agent")
    if "error" in r:
        print(f"  ERROR: {r['error']}")
        return
    for key, label in (
        ("litellm", "litellm.acompletion(stream=True)"),
        ("sdk", "openhands LLM.acompletion(on_token=no-op)"),
        ("fast", "the same, fast path (SessionLLM)"),
    ):
        if key not in r:
            continue
        x = r[key]
        print(
            f"  {label:<42} {x['tokens_per_s']:>7,.0f} tokens/s   {x['wall_us_per_token']:>6,.0f} µs wall/token   "
            f"{x['cpu_us_per_token']:>6,.0f} µs CPU/token   text intact: {_ok(x['text_ok'])}   "
            f"last chunk → end {_ms(x.get('after_last_chunk_s'))}"
        )
        threads = x.get("threads")
        if threads:
            print(
                f"  {'':<42} over {threads['seconds']:.1f} s: CPU {threads['cpu_s']:.1f} s, run-queue wait "
                f"{threads['runqueue_wait_s']:.1f} s; "
                + "; ".join(_thread(t) for t in threads["threads"][:3])
            )


def print_startup(r: dict[str, Any]) -> None:
    print(
        "\nstart-up: spawn `python -m trio_acp` (scripted model configured through LLM_* variables)"
    )
    init = r.get("initialize_s") or []
    if init:
        med = statistics.median(init)
        print(
            f"  spawn → initialize response, median of {len(init)}:  {_ms(med)} "
            f"(min {_ms(min(init))}, max {_ms(max(init))})   goal ≤ {_ms(GOAL_INIT_S)}: "
            f"{_goal(med <= GOAL_INIT_S)}   [OpenHands CLI's ACP agent: ~8 s]"
        )
    echo = r.get("echo_initialize_s") or []
    if init and echo:
        ratio = statistics.median(init) / statistics.median(echo)
        print(
            f"  the echo agent (examples/echo_agent.py), spawn → initialize, median of "
            f"{len(echo)}: {_ms(statistics.median(echo))} (min {_ms(min(echo))}, max "
            f"{_ms(max(echo))})   ours / echo: {ratio:.2f}×   goal ≤ 1.2×: {_goal(ratio <= 1.2)}"
        )
    news = r.get("cold_new_session_all_s") or []
    if news:
        med = statistics.median(news)
        print(
            f"  spawn → first session/new response (cold), median of {len(news)}: {_ms(med)} "
            f"(min {_ms(min(news))}, max {_ms(max(news))})   goal ≤ 2.2 s: {_goal(med <= 2.2)}"
        )
    elif (cold := r.get("cold_new_session_s")) is not None:
        print(f"  spawn → first session/new response (cold): {cold:.1f} s")
    if (first := r.get("cold_first_prompt_s")) is not None:
        print(
            f"  spawn → the first session's first prompt answered (`echo`, sent at once): "
            f"{first:.1f} s (the prompt waited {r['cold_first_prompt_wait_s']:.1f} s: the build)"
        )
    warm = r.get("warm_new_session_s") or []
    if warm:
        med = statistics.median(warm)
        print(
            f"  session/new in the same process (warm), median of {len(warm)}: {_ms(med)} "
            f"(max {_ms(max(warm))})   goal ≤ {_ms(GOAL_WARM_NEW_S)}: {_goal(med <= GOAL_WARM_NEW_S)}"
        )
    exits = r.get("exit_s") or []
    if exits:
        print(
            f"  stdin closed → agent exited, median of {len(exits)}: {_ms(statistics.median(exits))}"
        )


def print_first_token(r: dict[str, Any]) -> None:
    f = r.get("first_token")
    if not f:
        return
    print(
        "\nfirst token: prompt sent → first agent_message_chunk, `echo` (the model answers at once); "
        "LLM request at the server in brackets"
    )
    for session in f["sessions"]:
        cells = []
        for i, p in enumerate(session["prompts"], 1):
            server = p.get("server_request_s")
            cells.append(
                f"prompt {i} {_ms(p['first_chunk_s'])}"
                + ("" if server is None else f" [{_ms(server)}]")
            )
        pause = f"{session['pause_s']:g} s after session/new" if session["pause_s"] else "at once"
        print(f"  {session['label']:<36} ({pause}): " + ", ".join(cells))


def attach_server_times(agent: dict[str, Any], records: list[Any]) -> None:
    """Line the streaming turns up with the scripted server's records (both use CLOCK_MONOTONIC)."""
    for session in (agent.get("first_token") or {}).get("sessions", []):
        for p in session["prompts"]:
            after = [r.started for r in records if r.started >= p["t_prompt"]]
            p["server_request_s"] = min(after) - p["t_prompt"] if after else None
    stream = agent.get("stream")
    if not stream:
        return
    for run in [
        stream["warmup"],
        *([stream["first_prompt"]] if "first_prompt" in stream else []),
        *stream["runs"],
    ]:
        hits = [r for r in records if run["t_prompt"] <= r.started <= run["t_response"]]
        run["llm_requests"] = len(hits)
        if hits:
            run["server_request_s"] = hits[0].started - run["t_prompt"]
            finished = hits[-1].finished
            run["server_done_s"] = None if finished is None else finished - run["t_prompt"]


def _timeline(run: dict[str, Any]) -> str:
    t0 = run["t_prompt"]
    marks = []
    if run.get("server_request_s") is not None:
        marks.append(f"LLM request at the server +{run['server_request_s']:.2f}")
    if run.get("first_chunk_s") is not None:
        marks.append(f"first chunk at the client +{run['first_chunk_s']:.2f}")
    if run.get("server_done_s") is not None:
        marks.append(f"server wrote its last chunk +{run['server_done_s']:.2f}")
    if run.get("t_last_chunk") is not None:
        marks.append(f"last chunk at the client +{run['t_last_chunk'] - t0:.2f}")
    marks.append(f"response +{run['t_response'] - t0:.2f}")
    return ", ".join(marks)


def print_stream(
    r: dict[str, Any], lite: dict[str, Any] | None, bridge: dict[str, Any] | None
) -> None:
    s = r.get("stream")
    if not s:
        return
    w = s["warmup"]
    print(
        f"\nstreaming: a `long` reply of N tokens in 4-character chunks (1 chunk = 1 token), "
        f"prompt → response, after a {w['tokens']:,}-token warm-up turn in the same session "
        f"({w['wall_s']:.1f} s: the session's first prompt, sent right after session/new)"
    )
    print(f"  warm-up timeline (s after the prompt): {_timeline(w)}")
    f = s.get("first_prompt")
    if f:
        print(
            f"  a second session's first prompt ({f['tokens']} tokens), warm process: {_timeline(f)}  "
            f"[before its first LLM call a session starts its tools; the SDK's SubprocessTerminal."
            f"initialize() sleeps 1 s]"
        )
    runs = s["runs"]
    if not runs:
        return
    if len(runs) > 1:
        walls = sorted(run["wall_s"] for run in runs)
        n = runs[0]["tokens"]
        print(
            f"  {len(runs)} timed turns of {n:,} tokens: "
            + ", ".join(f"{x:.1f} s" for x in walls)
            + f" → median {n / statistics.median(walls):,.0f} tokens/s end to end; "
            f"text identical every time: {_ok(all(run['text_ok'] for run in runs))}; the median turn:"
        )
    # The turn with the median wall time (the upper one of an even count).
    for run in [sorted(runs, key=lambda run: run["wall_s"])[len(runs) // 2]]:
        n = run["tokens"]
        rate = n / run["wall_s"]
        print(
            f"  end to end, {n:,} tokens: {run['wall_s']:.1f} s = {rate:,.0f} tokens/s delivered to the client, "
            f"prompt sent → response"
        )
        print(
            f"  timeline (s after the prompt): {_timeline(run)}; LLM requests in the turn: "
            f"{run.get('llm_requests', '—')}"
        )
        print(
            f"  agent_message_chunk updates: {run['chunk_updates']:,} for {n:,} tokens "
            f"({n / max(1, run['chunk_updates']):.2f} tokens/update: coalescing; "
            f"{run['chunk_updates'] / run['wall_s']:,.0f} updates/s), "
            f"{run['text_chars']:,} of {run['expected_chars']:,} characters; "
            f"text identical to the scenario's: {_ok(run['text_ok'])}"
            + ("" if run["text_ok"] else f" (first difference at {run['first_mismatch']})")
        )
        print(
            f"  largest update {run['largest_update_chars']:,} chars, last update {run['last_update_chars']:,} chars; "
            f"all updates: {', '.join(f'{k}×{v:,}' for k, v in sorted(run['updates'].items()))}; "
            f"stop reason {run['stop_reason']}"
        )
        agent_us = None if run["agent_cpu_s"] is None else run["agent_cpu_s"] * 1e6 / n
        print(
            f"  CPU per token: agent process {'—' if agent_us is None else f'{agent_us:,.0f} µs'}, "
            f"client {run['client_cpu_s'] * 1e6 / n:,.0f} µs;  wall per token {run['wall_s'] * 1e6 / n:,.0f} µs"
        )
        threads = run.get("agent_threads")
        if threads:
            print(
                f"  agent threads over the turn's {threads['seconds']:.1f} s: CPU {threads['cpu_s']:.1f} s, "
                f"waiting for a CPU (run queue) {threads['runqueue_wait_s']:.1f} s; per thread (CPU / run-queue "
                f"wait / time slices): "
                + "; ".join(_thread(t, "main (Trio)") for t in threads["threads"][:4])
            )
        main = next((t for t in (threads or {}).get("threads", []) if t["main"]), None)
        ours = []
        if main is not None:
            ours.append(
                f"the Trio thread {main['cpu_s'] * 1e6 / n:,.0f} µs CPU/token (pump: Translator, "
                f"coalesce, JSON, writes)"
            )
        if bridge and "error" not in bridge:
            ours.append(
                f"post() in the SDK thread {bridge['paced_spin']['post_cpu_mean_us']:.0f}–"
                f"{bridge['paced']['post_cpu_mean_us']:.0f} µs CPU/token (bridge bench, paced)"
            )
        if ours:
            print("  ours: " + "; ".join(ours))
        if lite and "error" not in lite and run.get("server_request_s") is not None:
            streaming = run["t_last_chunk"] - run["t_prompt"] - run["server_request_s"]
            rows = [("agent, end to end", streaming, run["t_response"] - run["t_last_chunk"], n)]
            for key, label in (
                ("fast", "SDK LLM, fast path, alone"),
                ("sdk", "SDK LLM + litellm alone"),
                ("litellm", "litellm alone"),
            ):
                x = lite.get(key)
                if x and x.get("streaming_s") is not None:
                    rows.append((label, x["streaming_s"], x["after_last_chunk_s"], x["tokens"]))
            print(
                "  per token while streaming | after the last chunk (rebuilding the response from its "
                "chunks: litellm.stream_chunk_builder, + the SDK's events):"
            )
            for label, stream_s, after_s, tokens in rows:
                print(
                    f"    {label:<26} {stream_s * 1e6 / tokens:>5,.0f} µs/token = {tokens / stream_s:>6,.0f} tokens/s"
                    f"  |  {after_s:5.2f} s = {after_s * 1e6 / tokens:4,.0f} µs/token"
                )


def _thread(t: dict[str, Any], main: str = "main") -> str:
    name = main if t["main"] else f"tid {t['tid']}"
    return f"{name} {t['cpu_s']:.2f} s / {t['runqueue_wait_s']:.2f} s / {t['slices']:,}"


def print_cancel(r: dict[str, Any]) -> None:
    c = r.get("cancel")
    if not c:
        return
    a = c["all"]
    print(
        f"\ncancel: {a.get('n', 0)} cancels in one session of one agent, alternately mid-LLM-stream "
        f"(`slow`: after the first chunk) and mid-tool (`sleep 30`: once the sleep process runs); "
        f'session/cancel sent → {{"stopReason":"cancelled"}} received'
    )
    for key, label in (("all", "all"), ("stream", "mid-LLM-stream"), ("tool", "mid-tool")):
        x = c[key]
        if not x.get("n"):
            continue
        line = (
            f"  {label:<15} n={x['n']:<3} p50 {x['p50_ms']:6.1f} ms   p90 {x['p90_ms']:6.1f} ms   "
            f"p99 {x['p99_ms']:6.1f} ms   max {x['max_ms']:6.1f} ms   cancelled {x['cancelled']}/{x['n']}"
        )
        if key == "all":
            line += f"   goal p99 ≤ {GOAL_CANCEL_P99_MS:.0f} ms: {_goal(x['p99_ms'] <= GOAL_CANCEL_P99_MS)}"
        else:
            line += f"   (prompt → trigger median {_ms(x['trigger_median_s'])})"
        print(line)
    f = c["follow_up"]
    print(
        f"  `sleep` processes alive at the cancelled response: {c['sleep_survivors']} "
        f"(1 s later: {c['sleep_survivors_after_1s']}); updates after a response: {c['late_updates']}; "
        f"follow-up prompt works: {_ok(f.get('ok'))}"
        + (
            f" ({f['stop_reason']}, {f['seconds'] * 1000:.0f} ms: {f['reply'][:60]!r})"
            if "reply" in f
            else f" ({f.get('error')})"
        )
    )
    for error in c["errors"][:10]:
        print(f"  ! {error}")


def _print_profiles(paths: list[Path], top: int) -> None:
    import pstats

    for path in paths:
        if not path.exists():
            print(f"\n(no profile at {path})")
            continue
        print(f"\n===== {path.name} (top {top} by own time)")
        pstats.Stats(str(path)).strip_dirs().sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench agent",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run (default: all of {','.join(SECTIONS)})",
    )
    parser.add_argument(
        "--spawns", type=int, default=7, help="agents spawned for the initialize median (7)"
    )
    parser.add_argument("--warm", type=int, default=5, help="warm session/new requests timed (5)")
    parser.add_argument(
        "--tokens", type=int, default=20_000, help="tokens in the streamed reply (20,000)"
    )
    parser.add_argument("--stream-runs", type=int, default=3, help="timed streaming turns (3)")
    parser.add_argument(
        "--cancels", type=int, default=50, help="cancels, half mid-stream, half mid-tool (50)"
    )
    parser.add_argument(
        "--first-pause",
        type=float,
        default=3.0,
        help="seconds between session/new and the first prompt in `first` (3)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the raw results to FILE")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="afterwards, run litellm alone and the agent (the streaming turn, then "
        "--profile-cancels cancels) once more under cProfile, profiling only those "
        "phases; write the profiles to DIR and print the hot spots",
    )
    parser.add_argument("--profile-top", type=int, default=25, help="rows per profile (25)")
    parser.add_argument(
        "--profile-cancels", type=int, default=10, help="cancels in the profiled run (10)"
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds per driver (600)")
    args = parser.parse_args(argv)
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")

    from trio_acp.testing import ScriptedLLM

    print(
        f"python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    started = time.perf_counter()
    results: dict[str, Any] = {}
    with ScriptedLLM() as llm:
        print(f"scripted model: {llm.base_url} (in this process); agent: {PY} -m trio_acp")

        def step(name: str, command: list[str]) -> dict[str, Any]:
            t0 = time.perf_counter()
            print(f"running {name} …", end="", flush=True)
            result = _run(command, args.timeout)
            print(f" {time.perf_counter() - t0:.1f} s", flush=True)
            return result

        if "bridge" in sections:
            results["bridge"] = step(
                "bridge (in process)",
                [PY, "-m", "bench.agent_inproc", "--tokens", str(args.tokens)],
            )
        if "litellm" in sections:
            results["litellm"] = step(
                "litellm alone",
                [
                    PY,
                    "-m",
                    "bench.agent_litellm",
                    "--llm",
                    llm.base_url,
                    "--tokens",
                    str(args.tokens),
                ],
            )
        phases = [s for s in ("startup", "first", "stream", "cancel") if s in sections]
        if phases:
            results["agent"] = step(
                f"agent ({', '.join(phases)})",
                [
                    PY,
                    "-m",
                    "bench.agent_e2e",
                    "--llm",
                    llm.base_url,
                    "--phases",
                    ",".join(phases),
                    "--spawns",
                    str(args.spawns),
                    "--warm",
                    str(args.warm),
                    "--tokens",
                    str(args.tokens),
                    "--stream-runs",
                    str(args.stream_runs),
                    "--cancels",
                    str(args.cancels),
                    "--first-pause",
                    str(args.first_pause),
                ],
            )

        agent = results.get("agent", {})
        if agent and "error" not in agent:
            attach_server_times(agent, llm.requests)
        if "bridge" in results:
            print_bridge(results["bridge"])
        if "litellm" in results:
            print_litellm(results["litellm"])
        if "error" in agent:
            print(f"\nagent: ERROR: {agent['error']}")
        elif agent:
            if "startup" in phases:
                print_startup(agent)
            print_first_token(agent)
            print_stream(agent, results.get("litellm"), results.get("bridge"))
            print_cancel(agent)
        print(
            f"\ntotal {time.perf_counter() - started:.0f} s; load average now "
            f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")

        if args.profile:
            out = Path(args.profile).resolve()
            out.mkdir(parents=True, exist_ok=True)
            litellm_prof, agent_prefix = out / "litellm-alone.prof", out / "agent"
            step(
                "profiling litellm alone",
                [
                    PY,
                    "-m",
                    "bench.agent_litellm",
                    "--llm",
                    llm.base_url,
                    "--tokens",
                    str(args.tokens),
                    "--skip-sdk",
                    "--profile",
                    str(litellm_prof),
                ],
            )
            step(
                "profiling the agent",
                [
                    PY,
                    "-m",
                    "bench.agent_e2e",
                    "--llm",
                    llm.base_url,
                    "--phases",
                    "stream,cancel",
                    "--tokens",
                    str(args.tokens),
                    "--cancels",
                    str(args.profile_cancels),
                    "--profile",
                    str(agent_prefix),
                ],
            )
            _print_profiles(
                [litellm_prof, Path(f"{agent_prefix}.stream"), Path(f"{agent_prefix}.cancel")],
                args.profile_top,
            )


if __name__ == "__main__":
    main()
