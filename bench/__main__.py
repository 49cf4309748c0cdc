"""`python -m bench`: trio-acp's stack vs the official Python ACP SDK, over real stdio pipes.

Each configuration runs in its own subprocess (a driver: bench/_ours.py on Trio, or
bench/_official.py on asyncio), which launches its agent as a further subprocess:

    ours       our client (trio_acp.process.spawn_agent)  ×  examples/echo_agent.py
    official   acp.spawn_agent_process                    ×  bench/official_echo_agent.py
    cross      the official client × our agent, and our client × the official agent
    memory     our client and our agent in one process (open_in_memory_pair)

Figures (see bench/README.md): the `flood N` turn's notifications per second, from the
prompt sent to its response (median and best of --runs, after a warm-up), the CPU time
per notification in each process, and sequential `_echo/ping` round trips (p50/p99).
Benchmarks print; they assert nothing.

`python -m bench agent [...]` benchmarks the OpenHands agent itself instead (start-up,
streaming, the thread bridge, cancel latency): see bench/agent_main.py and
`python -m bench agent --help`. `python -m bench failures [...]`: how long a failing
model keeps the editor waiting (bench/model_failures.py). `python -m bench remote [...]`: a
local conversation against the same one on an OpenHands agent-server (bench/remote.py);
`python -m bench remote-startup`: a fresh process's first `session/new`, local vs with
`--agent-server` (bench/remote_startup.py); `python -m bench remote-first-cancel`: a session's
first turn cancelled early, local vs through an agent-server (bench/remote_first_cancel.py);
`python -m bench remote-lifecycle`: stdin EOF → exit, and cancel latency, local vs through an
agent-server (bench/remote_lifecycle.py).
`python -m bench warm [...]`: a launch's spawn → `initialize` and → first `session/new`,
cold vs through the warm server (bench/warm_start.py).
`python -m bench concurrency`: 50 sessions prompting at once in one agent process
(bench/concurrency.py). `python -m bench idle-exit`: idle sessions' memory and stdin EOF →
exit, with and without warm start (bench/idle_exit.py). `python -m bench hostile`: a seeded corpus of hostile frames
against one agent process (bench/hostile.py). `python -m bench flood`: a client that
pipelines 200,000 requests and reads no answer (bench/flood.py).
`python -m bench history [...]`: `session/load` of a 10,000-event conversation and
`session/list` over 1,000 sessions (bench/history.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ._common import OFFICIAL_ECHO_AGENT, OUR_ECHO_AGENT, ROOT

PY = sys.executable
# Warm start is on by default: the benchmarks measure the ordinary start, and none may
# leave a detached warm server behind, except those about warm start (warm_start.py,
# history_launch.py), which run their servers in directories of their own and stop them.
os.environ["TRIO_ACP_WARM"] = "0"


def _configs(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    ours_agent = [PY, str(OUR_ECHO_AGENT)]
    official_agent = [PY, str(OFFICIAL_ECHO_AGENT)]
    configs = [
        ("ours", ["bench._ours", "--agent", *ours_agent]),
        ("official", ["bench._official", "--agent", *official_agent]),
    ]
    if not args.no_cross:
        configs += [
            ("official client × our agent", ["bench._official", "--agent", *ours_agent]),
            ("our client × official agent", ["bench._ours", "--agent", *official_agent]),
        ]
    if not args.no_memory:
        configs.append(("ours, in memory", ["bench._ours", "--memory"]))
    return configs


def _run_driver(
    module_and_args: list[str],
    args: argparse.Namespace,
    *,
    profile_dir: Path | None = None,
    label: str = "",
) -> dict[str, Any]:
    module, *rest = module_and_args
    # --agent takes the rest of the command line: the common options go first.
    common = ["--n", str(args.n), "--runs", str(args.runs), "--pings", str(args.pings)]
    if profile_dir is not None:
        slug = "".join(c if c.isalnum() else "_" for c in label)
        if "--agent" in rest:
            i = rest.index("--agent")
            agent_cmd = rest[i + 1 :]
            rest = rest[: i + 1] + [
                agent_cmd[0],
                "-m",
                "cProfile",
                "-o",
                str(profile_dir / f"{slug}.agent.prof"),
                *agent_cmd[1:],
            ]
        command = [
            PY,
            "-m",
            "cProfile",
            "-o",
            str(profile_dir / f"{slug}.client.prof"),
            "-m",
            module,
            *common,
            *rest,
        ]
    else:
        command = [PY, "-m", module, *common, *rest]
    proc = subprocess.run(
        command, cwd=ROOT, stdout=subprocess.PIPE, text=True, timeout=args.timeout
    )
    if proc.returncode != 0:
        return {"error": f"exit status {proc.returncode}"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": f"no result line in {proc.stdout!r:.300}"}
    return json.loads(lines[-1])


def _fmt(value: float | None, spec: str = ",.0f") -> str:
    return "—" if value is None else format(value, spec)


def _print_table(results: list[tuple[str, dict[str, Any]]], args: argparse.Namespace) -> None:
    print()
    print(
        f"flood: one `flood {args.n:,}` turn = {args.n:,} agent_message_chunk notifications, "
        f"prompt sent → response; median (best) of {args.runs} runs after a warm-up"
    )
    print(f"ping:  {args.pings:,} sequential `_echo/ping` extension requests (after 200 warm-up)")
    print()
    header = (
        f"{'configuration':<30} {'notif/s median':>15} {'(best)':>9} {'CPU µs/notif client+agent':>26}"
        f" {'ping p50 µs':>12} {'p99 µs':>8} {'CPU µs/ping':>12}"
    )
    print(header)
    print("-" * len(header))
    for label, r in results:
        if "error" in r:
            print(f"{label:<30} ERROR: {r['error']}")
            continue
        f, p = r["flood"], r["ping"]
        client, agent = f["client_cpu_us"], f["agent_cpu_us"]
        cpu = (
            f"{client:.1f}+{agent:.1f}={client + agent:.1f}"
            if agent is not None
            else f"{client:.1f} (one process)"
        )
        ping_cpu = p["client_cpu_us"] + (p["agent_cpu_us"] or 0.0)
        flag = (
            "" if f["counts_ok"] else "  (COUNT MISMATCH: " + ", ".join(map(str, f["counts"])) + ")"
        )
        print(
            f"{label:<30} {f['median_per_s']:>15,.0f} {f['best_per_s']:>9,.0f} {cpu:>26}"
            f" {p['p50_us']:>12,.0f} {p['p99_us']:>8,.0f} {ping_cpu:>12,.0f}{flag}"
        )
    by_label = dict(results)
    ours, official = by_label.get("ours"), by_label.get("official")
    if ours and official and "error" not in ours and "error" not in official:
        of, ff = ours["flood"], official["flood"]
        print()
        print(
            f"ours / official, notifications per second: median {of['median_per_s'] / ff['median_per_s']:.2f}×, "
            f"best {of['best_per_s'] / ff['best_per_s']:.2f}×"
        )
        if of["agent_cpu_us"] is not None and ff["agent_cpu_us"] is not None:
            ours_cpu = of["client_cpu_us"] + of["agent_cpu_us"]
            official_cpu = ff["client_cpu_us"] + ff["agent_cpu_us"]
            print(
                f"ours / official, CPU per notification (both processes): "
                f"{official_cpu / ours_cpu:.2f}× less CPU ({ours_cpu:.1f} vs {official_cpu:.1f} µs)"
            )
        print(
            f"ping p50: ours {ours['ping']['p50_us']:,.0f} µs, official {official['ping']['p50_us']:,.0f} µs "
            f"(official / ours = {official['ping']['p50_us'] / ours['ping']['p50_us']:.2f}×)"
        )


def _print_profiles(profile_dir: Path, top: int) -> None:
    import pstats

    for path in sorted(profile_dir.glob("*.prof")):
        print()
        print(f"===== {path.name} (top {top} by own time)")
        stats = pstats.Stats(str(path))
        stats.strip_dirs().sort_stats("tottime").print_stats(top)


def main() -> None:
    if sys.argv[1:2] == ["agent-cmd"]:
        from .agent_cmd import main as agent_cmd_main

        agent_cmd_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["agent"]:
        from .agent_main import main as agent_main

        agent_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["remote-startup"]:
        from .remote_startup import main as remote_startup_main

        remote_startup_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["remote-first-cancel"]:
        from .remote_first_cancel import main as remote_first_cancel_main

        remote_first_cancel_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["remote-lifecycle"]:
        from .remote_lifecycle import main as remote_lifecycle_main

        remote_lifecycle_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["remote"]:
        from .remote import main as remote_main

        remote_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["warm"]:
        from .warm_start import main as warm_main

        warm_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["idle-exit"]:
        from .idle_exit import main as idle_exit_main

        idle_exit_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["concurrency"]:
        from .concurrency import main as concurrency_main

        concurrency_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["hostile"]:
        from .hostile import main as hostile_main

        hostile_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["flood"]:
        from .flood import main as flood_main

        flood_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["history"]:
        from .history import main as history_main

        history_main(sys.argv[2:])
        return
    if sys.argv[1:2] == ["failures"]:
        from .model_failures import main as failures_main

        failures_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--n", type=int, default=20_000, help="notifications per flood turn (default 20,000)"
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="timed flood turns per configuration (default 5)"
    )
    parser.add_argument(
        "--pings", type=int, default=2_000, help="sequential ping requests (default 2,000)"
    )
    parser.add_argument(
        "--no-cross", action="store_true", help="skip the mixed official/ours configurations"
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the in-memory configuration")
    parser.add_argument("--only", choices=["ours", "official"], help="run one configuration only")
    parser.add_argument("--json", metavar="FILE", help="also write the raw results to FILE")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="run `ours` and `official` once more under cProfile (client and agent "
        "processes), write the .prof files to DIR and print the hot spots",
    )
    parser.add_argument("--profile-top", type=int, default=20, help="rows per profile (default 20)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per configuration")
    args = parser.parse_args()

    configs = _configs(args)
    if args.only:
        configs = [c for c in configs if c[0] == args.only]
    print(
        f"python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    started = time.perf_counter()
    results: list[tuple[str, dict[str, Any]]] = []
    for label, driver in configs:
        t0 = time.perf_counter()
        print(f"running {label} …", end="", flush=True)
        result = _run_driver(driver, args)
        print(f" {time.perf_counter() - t0:.1f} s", flush=True)
        results.append((label, result))
    _print_table(results, args)
    print(
        f"\ntotal {time.perf_counter() - started:.0f} s; load average now "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(dict(results), indent=2) + "\n", encoding="utf-8")

    if args.profile:
        profile_dir = Path(args.profile).resolve()
        profile_dir.mkdir(parents=True, exist_ok=True)
        profile_args = argparse.Namespace(
            **{**vars(args), "runs": 1, "pings": min(args.pings, 500)}
        )
        for label, driver in _configs(args)[:2]:
            print(f"\nprofiling {label} …", flush=True)
            _run_driver(driver, profile_args, profile_dir=profile_dir, label=label)
        time.sleep(0.5)  # the agents write their profiles as they exit
        _print_profiles(profile_dir, args.profile_top)


if __name__ == "__main__":
    main()
