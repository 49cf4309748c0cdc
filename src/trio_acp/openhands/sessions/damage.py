"""Which file of a stored conversation is damaged, and what the user can do about it.

When the SDK cannot open a conversation it fails deep inside (a JSON decode error, a
pydantic error about some field) without saying which file it was reading. Then we read
the files again, in the order the SDK does, with the SDK's own validators passed in (this
module does not import the SDK), and name the first one that fails.

The advice follows the SDK's layout (`store.py`): without `base_state.json` a
conversation opens from its `events/` with default settings; event files are read in
index order and the history stops at the first missing index, so moving a damaged event
file away, with the ones after it and `base_state.json` (which names the last event),
opens the history before it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import attrs

from trio_acp.openhands.sessions.small_files import loads_json
from trio_acp.openhands.translate.shapes import JsonObject

BASE_STATE = "base_state.json"
EVENTS_DIR = "events"
# The SDK's event file names (openhands/sdk/conversation/persistence_const.py).
EVENT_NAME = re.compile(r"^event-(?P<idx>\d{5,})-(?P<event_id>[0-9a-fA-F\-]{8,})\.json$")


@attrs.frozen
class Damage:
    path: Path
    problem: str  # completes "<path> ...", e.g. "is not valid JSON (...)"
    advice: str

    def message(self, session_id: str) -> str:
        return f"session {session_id} cannot be opened: {self.path} {self.problem}. {self.advice}"


def find_damage(
    directory: Path,
    *,
    check_state: Callable[[JsonObject], object],
    check_event: Callable[[JsonObject], object],
) -> Damage | None:
    """The first file of `directory` the SDK cannot read, or None if every file reads.

    `check_state` validates base_state.json's object, `check_event` an event file's;
    each raises (pydantic's ValidationError, ...) on what the SDK would refuse.
    """
    delete = f"or delete the session (session/delete, or remove {directory})"
    base = directory / BASE_STATE
    if os.path.lexists(base):
        problem = _check_file(base, check_state, empty_ok=True)
        if problem is not None:
            advice = (
                f"Move that file away to open the session from its history with default "
                f"settings, {delete}."
            )
            return Damage(base, problem, advice)
    for path in event_files(directory / EVENTS_DIR):
        problem = _check_file(path, check_event, empty_ok=False)
        if problem is not None:
            # Later events name their parents, and base_state.json the last one: all of
            # them go, or the SDK looks for what was moved.
            advice = (
                f"To open the history before it (with default settings), move that file, "
                f"the event files after it and {BASE_STATE} out of {directory}, {delete}."
            )
            return Damage(path, problem, advice)
    return None


def base_damage(directory: Path, *, check_state: Callable[[JsonObject], object]) -> bool:
    """Whether `base_state.json` is one the SDK would refuse (`find_damage` says how)."""
    base = directory / BASE_STATE
    return os.path.lexists(base) and _check_file(base, check_state, empty_ok=True) is not None


def event_files(events_dir: Path) -> list[Path]:
    """The event files the SDK reads: by index, up to the first missing one."""
    try:
        names = [p.name for p in events_dir.iterdir()]
    except OSError:
        return []
    by_index = {}
    for name in names:
        m = EVENT_NAME.match(name)
        if m:
            by_index[int(m.group("idx"))] = events_dir / name
    files: list[Path] = []
    while len(files) in by_index:
        files.append(by_index[len(files)])
    return files


def _check_file(path: Path, check: Callable[[JsonObject], object], *, empty_ok: bool) -> str | None:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return f"cannot be read ({exc.strerror or type(exc).__name__})"
    except UnicodeDecodeError:
        return "is not UTF-8 text"
    if not text.strip():
        return None if empty_ok else "is empty"
    try:
        data = loads_json(text)  # nested too deeply: a ValueError too
    except ValueError as exc:
        if isinstance(exc, json.JSONDecodeError):
            return f"is not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno}; the file may be truncated)"
        return f"is not valid JSON ({exc})"
    if not isinstance(data, dict):
        return f"does not hold a JSON object (it holds a JSON {_json_kind(data)})"
    try:
        check(data)
    except Exception as exc:
        unknown = _unknown_kind(exc, data)
        if unknown == "":
            return 'has no event "kind"'
        if unknown is not None:
            return (
                f"holds an event of a kind this OpenHands version does not know ({unknown!r}; "
                f"written by another version?)"
            )
        return f"does not match what this OpenHands version expects ({validation_summary(exc)})"
    return None


def validation_summary(exc: Exception) -> str:
    """pydantic's first complaint as `field: message`, else the exception's first line."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            where = ".".join(str(part) for part in first.get("loc", ())) or "the file"
            more = len(errors()) - 1
            msg = " ".join(str(first.get("msg")).split())[:200]
            return f"{where}: {msg}" + (f"; and {more} more problem(s)" if more > 0 else "")
        except Exception:
            pass
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _unknown_kind(exc: Exception, data: JsonObject) -> str | None:
    # The SDK's events are a union tagged by "kind"; its validator refuses a tag it does
    # not know with "Unknown kind '<tag>' for ...".
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        found = errors()
    except Exception:
        return None
    if any("Unknown kind" in str(e.get("msg", "")) for e in found):
        kind = data.get("kind")
        return kind if isinstance(kind, str) else ""
    return None


def _json_kind(data: object) -> str:
    if isinstance(data, list):
        return "list"
    if isinstance(data, str):
        return "string"
    if isinstance(data, bool):
        return "boolean"
    if data is None:
        return "null"
    return "number"
