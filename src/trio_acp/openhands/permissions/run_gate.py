"""What a run's tools may still start: a gate that a cancel closes, checked where a command
reaches the shell.

The SDK runs each tool call on a thread of its own. `interrupt()` reaches a tool only
through a cancel token checked before the tool begins, and a SIGINT to the shell once it
runs; between the two, the terminal tool's thread still reads the screen and writes the
command to its shell. A cancel that landed in those milliseconds found nothing to stop,
and the command then ran to its end (docs/ARCHITECTURE.md#d6-cancel-is-a-result-bounded-in-time).

So each run of a conversation has a `RunGate`, current for everything the run does (a
context variable: the SDK copies the run's context into its tool threads, and a sub-agent
runs in its delegating call's thread, so its commands pass the same gate), and the shell
takes a command only through it (`sdk/terminal_gate.py`), as a sub-agent starts
(`subagents.py`: one that starts after the cancel would post its events after the turn's
answer). Under the gate's lock a
command is written only while the gate is open, and a cancel closes the gate under the
same lock before it stops what runs: a command written before the close is in the shell,
where the stop finds it (`tool_processes.stop_tool_processes`); one that comes after is
refused and never runs. The gate also remembers which shells it let a command into, so
the stop interrupts exactly those.

Pure: threading and contextvars only (no Trio, no SDK).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from trio_acp.openhands.permissions import turn_points


class CommandRefused(ValueError):
    """A command came after its run was cancelled: it was not run. (A ValueError: the SDK
    turns one into the tool call's error event without logging it as a crash.)"""


class RunCancelled(Exception):
    """The run was cancelled while this waited; what it waited for is abandoned."""


class RunGate:
    """One run's gate (see the module's docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Set by `close`; a test waits on it to know that a cancel has landed.
        self.closed = threading.Event()
        self._shells: list[Any] = []
        self._on_close: list[Callable[[], None]] = []

    def admit[T](self, start: Callable[[], T], *, shell: Any = None, what: str = "command") -> T:
        """Run `start` (write a command to `shell`, begin a sub-agent) if the gate is open;
        else raise `CommandRefused`. Holds the gate's lock meanwhile: a close waits for it."""
        turn_points.reached(f"{what}:before", shell)
        with self._lock:
            if self.closed.is_set():
                raise CommandRefused(
                    f"The user cancelled before this {what} started; it was not run."
                )
            if shell is not None and not any(s is shell for s in self._shells):
                self._shells.append(shell)
            result = start()
        turn_points.reached(f"{what}:after", shell)
        return result

    def exclusive[T](self, work: Callable[[], T]) -> T:
        """Do `work` under the gate's lock, open or closed: never while a command is being
        handed to its shell (the SDK's own interrupt of the terminal: tool_processes.py)."""
        with self._lock:
            return work()

    def close(self) -> list[Any]:
        """Refuse every command from now on; returns the shells a command was let into."""
        with self._lock:
            self.closed.set()
            callbacks, self._on_close = self._on_close, []
            shells = list(self._shells)
        for callback in callbacks:
            callback()
        return shells

    def abandon_on_close[T](self, work: Callable[[], T]) -> T:
        """Do blocking `work` on a thread of its own and return what it returns, unless the
        gate closes first: then raise `RunCancelled` at once, and the thread finishes
        alone (its result dropped). For a blocking call in the run's own thread that
        nothing else could cut short: the critic's request (critic.py), which holds the
        conversation's loop thread, and with it the cancel, for as long as it waits."""
        done = threading.Event()
        outcome: list[tuple[bool, Any]] = []

        def run() -> None:
            try:
                outcome.append((True, work()))
            except BaseException as exc:
                outcome.append((False, exc))
            finally:
                done.set()

        with self._lock:
            if self.closed.is_set():
                raise RunCancelled("The user cancelled; this was not done.")
            self._on_close.append(done.set)
        threading.Thread(target=run, name="trio-acp-abandonable", daemon=True).start()
        done.wait()
        if not outcome:
            raise RunCancelled("The user cancelled while this waited; it was abandoned.")
        ok, value = outcome[0]
        if ok:
            return value
        raise value


_CURRENT: contextvars.ContextVar[RunGate | None] = contextvars.ContextVar(
    "trio_acp_run_gate", default=None
)


def current() -> RunGate | None:
    """The gate of the run this thread works for, if any."""
    return _CURRENT.get()


async def run_under[T](gate: RunGate, run: Callable[[], Awaitable[T]]) -> T:
    """Await `run()` (an asyncio coroutine: the conversation's `arun`) with `gate` current
    for it and every tool thread it starts."""
    _CURRENT.set(gate)  # this task's own context: the caller's is untouched
    return await run()
