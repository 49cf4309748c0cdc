"""`python -m bench warm [--series N] [--launches N] [--no-acpx]`: launches of a fresh install.

Warm start is on by default (src/trio_acp/warm.py): the first launch of a fresh install finds
no warm server, starts one and goes on cold; the next ones attach to it. This measures what a
user sees, with no set-up step: `--series` times, in a warm directory of its own that is empty
at the start (a fresh install), `--launches` launches one after the other, each timed from
its spawn to its `session/new` response (then its stdin is closed and it exits):

- *direct*: `python -m trio_acp`, raw frames on its stdio (initialize, session/new);
- *acpx*: `acpx exec` (tests/js/node_modules/acpx-0.19), one echo prompt, timed to the
  `session/new` response in its `--format json` output from acpx's spawn, and from the agent's
  own spawn (acpx launches a stamp that writes the time and `exec`s `python -m trio_acp` in
  the same process: node's and acpx's start-up are not counted; acpx's relay of the response
  is, a few ms).

Then, with the series' server idle: its RSS, PSS and USS (psutil), and it is stopped. Also:
the launcher's own import and `--version`, which bound what a warm launch costs before it
hands its stdio over. Benchmarks print; they assert nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

PY = sys.executable
ROOT = Path(__file__).resolve().parent.parent
ACPX_019 = ROOT / "tests" / "js" / "node_modules" / "acpx-0.19" / "dist" / "cli.js"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def _percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


class _Lines:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc, self.buffer = proc, b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]

    def next_line(self, deadline: float) -> bytes:
        while b"\n" not in self.buffer:
            if not self.selector.select(max(0.0, deadline - time.monotonic())):
                raise TimeoutError("no line in time")
            data = os.read(self.proc.stdout.fileno(), 1 << 16)  # type: ignore[union-attr]
            if not data:
                raise EOFError("the process closed its stdout")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def response(self, rid: int, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            frame = json.loads(self.next_line(deadline))
            if frame.get("id") == rid and "method" not in frame:
                return frame


def _one_launch(env: dict[str, str], ws: str, timeout: float) -> tuple[float, float, float]:
    """(spawn → initialize, spawn → session/new, the same) of one `python -m trio_acp`."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [PY, "-m", "trio_acp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ws,
    )
    lines = _Lines(proc)
    try:
        assert proc.stdin is not None
        proc.stdin.write(
            b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
        )
        proc.stdin.flush()
        lines.response(1, timeout)
        t_init = time.perf_counter() - t0
        new = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": ws, "mcpServers": []},
        }
        proc.stdin.write(json.dumps(new).encode() + b"\n")
        proc.stdin.flush()
        reply = lines.response(2, timeout)
        t_new = time.perf_counter() - t0
        if "result" not in reply:
            raise RuntimeError(f"session/new failed: {reply}")
        proc.stdin.close()
        proc.wait(60)
        return t_init, t_new, t_new
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


_STAMP = """\
import os, sys, time
with open(sys.argv[1], "w") as f:
    f.write(repr(time.time()))
os.execv(sys.executable, [sys.executable, "-m", "trio_acp"])
"""


def _one_acpx(env: dict[str, str], ws: str, timeout: float) -> tuple[float, float, float]:
    """(acpx's spawn → session/new response, the agent's spawn → that response, the agent's
    own part of it) of one `acpx exec`."""
    stamp_dir = Path(tempfile.mkdtemp(prefix="bench-stamp-"))
    stamp_script, stamp = stamp_dir / "stamp.py", stamp_dir / "spawned"
    stamp_script.write_text(_STAMP)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            "node",
            str(ACPX_019),
            "--agent",
            f"{PY} {stamp_script} {stamp}",
            "--cwd",
            ws,
            "--approve-all",
            "--format",
            "json",
            "exec",
            "[scenario:echo] hi",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ws,
    )
    lines = _Lines(proc)
    try:
        deadline = time.monotonic() + timeout
        new_id = init_id = None
        init_at = new_at = 0.0
        while True:
            frame = json.loads(lines.next_line(deadline))
            if frame.get("method") == "initialize":
                init_id = frame.get("id")
            elif init_id is not None and frame.get("id") == init_id and "method" not in frame:
                init_at = time.time()
            elif frame.get("method") == "session/new":
                new_id, new_at = frame.get("id"), time.time()
            elif new_id is not None and frame.get("id") == new_id and "method" not in frame:
                t_new, at = time.perf_counter() - t0, time.time()
                break
        while True:  # the rest of its output, until it exits
            try:
                lines.next_line(deadline)
            except EOFError:
                break
        proc.wait(timeout)
        spawned = float(stamp.read_text())
        # The agent's own share: spawn → initialize answered, then session/new asked →
        # answered (acpx's own work between the two is not the agent's).
        return t_new, at - spawned, (init_at - spawned) + (at - new_at)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        shutil.rmtree(stamp_dir, ignore_errors=True)


def _time_command(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return _median(times)


@contextlib.contextmanager
def warm_server(env: dict[str, str]) -> Iterator[None]:
    """`trio-acp warm serve` with `env`, from its "ready" line until the block ends (used
    by bench/history_launch.py)."""
    server = subprocess.Popen(
        [PY, "-m", "trio_acp", "warm", "serve"],
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert server.stderr is not None
        for line in server.stderr:
            if b"ready" in line:
                break
        else:
            raise RuntimeError("the warm server did not start")
        yield
    finally:
        server.terminate()
        server.wait(60)


def _idle_memory(directory: Path) -> str:
    """RSS/PSS/USS of the idle servers in `directory` (after their launches' children are
    gone)."""
    import psutil

    from trio_acp import warm

    rows = []
    for server in warm.running_servers(directory):
        if not server.pid:
            continue
        proc = psutil.Process(server.pid)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # a server still importing is not idle yet
            try:
                warm.request("status", env={"TRIO_ACP_WARM_DIR": str(directory)}, key=server.key)
                break
            except (OSError, EOFError, ValueError, warm.WarmError):
                time.sleep(0.2)
        while proc.children() and time.monotonic() < deadline:
            time.sleep(0.1)
        mem = proc.memory_full_info()
        rows.append(
            f"server {server.pid}: RSS {mem.rss / 2**20:.0f} MiB, PSS {mem.pss / 2**20:.0f} MiB, "
            f"USS {mem.uss / 2**20:.0f} MiB"
        )
    return "; ".join(rows) or "no server"


def _served(directory: Path) -> int:
    """Launches served by the servers in `directory` so far (a launch that leaves it
    unchanged went cold)."""
    from trio_acp import warm

    total = 0
    for server in warm.running_servers(directory):
        try:
            status = warm.request(
                "status", env={"TRIO_ACP_WARM_DIR": str(directory)}, key=server.key, timeout=5
            )
            total += int(status.get("launches", 0))
        except (OSError, EOFError, ValueError, warm.WarmError):
            pass
    return total


def _series(
    kind: str, base: dict[str, str], ws: str, launches: int, timeout: float, up: bool = False
):
    from trio_acp import warm

    directory = Path(tempfile.mkdtemp(prefix="bench-warm-")) / "warm"
    env = {**base, "TRIO_ACP_WARM_DIR": str(directory)}
    env.pop("TRIO_ACP_WARM", None)  # on, as by default
    one = _one_launch if kind == "direct" else _one_acpx
    results = []
    try:
        # `--up`: untimed launches until one is served warm (the server is up), then the
        # timed ones: a launch's cost through a server, not a fresh install's sequence
        # (cold launches now answer session/new before the SDK's import, so the first
        # few of a fresh install come before the server has imported it).
        deadline = time.monotonic() + timeout
        while up and time.monotonic() < deadline:
            served = _served(directory)
            one(env, ws, timeout)
            if _served(directory) != served:
                break
        for _ in range(launches):
            served = _served(directory)
            t_a, t_b, t_c = one(env, ws, timeout)
            results.append((t_a, t_b, t_c, _served(directory) == served))
        memory = _idle_memory(directory)
    finally:
        warm.stop_all_under(directory)
        shutil.rmtree(directory.parent, ignore_errors=True)
    return results, memory


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench warm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--series", type=int, default=2, help="fresh installs (default 2)")
    parser.add_argument("--launches", type=int, default=10, help="launches each (default 10)")
    parser.add_argument("--no-acpx", action="store_true", help="skip the acpx exec series")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per response")
    parser.add_argument(
        "--up",
        action="store_true",
        help="time launches once the server is up (not a fresh install's first ones)",
    )
    args = parser.parse_args(argv)

    from trio_acp import warm
    from trio_acp.testing import ScriptedLLM

    from .agent_common import agent_env

    if not warm.supported():
        print("warm start needs Linux; nothing to measure")
        return
    print(f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    launcher_import = _time_command([PY, "-c", "import trio_acp.cli, trio_acp.warm"], 5)
    version = _time_command([PY, "-m", "trio_acp", "--version"], 5)
    bare = _time_command([PY, "-c", "pass"], 5)
    print(
        f"python -c pass {bare * 1000:.0f} ms; launcher imports (trio_acp.cli + warm) "
        f"{launcher_import * 1000:.0f} ms; trio-acp --version {version * 1000:.0f} ms (medians)"
    )
    kinds = ["direct"] + ([] if args.no_acpx or not shutil.which("node") else ["acpx"])
    with ScriptedLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        base = agent_env(llm.base_url, str(Path(tmp) / "home"))
        base["HOME"] = str(Path(tmp) / "home")
        ws = str(Path(tmp).resolve())
        for kind in kinds:
            per_launch: list[list[tuple[float, float, float, bool]]] = [
                [] for _ in range(args.launches)
            ]
            memories = []
            for _ in range(args.series):
                results, memory = _series(kind, base, ws, args.launches, args.timeout, args.up)
                for n, result in enumerate(results):
                    per_launch[n].append(result)
                memories.append(memory)
            # direct: session/new from the spawn; acpx: session/new from acpx's spawn,
            # from the agent's, and the agent's own part (acpx's pause between the
            # initialize answer and its session/new left out).
            columns = (
                [("spawn → session/new", 1)]
                if kind == "direct"
                else [
                    ("acpx's spawn → session/new", 0),
                    ("agent's spawn → session/new", 1),
                    ("the agent's own part", 2),
                ]
            )
            print(f"\n{kind}: {args.series} fresh installs")
            print("  launch  " + "".join(f"{name + ' (ms)':<34}" for name, _ in columns) + "cold")
            for n, rows in enumerate(per_launch, 1):
                cells = "".join(
                    f"{', '.join(f'{row[i] * 1000:,.0f}' for row in rows):<34}" for _, i in columns
                )
                print(f"  {n:>6}  {cells}{sum(row[3] for row in rows)}/{len(rows)}")
            for name, i in columns:
                later = [row[i] * 1000 for rows in per_launch[2:] for row in rows]
                if later:
                    print(
                        f"  launches 3–{args.launches}, {name}: p50 {_percentile(later, 50):,.0f}"
                        f" ms, p99 {_percentile(later, 99):,.0f} ms, max {max(later):,.0f} ms "
                        f"({len(later)} launches)"
                    )
            for memory in memories:
                print(f"  idle {memory}")
    print(f"\nload average at the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main(sys.argv[1:])
