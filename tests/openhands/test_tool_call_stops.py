"""`ToolCallStops` and the run's gate: one tool call's command stopped alone (pure:
threading and contextvars, no SDK; permissions/run_gate.py). The real commands are in
test_tool_call_stop.py."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from trio_acp.openhands.permissions import run_gate
from trio_acp.openhands.permissions.run_gate import (
    CommandRefused,
    RunGate,
    ToolCallStops,
    working_on,
)


@contextlib.contextmanager
def in_run(gate: RunGate) -> Iterator[None]:
    """`gate` current, as it is in a run's tool threads (`run_gate.run_under`)."""
    token = run_gate._CURRENT.set(gate)
    try:
        yield
    finally:
        run_gate._CURRENT.reset(token)


def _admit(gate: RunGate, tool_call: str, shell: object) -> list[str]:
    ran: list[str] = []
    with working_on(tool_call):
        gate.admit(lambda: ran.append(tool_call), shell=shell)
    return ran


def test_a_call_stopped_before_its_command_is_refused_and_the_gate_stays_open() -> None:
    stops = ToolCallStops()
    gate = RunGate(stops)
    assert stops.stop("a") == (True, None)  # not in a shell: refused when it comes
    with pytest.raises(CommandRefused):
        _admit(gate, "a", object())
    assert not gate.closed.is_set()
    assert _admit(gate, "b", object()) == ["b"]  # every other command still runs


def test_a_running_call_is_found_in_its_shell_and_a_finished_one_is_left_alone() -> None:
    stops = ToolCallStops()
    gate = RunGate(stops)
    shell = object()
    held: list[tuple[bool, object]] = []
    with in_run(gate), working_on("a"):
        gate.admit(lambda: None, shell=shell)
        held.append(stops.stop("a"))  # while its command runs
    assert held == [(True, shell)]
    assert stops.stop("a") == (False, None)  # over: nothing to stop


def test_what_it_remembers_is_bounded() -> None:
    stops = ToolCallStops(remember=3)
    for n in range(10):
        stops.stop(f"never-ran-{n}")
        with in_run(RunGate(stops)), working_on(f"ran-{n}"):
            pass
    assert len(stops._stopped) == 3
    assert len(stops._over) == 3
