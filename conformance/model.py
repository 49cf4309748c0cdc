"""What a check is, what it can conclude, and the registry the runner walks.

A check is an async function of a `Context` (see `context.py`).  It concludes by returning
(passed, with an optional short detail) or by raising one of `Failed`, `NotTested`,
`Skipped`.  "Not tested" means the suite could not exercise the rule (the agent never
reached the situation, e.g. it finished before a cancel could be sent); "skipped" means the
agent does not advertise the capability the rule is about.  Neither ever counts as passed.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from .context import Context


class Level(enum.StrEnum):
    #: A MUST of the spec (or of JSON-RPC 2.0): any failure makes the run fail.
    MANDATORY = "mandatory"
    #: A MUST that applies only when the agent advertises a capability; it is skipped
    #: otherwise, and a failure where advertised fails the run like a mandatory one.
    CAPABILITY = "capability"
    #: A SHOULD, or a lesson from clients in the wild: reported, never fails the run.
    ADVISORY = "advisory"


class Status(enum.StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_TESTED = "not tested"
    SKIPPED = "skipped"


class Outcome(Exception):
    status: Status

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail


class Failed(Outcome):
    status = Status.FAILED


class NotTested(Outcome):
    status = Status.NOT_TESTED


class Skipped(Outcome):
    status = Status.SKIPPED


CheckFn = Callable[["Context"], Awaitable[str | None]]


@attrs.frozen
class Check:
    id: str
    title: str
    #: The rule checked, quoted or paraphrased, with where it comes from.
    rule: str
    level: Level
    area: str
    fn: CheckFn = attrs.field(repr=False)
    #: The capability a CAPABILITY check depends on, in words (for the report).
    capability: str | None = None
    #: Upper bound on the check's run time (seconds); exceeding it fails the check.
    timeout: float = 150.0


@attrs.define
class Result:
    check: Check
    status: Status
    detail: str = ""
    duration: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        c = self.check
        return {
            "id": c.id,
            "title": c.title,
            "area": c.area,
            "level": c.level.value,
            "capability": c.capability,
            "rule": c.rule,
            "status": self.status.value,
            "detail": self.detail,
            "duration": round(self.duration, 3),
        }

    @property
    def fails_run(self) -> bool:
        return self.status is Status.FAILED and self.check.level is not Level.ADVISORY


#: Every check, in the order the runner runs them (module import order, then definition).
REGISTRY: dict[str, Check] = {}


def check(
    id: str,
    title: str,
    *,
    rule: str,
    level: Level,
    area: str,
    capability: str | None = None,
    timeout: float = 150.0,
) -> Callable[[CheckFn], CheckFn]:
    """Register a check; its id must be new (ids are stable: never reuse or renumber)."""
    if level is Level.CAPABILITY and not capability:
        raise ValueError(f"{id}: a capability check names its capability")

    def register(fn: CheckFn) -> CheckFn:
        if id in REGISTRY:
            raise ValueError(f"duplicate check id {id}")
        REGISTRY[id] = Check(id, title, rule, level, area, fn, capability, timeout)
        return fn

    return register
