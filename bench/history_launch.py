"""`python -m bench history --launches N`: `session/list` as a new process's first request.

bench/history.py measures the list in its own process (the SDK imported, the agent on an
in-memory connection). An editor's list is often the first request of a process it has just
launched: this spawns `python -m trio_acp` on the bench's 1,000 sessions and times, from the
request to its response, the `session/list` sent right after `initialize`, and the one after
it. *cold*: the ordinary start (`TRIO_ACP_WARM=0`), so the list runs while the SDK import
goes on in the background (docs/ARCHITECTURE.md#d3-an-instant-initialize); *warm*: through
a warm server (README.md "Warm start") of this run, whose children are past the import.
Each with the list's cache file (trio_acp/openhands/sessions/store.py, LIST_CACHE_FILE) as the last
process left it, and without it (the first list ever). Medians (and min–max). Nothing
asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .warm_start import _Lines, _median, warm_server

PY = sys.executable


def _launch(env: dict[str, str], cwd: str) -> tuple[float, float]:
    """The first and second `session/list`'s seconds, request → response, of a new process."""
    proc = subprocess.Popen(
        [PY, "-m", "trio_acp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    lines = _Lines(proc)
    assert proc.stdin is not None

    def call(rid: int, method: str, params: dict[str, Any]) -> tuple[dict, float]:
        frame = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        proc.stdin.write(json.dumps(frame).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        start = time.perf_counter()
        reply = lines.response(rid, 300)
        return reply, time.perf_counter() - start

    try:
        call(1, "initialize", {"protocolVersion": 1})
        first, t1 = call(2, "session/list", {"cwd": cwd})
        _, t2 = call(3, "session/list", {"cwd": cwd})
        if "result" not in first:
            raise RuntimeError(f"session/list failed: {first}")
        proc.stdin.close()
        proc.wait(60)
        return t1, t2
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def measure_launches(env: dict[str, str], cwd: str, runs: int) -> list[str]:
    """Printable lines: cold and warm launches, with and without the cache file."""
    from trio_acp.openhands.sessions.store import LIST_CACHE_FILE

    cache = Path(env["OPENHANDS_PERSISTENCE_DIR"]) / "conversations" / LIST_CACHE_FILE
    base = {k: v for k, v in env.items() if k != "TRIO_ACP_WARM"}
    out = [f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())}"]

    def rows(kind: str, launch_env: dict[str, str]) -> None:
        for with_file in (True, False):
            results = []
            for _ in range(runs):
                if not with_file:
                    cache.unlink(missing_ok=True)
                results.append(_launch(launch_env, cwd))
            firsts, seconds = [r[0] * 1000 for r in results], [r[1] * 1000 for r in results]
            out.append(
                f"  {kind} launch, {'cache file' if with_file else 'no cache file (first ever)'}: "
                f"first list {_median(firsts):,.0f} ms ({min(firsts):,.0f}–{max(firsts):,.0f}), "
                f"second {_median(seconds):,.0f} ms ({min(seconds):,.0f}–{max(seconds):,.0f})"
            )
        # Leave the cache file as a list leaves it.
        _launch(launch_env, cwd)

    rows("cold", {**base, "TRIO_ACP_WARM": "0"})
    with tempfile.TemporaryDirectory() as tmp:
        warm_env = {**base, "TRIO_ACP_WARM_DIR": str(Path(tmp) / "warm")}
        with warm_server(warm_env):
            rows("warm", warm_env)
    return out
