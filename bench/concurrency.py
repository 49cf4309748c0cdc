"""`python -m bench concurrency`: N sessions prompting at once in one `trio-acp` process.

One agent process (raw frames, `trio_acp.testing.raw_agent`) against the scripted model:
N `session/new`, then N `session/prompt` sent at once, each running one `terminal` tool
call (always-approve mode) before it finishes. Printed: the agent's RSS and thread count
(and its child processes) at start, with N idle sessions, at the peak while all N run, and
after every session is closed (`--rounds` times over: memory that grows in every round is a
leak); the per-session costs; and what was left behind: processes,
entries in the agent's private TMPDIR (the file editor's `oh_editor_history_*` among them),
and files outside the persistence directory and the workspace. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import psutil

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.raw_agent import RawAgent

MiB = 1 << 20


def snapshot(pid: int) -> dict[str, float]:
    proc = psutil.Process(pid)
    children = [c for c in proc.children(recursive=True) if c.status() != psutil.STATUS_ZOMBIE]
    return {
        "rss": proc.memory_info().rss / MiB,
        "threads": proc.num_threads(),
        "children": len(children),
    }


class Sampler:
    """The peak RSS, threads and children of the agent while a phase runs."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, {"rss": 0.0, "threads": 0, "children": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                now = snapshot(self.pid)
            except psutil.Error:
                return
            for key, value in now.items():
                self.peak[key] = max(self.peak[key], value)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run(n: int, *, rounds: int = 2, settle: float = 2.0) -> dict:
    root = Path(tempfile.mkdtemp(prefix="trio-acp-concurrency-"))
    persist, ws, tmp, home = root / "persist", root / "ws", root / "tmp", root / "home"
    for d in (persist, ws, tmp, home):
        d.mkdir()
    with ScriptedLLM() as llm:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=str(persist),
            TMPDIR=str(tmp),
            HOME=str(home),
            LLM_NUM_RETRIES="1",
            LLM_TIMEOUT="120",
            TRIO_ACP_DEFAULT_MODE="always-approve",
        )
        agent = RawAgent.spawn(env, cwd=str(ws))
        figures: dict = {"n": n}
        with agent:
            agent.initialize()
            figures["cold"] = snapshot(agent.pid)
            # One session opened and closed first: the SDK is imported and warmed, so the
            # baseline below holds what every session shares.
            agent.result("session/close", {"sessionId": agent.new_session(str(ws), timeout=600)})
            time.sleep(settle)
            figures["start"] = snapshot(agent.pid)
            figures["closed_rounds"] = []
            for round_ in range(rounds):
                t0 = time.perf_counter()
                sids = [agent.new_session(str(ws), timeout=600) for _ in range(n)]
                figures["new_s"] = time.perf_counter() - t0
                time.sleep(settle)
                figures["idle"] = snapshot(agent.pid)
                ids = []
                t0 = time.perf_counter()
                with Sampler(agent.pid) as sampler:
                    for i, sid in enumerate(sids):
                        rid = agent.new_id()
                        ids.append(rid)
                        agent.send(
                            {
                                "jsonrpc": "2.0",
                                "id": rid,
                                "method": "session/prompt",
                                "params": {
                                    "sessionId": sid,
                                    "prompt": [
                                        {
                                            "type": "text",
                                            "text": scenario_prompt(
                                                "terminal",
                                                f"session {i}",
                                                command=f"echo concurrent-{i}",
                                            ),
                                        }
                                    ],
                                },
                            }
                        )
                    replies = [agent.response(rid, timeout=600) for rid in ids]
                figures["prompts_s"] = time.perf_counter() - t0
                figures["active_peak"] = sampler.peak
                figures["end_turn"] = sum(
                    r.get("result", {}).get("stopReason") == "end_turn" for r in replies
                )
                figures["errors"] = [r["error"]["message"][:120] for r in replies if "error" in r]
                done = {
                    f["params"]["sessionId"]
                    for f in agent.frames
                    if f.get("method") == "session/update"
                    and f["params"]["update"].get("sessionUpdate") == "tool_call_update"
                    and f["params"]["update"].get("status") == "completed"
                }
                figures["tool_calls_completed"] = len(done & set(sids))
                for sid in sids:
                    agent.result("session/close", {"sessionId": sid}, timeout=120)
                time.sleep(settle)
                figures["closed"] = snapshot(agent.pid)
                figures["closed_rounds"].append(figures["closed"])
                if round_ == 0:
                    first = {
                        k: figures[k]
                        for k in (
                            "new_s",
                            "idle",
                            "prompts_s",
                            "active_peak",
                            "end_turn",
                            "errors",
                            "tool_calls_completed",
                        )
                    }
            figures.update(first)
            children = psutil.Process(agent.pid).children(recursive=True)
            figures["closed_children"] = [
                c.name() for c in children if c.status() != psutil.STATUS_ZOMBIE
            ]
            figures["bad_lines"] = len(agent.bad_lines)
            status = agent.close(timeout=60)
        figures["exit_status"] = status
        figures["left_children"] = [
            c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE
        ]
        figures["tmp_left"] = sorted(p.name for p in tmp.iterdir())
        figures["home_left"] = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench concurrency",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sessions", type=int, default=50, help="concurrent sessions (default 50)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="open, prompt and close the sessions this many times (default 2): memory that "
        "grows again in every round is a leak, memory kept once is the allocator's",
    )
    args = parser.parse_args(argv)
    print(
        f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    f = run(args.sessions, rounds=args.rounds)
    n = f["n"]
    print(
        f"{n} sessions: session/new ×{n} in {f['new_s']:.1f} s; {n} prompts with a terminal call each, "
        f"all sent at once, answered in {f['prompts_s']:.1f} s"
    )
    print(
        f"end_turn {f['end_turn']}/{n}, sessions whose tool call completed {f['tool_calls_completed']}/{n}, "
        f"errors {len(f['errors'])} {f['errors'][:3]}, invalid stdout lines {f['bad_lines']}"
    )
    print(f"{'':<22}{'RSS MiB':>10}{'threads':>9}{'children':>10}")
    for label, key in [
        ("initialized (no SDK)", "cold"),
        ("SDK loaded, no session", "start"),
        (f"{n} idle sessions", "idle"),
        (f"{n} active (peak)", "active_peak"),
        ("all closed", "closed"),
    ]:
        s = f[key]
        print(f"{label:<22}{s['rss']:>10.1f}{s['threads']:>9}{s['children']:>10}")
    start, idle, peak, closed = f["start"], f["idle"], f["active_peak"], f["closed"]
    print(
        f"per idle session:   {(idle['rss'] - start['rss']) / n:.2f} MiB, "
        f"{(idle['threads'] - start['threads']) / n:.2f} threads, {(idle['children'] - start['children']) / n:.2f} processes"
    )
    print(
        f"per active session: {(peak['rss'] - idle['rss']) / n:.2f} MiB, "
        f"{(peak['threads'] - idle['threads']) / n:.2f} threads, {(peak['children'] - idle['children']) / n:.2f} "
        "processes more than idle (peak)"
    )
    print(
        f"after closing all:  RSS {closed['rss'] - start['rss']:+.1f} MiB, threads {closed['threads'] - start['threads']:+d}, "
        f"child processes {closed['children']} ({f['closed_children']}) vs {start['children']} at start"
    )
    print(
        "RSS after each round's close: "
        + ", ".join(f"{c['rss']:.1f} MiB" for c in f["closed_rounds"])
        + "; threads: "
        + ", ".join(str(c["threads"]) for c in f["closed_rounds"])
    )
    print(
        f"exit status {f['exit_status']}; left behind: processes {f['left_children']}, "
        f"TMPDIR entries {f['tmp_left'][:5]} ({len(f['tmp_left'])}), HOME entries {f['home_left'][:6]}"
    )


if __name__ == "__main__":
    main()
