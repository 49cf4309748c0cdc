"""`python -m bench.exit_marked`: the agent (`python -m trio_acp`), recording when it calls
`os._exit` (its last step: cli.py `_exit_now`) in the file named by TRIO_ACP_BENCH_EXIT_MARK,
as `time.perf_counter()` (CLOCK_MONOTONIC, the same clock in every process here).

`python -m bench idle-exit` splits an exit with it: stdin EOF → `os._exit` is the agent's
own work; `os._exit` → the parent sees the exit is the kernel's (tearing down the address
space: ~0.3 ms per MiB of RSS on the loaded 2-core VM, bench/README.md).
"""

from __future__ import annotations

import os
import sys
import time

ENV_MARK = "TRIO_ACP_BENCH_EXIT_MARK"


def main() -> int:
    real_exit = os._exit

    def marked_exit(code: int) -> None:
        now = time.perf_counter()
        fd = os.open(os.environ[ENV_MARK], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, f"{now:.6f}\n".encode())
        finally:
            os.close(fd)
        real_exit(code)

    os._exit = marked_exit  # type: ignore[assignment]
    from trio_acp.cli import main as cli_main

    return cli_main([])


if __name__ == "__main__":
    sys.exit(main())
