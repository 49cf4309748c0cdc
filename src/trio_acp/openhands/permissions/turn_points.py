"""Named points of a turn where a test can step in (tests/openhands/test_cancel_points.py).

The cancel-point harness injects a `session/cancel` at each step of a real turn: each SDK
callback, a streamed token, a sub-agent's event, just before and just after a command
reaches the shell, just before the prompt is sent (`send`, on the Trio thread); and the
steps of a session's deferred build (`build`: `sdk`, `llm`, `agent`, `open`, on the Trio
thread; sessions/deferred_build.py). The code at those points calls `reached(point, detail)`; nothing is
installed in production, so it costs one global read. A hook runs on whatever thread
reached the point (the SDK's, a tool's, a sub-agent's) and must never fail.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

Hook = Callable[[str, object], None]  # the point's name, and what it is about

_hook: Hook | None = None


def reached(point: str, detail: object = None) -> None:
    hook = _hook
    if hook is not None:
        try:
            hook(point, detail)
        except Exception:
            log.exception("the hook at %s failed", point)


@contextlib.contextmanager
def stepping_in(hook: Hook) -> Iterator[None]:
    """Call `hook(point, detail)` at every point reached while in this block."""
    global _hook
    previous, _hook = _hook, hook
    try:
        yield
    finally:
        _hook = previous
