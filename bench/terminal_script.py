"""`python -m bench.terminal_script [--runs 200]`: what the editor terminal's script costs.

Each command the model runs in an editor terminal is `bash -c <the command>` with a
set-up script in `BASH_ENV` (`editor_terminal.setup_script`): the command in a session of
its own, a watcher that stops it if the spawned `bash` dies first or the session's lifeline
ends (docs/editor-workspace.md). Two figures:

* per command: `true` through the set-up (with a lifeline, as in a session), spawn to exit
  (as an editor waits for it), against the plain script of before the watcher (the
  command, then `pwd -P` into the directory file); runs interleaved, p50/p90 in ms;
* stopping: `sleep 60` through the set-up, SIGTERM to the spawned `bash` alone (as acpx
  0.15 kills a terminal), then the time until the `sleep` is gone (ms).

Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from trio_acp.openhands.editor.terminal_launch import _Private, setup_script


def plain_script(command: str, cwd_file: str) -> str:
    """The script before the watcher (kept here only as the baseline)."""
    return (
        f"{command}\n__trio_acp_status=$?\n"
        f"pwd -P > {shlex.quote(cwd_file)} 2>/dev/null\nexit $__trio_acp_status"
    )


def _run(command: str, setup: str | None = None) -> float:
    env = {**os.environ, "BASH_ENV": setup} if setup else None
    start = time.perf_counter()
    subprocess.run(["bash", "-c", command], env=env, stdin=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def _setup(tmp: Path, lifeline: str | None) -> str:
    path = tmp / "setup.sh"
    path.write_text(setup_script(str(tmp / "cwd"), lifeline=lifeline))
    return str(path)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _stop_time(tmp: Path, setup: str) -> float:
    pids = tmp / "pid"
    pids.unlink(missing_ok=True)
    proc = subprocess.Popen(
        ["bash", "-c", f"sleep 60 & echo $! > {pids}; wait"],
        env={**os.environ, "BASH_ENV": setup},
        stdin=subprocess.DEVNULL,
    )
    while not (pids.exists() and pids.read_text().endswith("\n")):
        time.sleep(0.005)
    pid = int(pids.read_text())
    start = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    while not _gone(pid):
        time.sleep(0.001)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    private = _Private.open()  # the session's lifeline, held by this process
    assert private is not None
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cwd_file = str(tmp / "cwd")
        setup = _setup(tmp, private.lifeline)
        plain, watched = [], []
        for _ in range(5):  # warm the page cache
            _run(plain_script("true", cwd_file))
            _run("true", setup)
        for _ in range(args.runs):
            plain.append(_run(plain_script("true", cwd_file)))
            watched.append(_run("true", setup))
        stops = [_stop_time(tmp, setup) for _ in range(max(5, args.runs // 20))]
    private.close()
    ms = 1000.0
    figures = {
        "runs": args.runs,
        "plain_p50_ms": _pct(plain, 0.5) * ms,
        "plain_p90_ms": _pct(plain, 0.9) * ms,
        "watched_p50_ms": _pct(watched, 0.5) * ms,
        "watched_p90_ms": _pct(watched, 0.9) * ms,
        "added_median_ms": (statistics.median(watched) - statistics.median(plain)) * ms,
        "stop_p50_ms": _pct(stops, 0.5) * ms,
        "stop_max_ms": max(stops) * ms,
        "load": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"{args.runs} runs each, load average {figures['load']:.1f}")
    print(
        f"plain script   `true`: p50 {figures['plain_p50_ms']:.2f} ms, "
        f"p90 {figures['plain_p90_ms']:.2f} ms"
    )
    print(
        f"watched script `true`: p50 {figures['watched_p50_ms']:.2f} ms, "
        f"p90 {figures['watched_p90_ms']:.2f} ms "
        f"(+{figures['added_median_ms']:.2f} ms median)"
    )
    print(
        f"SIGTERM to the spawned bash alone → the command's `sleep` gone: p50 "
        f"{figures['stop_p50_ms']:.1f} ms, max {figures['stop_max_ms']:.1f} ms ({len(stops)} runs)"
    )


if __name__ == "__main__":
    main()
