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

One tool call can also be stopped on its own, the turn going on (ACP v2's
`tool_call/cancel` and `terminal/cancel`, docs/v2.md): `ToolCallStops`, one per
conversation, knows which shell each tool call's command went into (the tool's thread
says which tool call it works for: `working_on`), so that only that command is stopped
(`tool_processes.stop_command_in`), and refuses a stopped tool call's command that has not
reached its shell yet, while the gate stays open for every other command of the run.

Pure: threading and contextvars only (no Trio, no SDK).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

from trio_acp.openhands.permissions import turn_points


class Shell(Protocol):
    """A shell a run's commands are written into: the SDK's subprocess terminal
    (sdk/terminal_gate.py). The gate keeps it and compares it by identity; a cancel sends
    it a Ctrl-C (tool_processes.py)."""

    def send_keys(self, text: str, enter: bool = True) -> None: ...


class CommandRefused(ValueError):
    """A command came after its run was cancelled: it was not run. (A ValueError: the SDK
    turns one into the tool call's error event without logging it as a crash.)"""


class RunCancelled(Exception):
    """The run was cancelled while this waited; what it waited for is abandoned."""


class ToolCallStops:
    """One conversation's tool calls, each stoppable on its own (see the module's
    docstring). Outlives its runs: a tool call stopped while a run waits for the user's
    permission for another one runs (or is refused) in the next run."""

    def __init__(self, remember: int = 256) -> None:
        self._lock = threading.Lock()
        self._remember = remember
        # Stopped before their command reached a shell: refused when it comes.
        self._stopped: collections.OrderedDict[str, None] = collections.OrderedDict()
        # The shell each running tool call's command went into.
        self._shells: dict[str, Shell] = {}
        # Tool calls whose command is over (the latest `remember`).
        self._over: collections.OrderedDict[str, None] = collections.OrderedDict()

    def enter(self, tool_call_id: str, shell: Shell) -> None:
        """`tool_call_id`'s command is handed to `shell` (under the gate's lock); raises
        `CommandRefused` when the tool call was stopped before."""
        with self._lock:
            if tool_call_id in self._stopped:
                raise CommandRefused(
                    "The user cancelled this tool call before its command started; it was not run."
                )
            self._shells[tool_call_id] = shell

    def leave(self, tool_call_id: str) -> None:
        """`tool_call_id`'s tool is done (its thread leaves `working_on`)."""
        with self._lock:
            self._shells.pop(tool_call_id, None)
            self._stopped.pop(tool_call_id, None)
            _remember(self._over, tool_call_id, self._remember)

    def stop(self, tool_call_id: str) -> tuple[bool, Shell | None]:
        """Stop `tool_call_id`: (whether it was not over yet, the shell its command is
        in, to be interrupted, or None: it has not reached one, and never will)."""
        with self._lock:
            if tool_call_id in self._over:
                return False, None
            shell = self._shells.get(tool_call_id)
            if shell is None:
                _remember(self._stopped, tool_call_id, self._remember)
            return True, shell


def _remember(ids: collections.OrderedDict[str, None], tool_call_id: str, most: int) -> None:
    ids[tool_call_id] = None
    while len(ids) > most:
        ids.popitem(last=False)


class RunGate:
    """One run's gate (see the module's docstring)."""

    def __init__(self, stops: ToolCallStops | None = None) -> None:
        #: The conversation's tool calls stoppable one by one (None: only all at once).
        self.stops = stops
        self._lock = threading.Lock()
        # Set by `close`; a test waits on it to know that a cancel has landed.
        self.closed = threading.Event()
        self._shells: list[Shell] = []
        self._on_close: list[Callable[[], None]] = []

    def admit[T](
        self, start: Callable[[], T], *, shell: Shell | None = None, what: str = "command"
    ) -> T:
        """Run `start` (write a command to `shell`, begin a sub-agent) if the gate is open;
        else raise `CommandRefused`. Holds the gate's lock meanwhile: a close waits for it."""
        turn_points.reached(f"{what}:before", shell)
        tool_call = _TOOL_CALL.get()
        with self._lock:
            if self.closed.is_set():
                raise CommandRefused(
                    f"The user cancelled before this {what} started; it was not run."
                )
            if self.stops is not None and tool_call is not None and shell is not None:
                self.stops.enter(tool_call, shell)
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

    def close(self) -> list[Shell]:
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
        result: list[T] = []  # what `work` returned, or
        error: list[BaseException] = []  # what it raised

        def run() -> None:
            try:
                result.append(work())
            except BaseException as exc:
                error.append(exc)
            finally:
                done.set()

        with self._lock:
            if self.closed.is_set():
                raise RunCancelled("The user cancelled; this was not done.")
            self._on_close.append(done.set)
        threading.Thread(target=run, name="trio-acp-abandonable", daemon=True).start()
        done.wait()
        if result:
            return result[0]
        if error:
            raise error[0]
        raise RunCancelled("The user cancelled while this waited; it was abandoned.")


_CURRENT: contextvars.ContextVar[RunGate | None] = contextvars.ContextVar(
    "trio_acp_run_gate", default=None
)


def current() -> RunGate | None:
    """The gate of the run this thread works for, if any."""
    return _CURRENT.get()


_TOOL_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "trio_acp_tool_call", default=None
)


@contextlib.contextmanager
def working_on(tool_call_id: str) -> Iterator[None]:
    """In a tool's thread, around its executor: the commands it hands a shell are
    `tool_call_id`'s, stoppable on their own (`ToolCallStops`)."""
    token = _TOOL_CALL.set(tool_call_id)
    try:
        yield
    finally:
        _TOOL_CALL.reset(token)
        gate = current()
        if gate is not None and gate.stops is not None:
            gate.stops.leave(tool_call_id)


async def run_under[T](gate: RunGate, run: Callable[[], Awaitable[T]]) -> T:
    """Await `run()` (an asyncio coroutine: the conversation's `arun`) with `gate` current
    for it and every tool thread it starts."""
    _CURRENT.set(gate)  # this task's own context: the caller's is untouched
    return await run()
