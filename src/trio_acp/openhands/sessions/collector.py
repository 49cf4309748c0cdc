"""The garbage collector paused while a stored conversation is opened and replayed.

Opening a long conversation builds hundreds of thousands of objects that all stay alive
(the SDK's parsed events, then the replay's updates): each time their count crosses the
collector's threshold, a collection walks them in vain, and a 10,000-event load paid for
two or three full collections (0.3-0.9 s of its 2.5-3.5 s CPU, bench/README.md "Big
histories"). Reference counting still frees everything acyclic during the pause; only
cyclic garbage waits for the collector to run again after it.

The switch is the process's (`gc` has no other); the pauses nest (loads may overlap), and
the collector is switched back on by the last one to end, unless it was off before the
first began. Only the Trio thread enters and leaves pauses, so the count needs no lock.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["collector_paused"]

_depth = 0
_was_enabled = False


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    global _depth, _was_enabled
    if _depth == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _was_enabled:
            gc.enable()
