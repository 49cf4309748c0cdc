"""Leaving the process without the editor waiting for the kernel to free its memory.

Once the agent has closed everything (cli.py `_exit_now`), what is left of an exit is
the kernel's: `os._exit` tears the address space down before the parent sees the exit,
and the agent maps ~300 MiB once the SDK is imported. On the shared 2-core VM that took
0.1-0.3 s at load 7-9, more than everything the agent itself does after stdin EOF
(bench/README.md, "Idle sessions and exit").

The kernel frees an address space when its last user leaves. So, right before
`os._exit`, `hand_off_memory` starts a *keeper*: a process that shares the address space
(`clone(CLONE_VM)`) and only sleeps (libc's `sleep(1)`: no Python, no stack but its
own). The agent's exit then only drops its reference, and the editor sees it at once;
the keeper's exit a second later frees the memory, the same work off the editor's path.
Every file descriptor is closed first, so the keeper holds no pipe, socket or terminal
of the agent's: the editor's stdout and stderr pipes end when the agent exits. If the
keeper outlived nothing (the agent took over a second to exit), the last one out frees
the memory as before.

Linux only; `TRIO_ACP_EXIT_HANDOFF=0` turns it off; any failure leaves the plain exit.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ["ENV_HANDOFF", "hand_off_memory"]

ENV_HANDOFF = "TRIO_ACP_EXIT_HANDOFF"

_CLONE_VM = 0x00000100  # linux/sched.h
_STACK_BYTES = 64 * 1024
#: The keeper's `sleep`: the agent's `os._exit` follows the clone at once, long before.
_LINGER_S = 1

# The keeper's stack, kept referenced: it lives in the shared address space.
_stacks: list[ctypes.Array[ctypes.c_char]] = []


def hand_off_memory() -> bool:
    """Close every file descriptor and start the keeper; True if it started. Call it
    only right before `os._exit`: nothing can be written, read or logged after it."""
    if sys.platform != "linux" or os.environ.get(ENV_HANDOFF, "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        clone, sleep = libc.clone, libc.sleep
    except (OSError, AttributeError):
        return False
    # The keeper gets a copy of the descriptor table: an empty one, so that it keeps no
    # pipe of the editor's open (close_range(2): one system call however many there are).
    os.closerange(0, _max_fd())
    stack = ctypes.create_string_buffer(_STACK_BYTES)
    _stacks.append(stack)
    top = (ctypes.addressof(stack) + _STACK_BYTES - 64) & ~0xF  # grows down, 16-aligned
    clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    clone.restype = ctypes.c_int
    # SIGCHLD as its exit signal: a plain child, which whoever inherits it (init, a
    # subreaper) reaps the usual way.
    pid = clone(
        ctypes.cast(sleep, ctypes.c_void_p),
        ctypes.c_void_p(top),
        _CLONE_VM | int(signal.SIGCHLD),
        ctypes.c_void_p(_LINGER_S),
    )
    return pid > 0


def _max_fd() -> int:
    try:
        limit = os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        limit = -1
    return limit if limit > 0 else 1 << 20
