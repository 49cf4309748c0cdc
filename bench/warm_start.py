"""`python -m bench warm [--runs N]`: a launch's start-up, cold vs through the warm server.

Each run spawns `python -m trio_acp` (with the scripted model) and times, from the spawn,
the `initialize` response and the first `session/new` response, then closes its stdin.
*cold*: `TRIO_ACP_WARM=0`, the ordinary start (the SDK imported in the new process).
*warm*: a warm server (`trio-acp warm serve`, src/trio_acp/warm_server.py) in a private directory
of this run, started first (its own import is reported, not counted). Also: the launcher's
own import (`python -c "import trio_acp.cli, trio_acp.warm"`) and `--version`, which bound
what a warm launch costs before it hands its stdio over. Medians (and min–max) of --runs.
Benchmarks print; they assert nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

PY = sys.executable


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


class _Lines:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc, self.buffer = proc, b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]

    def response(self, rid: int, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                frame = json.loads(line)
                if frame.get("id") == rid and "method" not in frame:
                    return frame
            if not self.selector.select(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"no response to request {rid}")
            data = os.read(self.proc.stdout.fileno(), 1 << 16)  # type: ignore[union-attr]
            if not data:
                raise EOFError("the agent closed its stdout")
            self.buffer += data


def _one_launch(env: dict[str, str], ws: str, timeout: float) -> tuple[float, float]:
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
        return t_init, t_new
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _time_command(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return _median(times)


def _row(label: str, values: list[tuple[float, float]]) -> str:
    inits, news = [v[0] for v in values], [v[1] for v in values]
    return (
        f"{label:<8} {_median(inits):>9.2f} s ({min(inits):.2f}–{max(inits):.2f})"
        f" {_median(news):>10.2f} s ({min(news):.2f}–{max(news):.2f})"
    )


@contextlib.contextmanager
def warm_server(env: dict[str, str]) -> Iterator[None]:
    """`trio-acp warm serve` with `env`, from its "ready" line until the block ends."""
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


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench warm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="launches per configuration (default 5)"
    )
    parser.add_argument("--timeout", type=float, default=300, help="seconds per response")
    args = parser.parse_args(argv)

    from trio_acp import warm
    from trio_acp.testing import ScriptedLLM

    from .agent_common import agent_env

    if not warm.supported():
        print("warm start needs Linux; nothing to measure")
        return
    print(f"{os.cpu_count()} CPUs, load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    launcher_import = _time_command([PY, "-c", "import trio_acp.cli, trio_acp.warm"], args.runs)
    version = _time_command([PY, "-m", "trio_acp", "--version"], args.runs)
    bare = _time_command([PY, "-c", "pass"], args.runs)
    print(
        f"python -c pass {bare * 1000:.0f} ms; launcher imports (trio_acp.cli + warm) "
        f"{launcher_import * 1000:.0f} ms; trio-acp --version {version * 1000:.0f} ms (medians)"
    )
    with ScriptedLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        base = agent_env(llm.base_url, str(Path(tmp) / "home"))
        base.pop("TRIO_ACP_WARM", None)
        cold_env = {**base, "TRIO_ACP_WARM": "0"}
        warm_env = {**base, "TRIO_ACP_WARM_DIR": str(Path(tmp) / "warm")}
        ws = str(Path(tmp).resolve())
        cold = [_one_launch(cold_env, ws, args.timeout) for _ in range(args.runs)]
        t0 = time.perf_counter()
        with warm_server(warm_env):
            ready = time.perf_counter() - t0
            warm_runs = [_one_launch(warm_env, ws, args.timeout) for _ in range(args.runs)]
            status = warm.request("status", env=warm_env)
    print(
        f"warm server ready {ready:.1f} s after its spawn (the SDK import, once); "
        f"{status['launches']} launches served"
    )
    print()
    print(f"spawn → response, median (min–max) of {args.runs} launches")
    print(f"{'':<8} {'initialize':>21} {'first session/new':>25}")
    print(_row("cold", cold))
    print(_row("warm", warm_runs))
    cold_new, warm_new = _median([v[1] for v in cold]), _median([v[1] for v in warm_runs])
    print(
        f"\nfirst session/new: warm {warm_new:.2f} s vs cold {cold_new:.2f} s ({cold_new / warm_new:.0f}× sooner)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
