"""The terminal shells whose start-up is under way, so that leaving the process can wait for
them (`wait`).

A shell is never signalled while it runs its ~/.bashrc (sdk/terminal_start.py says why:
start-up tools such as pyenv's `rehash` take a lock file before they set the trap that
removes it, and a signal in between leaves the lock for good). So a terminal closed while
its shell starts is ended by the thread starting it, once the start-up is over; and the
process, which ends every thread when it leaves (cli.py exits without the interpreter's
teardown), waits for those threads first, bounded.

Pure: no SDK import, so the agent's close can call it whether or not the SDK was loaded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_changed = threading.Condition()
_under_way = 0


@contextmanager
def under_way() -> Iterator[None]:
    """Counts a shell's start (and the hang-up after it) for as long as the block runs."""
    global _under_way
    with _changed:
        _under_way += 1
    try:
        yield
    finally:
        with _changed:
            _under_way -= 1
            _changed.notify_all()


def count() -> int:
    """How many starts are under way now."""
    with _changed:
        return _under_way


def wait(timeout: float) -> bool:
    """Block until no start is under way (True) or `timeout` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    with _changed:
        while _under_way:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _changed.wait(left)
    return True
