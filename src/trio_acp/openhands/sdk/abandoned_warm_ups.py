"""Warm-up work a session's close left running in its thread (`LocalConversation.warm_up`
abandons the steps that own nothing, so a close never waits for seconds of imports), and
that must be over before the interpreter's teardown.

Why: an abandoned thread still importing a module when the interpreter tears itself down
is frozen there for good, holding that module's import lock, and the teardown's own
finalizers import too (litellm's HTTP handlers import in `__del__`): the process then
hangs forever on exit. That is what an application embedding trio-acp (the README's
library example) met when it left right after its session, while the first model call's
imports were still being warmed. So `run` counts such work, warm-up loops stop between
modules once the process is leaving (`leaving`), and an `atexit` hook waits for what is
under way, bounded. `trio-acp` itself leaves with `os._exit` (cli.py), without the
teardown or its hooks: there the wait costs nothing.

Pure: no SDK import.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: The longest the interpreter's exit waits for abandoned warm-ups: one module's import
#: (`openai.resources`, the largest, takes ~2.4 s here; more under load) or the tokenizer's
#: load. Past it the process leaves anyway, at the risk this module exists to avoid.
EXIT_WAIT = 30.0

_changed = threading.Condition()
_under_way = 0
_leaving = threading.Event()


def run[T](step: Callable[[], T]) -> T:
    """Run a warm-up step in this (worker) thread, counted until it returns."""
    global _under_way
    with _changed:
        _under_way += 1
    try:
        return step()
    finally:
        with _changed:
            _under_way -= 1
            _changed.notify_all()


def leaving() -> bool:
    """True once the interpreter is leaving: a warm-up loop stops at its next step."""
    return _leaving.is_set()


def wait_at_exit(timeout: float = EXIT_WAIT) -> bool:
    """Tell warm-ups to stop at their next step, then wait until none is under way (True)
    or `timeout` seconds passed (False)."""
    _leaving.set()
    deadline = time.monotonic() + timeout
    with _changed:
        while _under_way:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning("leaving with %d warm-up step(s) still under way", _under_way)
                return False
            _changed.wait(left)
    return True


atexit.register(wait_at_exit)
