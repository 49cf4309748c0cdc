"""`python -m bench.agent_profiled`: the agent (`python -m trio_acp`) with a cProfile that the
benchmark switches on and off, so that a profile holds one phase and not the SDK import.

SIGUSR1 starts profiling; SIGUSR2 stops it and writes the profile to `PREFIX.1`, then
`PREFIX.2`, …, where PREFIX is the environment variable TRIO_ACP_BENCH_PROFILE.
On Python ≥ 3.12 cProfile rides on sys.monitoring, so one profiler sees every thread: the
Trio thread, the session's asyncio loop thread (the SDK, litellm), worker threads. Own
times (tottime) are exact per function; cumulative times mix the threads' stacks.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys

ENV_OUT = "TRIO_ACP_BENCH_PROFILE"

_profiler: cProfile.Profile | None = None
_dumps = 0


def _start(signum, frame) -> None:
    global _profiler
    if _profiler is None:
        _profiler = cProfile.Profile()
        _profiler.enable()


def _stop(signum, frame) -> None:
    global _profiler, _dumps
    profiler, _profiler = _profiler, None
    if profiler is None:
        return
    profiler.disable()
    _dumps += 1
    out = f"{os.environ[ENV_OUT]}.{_dumps}"
    profiler.dump_stats(out + ".tmp")
    os.replace(out + ".tmp", out)  # the driver waits for the file: never let it see half


def main() -> int:
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    from trio_acp.cli import main as cli_main

    return cli_main([])


if __name__ == "__main__":
    sys.exit(main())
