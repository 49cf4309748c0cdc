"""Sessions on disk: the SDK's conversation directories, plus a small index file of ours.

Layout (the SDK's, so an OpenHands user's conversations are ours too):
`<persistence dir>/conversations/<session id as hex>/base_state.json` and `events/`.
We add `trio_acp_session.json` (cwd, title, last update for `session/list`; the session's
config option values — approval mode, model, reasoning effort — for load/resume), and
`trio_acp_rules.json` (the "always" permission rules). A conversation without our index
(made by the OpenHands CLI) is still listed, from `base_state.json`.

Session ids are UUIDs and are parsed before they touch a path.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import attrs

INDEX_FILE = "trio_acp_session.json"
RULES_FILE = "trio_acp_rules.json"
PAGE_SIZE = 50


def parse_session_id(session_id: Any) -> uuid.UUID | None:
    if not isinstance(session_id, str) or len(session_id) > 64:
        return None
    try:
        return uuid.UUID(session_id)
    except ValueError:
        return None


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@attrs.define
class StoredSession:
    session_id: str
    cwd: str
    title: str | None
    updated_at: str


class SessionStore:
    def __init__(self, conversations_dir: Path) -> None:
        self.root = conversations_dir

    def dir_for(self, sid: uuid.UUID) -> Path:
        return self.root / sid.hex

    def exists(self, sid: uuid.UUID) -> bool:
        return (self.dir_for(sid) / "base_state.json").is_file()

    def write_index(self, sid: uuid.UUID, *, cwd: str, title: str | None = None) -> None:
        data = self._index(sid)
        data["cwd"] = cwd
        if title and not data.get("title"):
            data["title"] = title
        data["updatedAt"] = now_iso()
        self._write_index(sid, data)

    def read_options(self, sid: uuid.UUID) -> dict[str, Any]:
        """The session's saved config option values (configId → value); {} if none."""
        options = self._index(sid).get("configOptions")
        if not isinstance(options, dict):
            return {}
        return {k: v for k, v in options.items() if isinstance(k, str) and isinstance(v, (str, bool))}

    def write_options(self, sid: uuid.UUID, options: dict[str, Any]) -> None:
        """Save the config option values (not an update of the session: `updatedAt` stays)."""
        data = self._index(sid)
        data["configOptions"] = options
        self._write_index(sid, data)

    def _index(self, sid: uuid.UUID) -> dict[str, Any]:
        return _read_json(self.dir_for(sid) / INDEX_FILE) or {}

    def _write_index(self, sid: uuid.UUID, data: dict[str, Any]) -> None:
        path = self.dir_for(sid) / INDEX_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        # Whole or not at all: a crash mid-write must not cost the session its index.
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)

    def read(self, directory: Path) -> StoredSession | None:
        try:
            sid = uuid.UUID(hex=directory.name)
        except ValueError:
            return None
        base = _read_json(directory / "base_state.json")
        if base is None:
            return None
        index = _read_json(directory / INDEX_FILE) or {}
        cwd = index.get("cwd") or (base.get("workspace") or {}).get("working_dir")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            return None
        updated = index.get("updatedAt")
        if not isinstance(updated, str):
            mtime = max((p.stat().st_mtime for p in (directory / "events").glob("*.json")), default=None)
            stamp = mtime if mtime is not None else (directory / "base_state.json").stat().st_mtime
            updated = dt.datetime.fromtimestamp(stamp, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        title = index.get("title") if isinstance(index.get("title"), str) else None
        return StoredSession(str(sid), cwd, title, updated)

    def list(self, cwd: str | None, cursor: str | None) -> tuple[list[StoredSession], str | None]:
        """One page of sessions, newest first; raises ValueError for a cursor we did not make."""
        offset = _decode_cursor(cursor) if cursor else 0
        found: list[StoredSession] = []
        if self.root.is_dir():
            for directory in self.root.iterdir():
                stored = self.read(directory) if directory.is_dir() else None
                if stored is not None and (cwd is None or os.path.normpath(stored.cwd) == os.path.normpath(cwd)):
                    found.append(stored)
        found.sort(key=lambda s: (s.updated_at, s.session_id), reverse=True)
        page = found[offset : offset + PAGE_SIZE]
        more = offset + PAGE_SIZE < len(found)
        return page, (_encode_cursor(offset + PAGE_SIZE) if more else None)

    def delete(self, sid: uuid.UUID) -> None:
        shutil.rmtree(self.dir_for(sid), ignore_errors=True)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _decode_cursor(cursor: str) -> int:
    try:
        offset = json.loads(base64.urlsafe_b64decode(cursor.encode()))["o"]
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"invalid cursor {cursor!r}") from None
    if not isinstance(offset, int) or offset < 0:
        raise ValueError(f"invalid cursor {cursor!r}")
    return offset
