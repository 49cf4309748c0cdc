"""The public skills (the OpenHands extensions repository), fetched at most once per process.

The SDK fetches them (a git clone, then a fetch) whenever an `AgentContext` with
`load_public_skills=True` is validated: twice for every session we build (the context,
then the `Agent` holding it). It keeps a success for 60 s and a failure not at all, so
offline every session tried twice and logged the git error and two warnings each time.

Here they are fetched once per process and kept for its life; the session's context gets
them as skills of its own, below the user's and the project's (the SDK's order: public <
user < project), with `load_public_skills=False`, so no validation fetches again. A failure
is logged once, in one line (a warning the first time, INFO while it goes on), and
remembered for `RETRY_AFTER` seconds, in this process and in a file in trio-acp's
persistence directory (never HOME: nothing of ours is written
outside it): the launches that follow (a headless client starts one per command) skip the
attempt until then. With `EXTENSIONS_PATH` (a local copy, read
instead of a clone) nothing is fetched and nothing remembered.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from trio_acp.openhands.sessions.small_files import loads_json

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import Skill

log = logging.getLogger(__name__)

#: Seconds a failed fetch is remembered (by this process and, through a file, by others).
RETRY_AFTER = 600.0
#: The file remembering a failure, in the persistence directory.
MARKER = "public-skills.unreachable"
# The SDK modules whose records about the fetch are folded into our one line.
_SDK_LOGGERS = (
    "openhands.sdk.git.utils",
    "openhands.sdk.git.cached_repo",
    "openhands.sdk.skills.skill",
)

_lock = threading.Lock()
_loaded: list[Skill] | None = None
_failed_at: float | None = None  # time.time() of this process's failed attempt


def public_skills(state_dir: Path | None = None) -> list[Skill]:
    """The public skills (SDK `Skill`s); blocking, the first call fetches them. A failure
    is remembered in `state_dir` (the persistence directory) for other processes."""
    global _loaded, _failed_at
    with _lock:  # sessions built at once wait for the one attempt
        if _loaded is not None:
            return list(_loaded)
        if _failed_at is not None and time.time() - _failed_at < RETRY_AFTER:
            return []
        skills, failed_at = _fetch(state_dir)
        if failed_at is None:
            _loaded, _failed_at = skills, None
            return list(skills)
        _failed_at = failed_at
        return []


def _reset() -> None:
    """Forget what this process knows (tests: a new process)."""
    global _loaded, _failed_at
    with _lock:
        _loaded, _failed_at = None, None


def _fetch(state_dir: Path | None) -> tuple[list[Skill], float | None]:
    """(skills, None), or ([], when it failed) when they could not be had."""
    from trio_acp.openhands.sdk import agent_setup

    local, ref = agent_setup.public_skills_source()
    marker = None if local or state_dir is None else Path(state_dir) / MARKER
    if marker is not None and (known := _recent_failure(marker, ref)) is not None:
        when, why = known
        log.info(
            "public skills skipped: fetching them failed %d s ago (%s)", time.time() - when, why
        )
        return [], when
    with _held(_SDK_LOGGERS) as records:
        try:
            skills = agent_setup.load_public_skills()
        except Exception as exc:  # the SDK catches its own; anything else is a failure too
            skills = []
            records.append(logging.makeLogRecord({"levelno": logging.ERROR, "msg": str(exc)}))
    for record in records:  # the SDK's own words, for whoever runs at debug level
        log.debug("public skills: %s", record.getMessage())
    problems = [r for r in records if r.levelno >= logging.WARNING]
    if skills or not problems:
        if problems:
            log.info("public skills: the cached copy (not updated: %s)", _reason(problems))
        if marker is not None:
            marker.unlink(missing_ok=True)
        return skills, None
    why = _reason(problems)
    # A warning the first time; while the failure goes on (the marker is kept until a fetch
    # succeeds), the attempts every RETRY_AFTER say it at INFO: an offline machine is not
    # news each time a launch tries again.
    level = logging.INFO if marker is not None and marker.exists() else logging.WARNING
    log.log(
        level,
        "public skills not loaded (%s); sessions start without them, and no process tries "
        "again for %d min (TRIO_ACP_PUBLIC_SKILLS=0 turns them off)",
        why,
        RETRY_AFTER // 60,
    )
    now = time.time()
    if marker is not None:
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps({"time": now, "ref": ref, "reason": why}))
        except OSError:
            log.debug("could not write %s", marker, exc_info=True)
    return [], now


def _recent_failure(marker: Path, ref: str) -> tuple[float, str] | None:
    """(time, reason) of an earlier attempt's failure within `RETRY_AFTER`, or None."""
    try:
        known = loads_json(marker.read_text())
        when = float(known["time"])
        if known.get("ref") == ref and 0 <= time.time() - when < RETRY_AFTER:
            return when, str(known.get("reason") or "unknown")
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _reason(records: list[logging.LogRecord]) -> str:
    """The most telling line: git's `fatal: …`, else the first problem's first line."""
    for record in records:
        for line in record.getMessage().splitlines():
            if line.startswith("fatal:"):
                return line[len("fatal:") :].strip()[:300]
    return records[0].getMessage().splitlines()[0][:300] if records else "unknown"


class _Hold(logging.Filter):
    """Keeps (and stops) the records this thread logs; other threads' pass."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.thread:
            return True
        self.records.append(record)
        return False


@contextmanager
def _held(names: tuple[str, ...]) -> Iterator[list[logging.LogRecord]]:
    hold = _Hold()
    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addFilter(hold)
    try:
        yield hold.records
    finally:
        for logger in loggers:
            logger.removeFilter(hold)
