"""Sessions on disk: the SDK's conversation directories, plus a small index file of ours.

Layout (the SDK's, so an OpenHands user's conversations are ours too):
`<persistence dir>/conversations/<session id as hex>/base_state.json` and `events/`.
We add `trio_acp_session.json` (cwd, title, last update for `session/list`; the session's
config option values — approval mode, model, reasoning effort — for load/resume), and
`trio_acp_rules.json` (the "always" permission rules), and `trio_acp_turn.jsonl` (the running
turn's journal, journal.py). A conversation without our index
(made by the OpenHands CLI) is still listed, from `base_state.json`. A session whose
conversation lives on an agent-server has only our files here; its index names the server
(`agentServer`, its URL) and the conversation there has the session's id
(docs/agent-server.md, "Sessions and the server's conversations").

Session ids are UUIDs and are parsed before they touch a path. A damaged directory costs
its own entry, never the list: one whose `base_state.json` cannot be read is listed with
a "[damaged]" title (when our index knows its cwd) so the user can see it and delete it.

`session/list` keeps what it parsed in `.trio_acp_list.json` in the conversations directory
(list_cache.py), so a new process's first list does not read every session's files
again; each entry is checked against its files' stamps before it is used (`SessionStore.list`),
and never outranks them: what a page shows is read from them (`SessionStore._vouch`), and
so are the cwd and archive mark of a session a filter leaves out (`SessionStore._vouch_cwds`). A
cache file that cannot be read, or that disagrees with a session's files, is set aside
(`SET_ASIDE_CACHE_FILE`) and rebuilt. Any file here may hold anything (a crash, a hand
edit, a hostile tool): JSON nested deeper than the parser goes is invalid JSON like any
other (small_files.py), titles are cleaned before they are shown (translate/text.py,
`clean_title`), and a value no frame can carry (a lone surrogate) is not listed.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import attrs

from trio_acp.openhands.editor.session_roots import SessionRoots, roots_from_index, with_roots
from trio_acp.openhands.sessions.damage import BASE_STATE, EVENTS_DIR, event_files
from trio_acp.openhands.sessions.list_cache import (
    DAMAGED,
    LIST_CACHE_FILE,
    LISTINGS,
    RACY_NS,
    SET_ASIDE_CACHE_FILE,
    Listing,
    StoredSession,
    is_abs_path,
    is_timestamp,
    is_wire_text,
    load_cache,
    save_cache,
    set_aside_cache,
    stamp,
)
from trio_acp.openhands.sessions.small_files import loads_json, read_bytes
from trio_acp.openhands.translate.shapes import JsonObject
from trio_acp.openhands.translate.text import clean_title

log = logging.getLogger(__name__)

INDEX_FILE = "trio_acp_session.json"
# The index key naming the agent-server of a remote session.
AGENT_SERVER = "agentServer"
RULES_FILE = "trio_acp_rules.json"
# The index key of an archived session (`session/archive`, sessions/archive.py).
ARCHIVED = "archived"
# session/list's `archived` filter: which archive states each value lists.
ARCHIVE_FILTERS: dict[str, frozenset[bool]] = {
    "exclude": frozenset({False}),
    "include": frozenset({False, True}),
    "only": frozenset({True}),
}
PAGE_SIZE = 50
# Named here too, for the modules that know sessions by this one.
__all__ = [
    "AGENT_SERVER",
    "ARCHIVED",
    "ARCHIVE_FILTERS",
    "DAMAGED",
    "INDEX_FILE",
    "LIST_CACHE_FILE",
    "PAGE_SIZE",
    "RULES_FILE",
    "SET_ASIDE_CACHE_FILE",
    "DeleteError",
    "SessionStore",
    "StoredSession",
    "now_iso",
    "parse_session_id",
]


class DeleteError(Exception):
    """A session's directory could not be removed; the message names what is left."""


def parse_session_id(session_id: object) -> uuid.UUID | None:
    """The UUID of a session id in its one canonical form (what `session/new` answered:
    lower-case, dashed), else None. `uuid.UUID` also reads `{...}`, `urn:uuid:...`,
    upper-case and dash-less forms: each would open the same session under an id the
    client never got, so that two ids would name one session."""
    if not isinstance(session_id, str) or len(session_id) != 36:
        return None
    try:
        sid = uuid.UUID(session_id)
    except ValueError:
        return None
    return sid if str(sid) == session_id else None


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@attrs.frozen
class _Walk:
    """The order of a first page's list, which the pages after it follow (`SessionStore.list`)."""

    root: str
    cwd: str | None
    archived: str  # the list's archive filter (ARCHIVE_FILTERS)
    names: tuple[str, ...]  # session directory names, in the list's order
    until: float  # time.monotonic() past which it is forgotten


# Walks through the pages of a list, by the id their cursors carry. A client walks its pages
# in quick succession; one that comes back later starts from the first page or gets a page
# checked in full (an unknown walk, as from another process, costs nothing but that time).
_WALKS: dict[str, _Walk] = {}
_WALK_SECONDS = 120.0
_WALKS_KEPT = 32


class SessionStore:
    def __init__(self, conversations_dir: Path) -> None:
        self.root = conversations_dir
        # session/list reads two JSON files per session; an editor lists often and pages
        # through. Parsed entries are kept per directory, keyed on the stamps of what they
        # were read from (base_state.json, our index, the events directory, whose mtime
        # moves when an event file is added or removed), so a list re-reads only what changed.
        # Shared by every store of this directory (the agent makes one per request), and
        # saved for the next process (LIST_CACHE_FILE).
        self._listing = LISTINGS.setdefault(str(conversations_dir), Listing())

    def dir_for(self, sid: uuid.UUID) -> Path:
        return self.root / sid.hex

    def exists(self, sid: uuid.UUID) -> bool:
        # Without base_state.json (or with an empty one) the SDK opens a conversation from
        # its events with default settings; a damaged one is still this session's, for
        # session/load to say what is wrong with it.
        directory = self.dir_for(sid)
        return (
            os.path.lexists(directory / BASE_STATE)
            or bool(event_files(directory / EVENTS_DIR))
            or self.agent_server(sid) is not None
        )

    def agent_server(self, sid: uuid.UUID) -> str | None:
        """The URL of the agent-server the session's conversation lives on (None: here)."""
        url = self._index(sid).get(AGENT_SERVER)
        return url if isinstance(url, str) else None

    def write_agent_server(self, sid: uuid.UUID, url: str) -> None:
        data = self._index(sid)
        data[AGENT_SERVER] = url
        self._write_index(sid, data)

    def write_index(
        self,
        sid: uuid.UUID,
        *,
        cwd: str,
        title: str | None = None,
        roots: SessionRoots | None = None,
    ) -> None:
        data = self._index(sid)
        data["cwd"] = cwd
        if roots is not None:
            data = with_roots(data, roots)
        if title and not data.get("title"):
            data["title"] = title
        data["updatedAt"] = now_iso()
        self._write_index(sid, data)

    def write_title(self, sid: uuid.UUID, title: str) -> None:
        """Set the session's title (`session/set_title`), replacing the one it had."""
        data = self._index(sid)
        data["title"] = title
        self._write_index(sid, data)

    def write_archived(self, sid: uuid.UUID, archived: bool) -> None:
        """Archive the session or bring it back (sessions/archive.py); its files stay, and
        `updatedAt` too (archiving is no activity of the session's)."""
        data = self._index(sid)
        if (data.get(ARCHIVED) is True) == archived:
            return  # already so: the index is not rewritten
        if archived:
            data[ARCHIVED] = True
        else:
            data.pop(ARCHIVED, None)
        self._write_index(sid, data)

    def read_options(self, sid: uuid.UUID) -> dict[str, str | bool]:
        """The session's saved config option values (configId → value); {} if none."""
        options = self._index(sid).get("configOptions")
        if not isinstance(options, dict):
            return {}
        return {
            k: v for k, v in options.items() if isinstance(k, str) and isinstance(v, (str, bool))
        }

    def write_options(self, sid: uuid.UUID, options: dict[str, str | bool]) -> None:
        """Save the config option values (not an update of the session: `updatedAt` stays)."""
        data = self._index(sid)
        data["configOptions"] = options
        self._write_index(sid, data)

    def _index(self, sid: uuid.UUID) -> JsonObject:
        return _read_json(self.dir_for(sid) / INDEX_FILE) or {}

    def _write_index(self, sid: uuid.UUID, data: JsonObject) -> None:
        path = self.dir_for(sid) / INDEX_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        # Whole or not at all: a crash mid-write must not cost the session its index.
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)

    def read(self, directory: Path | str) -> StoredSession | None:
        directory = os.fspath(directory)
        try:
            sid = uuid.UUID(hex=os.path.basename(directory))
        except ValueError:
            return None
        try:
            return self._read(directory, sid)
        except (OSError, ValueError) as exc:
            # Files vanishing or unreadable mid-listing: this entry goes, the list stays.
            log.warning("skipping %s in the session list: %s", directory, exc)
            return None

    def _read_cached(
        self, path: str, name: str, seen: set[str], now_ns: int
    ) -> StoredSession | None:
        # Plain strings, not Path objects: with 1,000 sessions pathlib's overhead was most
        # of a cached list's time. The caller holds the listing's lock.
        seen.add(name)
        stamps = (
            stamp(f"{path}/{BASE_STATE}"),
            stamp(f"{path}/{INDEX_FILE}"),
            stamp(f"{path}/{EVENTS_DIR}"),
        )
        listing = self._listing
        cached = listing.entries.get(name)
        if cached is not None and cached[0] == stamps:
            return cached[1]
        stored = self.read(path)
        listing.borrowed.discard(name)
        if any(s is not None and s[1] > now_ns - RACY_NS for s in stamps):
            # Changed just now: read again next time (RACY_NS).
            if listing.entries.pop(name, None) is not None:
                listing.dirty = True
        else:
            # An entry read while its files changed is stored under the stamps taken before
            # the read, so the next list sees the difference and reads it again.
            listing.entries[name] = (stamps, stored)
            listing.dirty = True
        return stored

    def _read(self, directory: str, sid: uuid.UUID) -> StoredSession | None:
        base_path = f"{directory}/{BASE_STATE}"
        base = _read_json(base_path)
        damaged = base is None and os.path.lexists(base_path) and not _is_empty_file(base_path)
        index = _read_json(f"{directory}/{INDEX_FILE}") or {}
        remote = isinstance(index.get(AGENT_SERVER), str)
        events_dir = Path(directory, EVENTS_DIR)
        if base is None and not damaged and not remote and not event_files(events_dir):
            return None  # not a conversation
        cwd = _session_cwd(index, lambda: base)
        if cwd is None:
            return None
        updated = index.get("updatedAt")
        if not is_timestamp(updated):
            stamps = [p.stat().st_mtime for p in events_dir.glob("*.json")]
            when = (
                max(stamps)
                if stamps
                else os.lstat(base_path if os.path.lexists(base_path) else directory).st_mtime
            )
            updated = (
                dt.datetime.fromtimestamp(when, dt.UTC)
                .isoformat(timespec="seconds")
                .replace("+00:00", "Z")
            )
        raw_title = index.get("title")
        title = clean_title(raw_title) if isinstance(raw_title, str) else None
        if title is None and not index:
            # A conversation another OpenHands client made (the CLI): titled, as the CLI
            # titles it, by its first user message.
            first = _first_user_text(events_dir)
            title = clean_title(first) if first is not None else None
        if damaged:
            title = f"{DAMAGED} {title or 'untitled session'}"
        roots = [d for d in roots_from_index(index) if is_wire_text(d)]
        return StoredSession(str(sid), cwd, title, updated, roots, index.get(ARCHIVED) is True)

    def _walk_page(
        self, walk: _Walk, walk_id: str, offset: int, cwd: str | None
    ) -> tuple[list[StoredSession], str | None]:
        page: list[tuple[StoredSession, str]] = []
        states = ARCHIVE_FILTERS[walk.archived]
        now_ns = time.time_ns()
        with self._listing.lock:
            for name in walk.names[offset : offset + PAGE_SIZE]:
                path = os.path.join(walk.root, name)
                # Not in `seen`: pruning the cache of deleted sessions is a full list's job.
                stored = (
                    self._read_cached(path, name, set(), now_ns) if os.path.isdir(path) else None
                )
                if (
                    stored is not None
                    and stored.archived in states
                    and (cwd is None or os.path.normpath(stored.cwd) == os.path.normpath(cwd))
                ):
                    page.append((stored, name))
        if not self._vouch(page):
            return self._walk_page(walk, walk_id, offset, cwd)  # now read from the files
        more = offset + PAGE_SIZE < len(walk.names)
        return [stored for stored, _ in page], (
            _encode_cursor(offset + PAGE_SIZE, walk_id) if more else None
        )

    def _vouch(self, shown: list[tuple[StoredSession, str]]) -> bool:
        """Whether the entries a page shows agree with their sessions' files.

        The cache file only saves reading: what a list shows must be what the session's
        own files say, so each entry taken from it is read from its files (once per
        process) before a page shows it. A page is at most PAGE_SIZE sessions, a few
        milliseconds. An entry that does not agree means the cache file is not what this
        process's lists wrote (hand-made, another program's, a stamp that lied): every
        entry it gave is dropped, the file set aside, and False tells the caller to list
        again from the files.
        """
        listing = self._listing
        with listing.lock:
            for stored, name in shown:
                if name not in listing.borrowed:
                    continue
                fresh = self.read(os.path.join(self.root, name))
                if fresh != stored:
                    self._distrust(f"its entry for {name} does not match that session's files")
                    return False
                listing.borrowed.discard(name)
        return True

    def _vouch_cwds(self, left_out: list[tuple[StoredSession, str]]) -> bool:
        """Whether the sessions a cwd or archive filter left out on the cache file's word
        are in another cwd, or archived otherwise, by their own files.

        `_vouch` reads what a page shows; a session the filter left out is shown by no
        page, so a cache entry that moved it to another cwd (or archived it) would hide
        it from its own cwd's list. Only its cwd and archive mark are read (its index, or
        base_state.json when the index names no cwd), once per process; a mismatch is
        handled as `_vouch`'s is.
        """
        listing = self._listing
        with listing.lock:
            for stored, name in left_out:
                if name not in listing.borrowed or name in listing.cwd_vouched:
                    continue
                directory = os.path.join(self.root, name)
                try:
                    index = _read_json(f"{directory}/{INDEX_FILE}") or {}
                    cwd = _session_cwd(
                        index, functools.partial(_read_json, f"{directory}/{BASE_STATE}")
                    )
                except (OSError, ValueError):
                    index, cwd = {}, None
                if cwd != stored.cwd or (index.get(ARCHIVED) is True) != stored.archived:
                    self._distrust(f"its entry for {name} names another cwd or mark than its files")
                    return False
                listing.cwd_vouched.add(name)
        return True

    def _distrust(self, why: str) -> None:
        """Drop what the cache file gave and set the file aside (the caller holds the lock)."""
        listing = self._listing
        for name in listing.borrowed:
            listing.entries.pop(name, None)
        listing.borrowed.clear()
        listing.cwd_vouched.clear()
        listing.dirty = True
        set_aside_cache(str(self.root), why)

    def list(
        self, cwd: str | None, cursor: str | None, archived: str = "exclude"
    ) -> tuple[list[StoredSession], str | None]:
        """One page of sessions, newest first; raises ValueError for a cursor we did not make.

        `archived` (ARCHIVE_FILTERS) picks sessions by archive state before the pages are
        cut, as the unstable `session/list` filter asks: archived ones are left out unless
        asked for (sessions/archive.py).

        A first page checks every session's files (`_read_cached`); its cursor names a walk
        that keeps the order it found, and the pages after it follow that order, checking
        only the sessions they show. Walking 20 pages of 1,000 sessions took 20 full checks
        (1.0-1.8 s here, bench/README.md "Big histories"); the pages now cost what they
        show. Each session a page shows is read as it is now (a change to it is seen, a
        deleted one or one moved to another cwd is left out, so a page can be short), and
        the walk shows every session of the first page's list once, in that list's order: a
        session updated or created mid-walk cannot push another onto two pages or off all
        of them, as an offset into a list re-sorted for every page would.

        A process's first list starts from the entries the last one saved (LIST_CACHE_FILE),
        each used only if its files' stamps are still the ones it was read under: reading
        1,000 sessions' files cost a new process's first page about 1 s here, checking their
        stamps costs what a warm list does (bench/README.md "Big histories").
        """
        offset, walk_id = _decode_cursor(cursor) if cursor else (0, None)
        root = str(self.root)
        now = time.monotonic()
        if walk_id is not None:
            walk = _WALKS.get(walk_id)
            if (
                walk is not None
                and walk.root == root
                and walk.cwd == cwd
                and walk.archived == archived
                and now < walk.until
            ):
                return self._walk_page(walk, walk_id, offset, cwd)
        states = ARCHIVE_FILTERS[archived]
        found: list[tuple[StoredSession, str]] = []  # and its directory's name
        # Left out by the cwd or archive filter on the cache file's word alone (`_vouch_cwds`).
        left_out: list[tuple[StoredSession, str]] = []
        seen: set[str] = set()
        try:
            entries = list(os.scandir(self.root))
        except (FileNotFoundError, NotADirectoryError):
            entries = []
        listing = self._listing
        with listing.lock:
            if not listing.loaded:
                listing.loaded = True
                if entries:
                    cached = load_cache(root)
                    if cached is None:
                        set_aside_cache(root, "it cannot be read")
                    else:
                        listing.entries.update(cached)
                        listing.borrowed.update(cached)
            now_ns = time.time_ns()
            for entry in entries:
                if entry.is_dir():
                    stored = self._read_cached(entry.path, entry.name, seen, now_ns)
                    if stored is None:
                        continue
                    if stored.archived not in states:
                        if entry.name in listing.borrowed:
                            left_out.append((stored, entry.name))
                        continue
                    if cwd is None or os.path.normpath(stored.cwd) == os.path.normpath(cwd):
                        found.append((stored, entry.name))
                    elif entry.name in listing.borrowed:
                        left_out.append((stored, entry.name))
            for name in listing.entries.keys() - seen:
                listing.entries.pop(name, None)  # deleted since the last list
                listing.borrowed.discard(name)
                listing.dirty = True
            saving = dict(listing.entries) if listing.dirty and entries else None
            listing.dirty = False
        if saving is not None:
            save_cache(root, saving)
        if not self._vouch_cwds(left_out):
            return self.list(cwd, cursor, archived)  # now read from the files
        found.sort(key=lambda f: (f[0].updated_at, f[0].session_id), reverse=True)
        if not self._vouch(found[offset : offset + PAGE_SIZE]):
            return self.list(cwd, cursor, archived)  # now read from the files
        page = [stored for stored, _ in found[offset : offset + PAGE_SIZE]]
        if offset + PAGE_SIZE >= len(found):
            return page, None
        for old_id, old in list(_WALKS.items()):
            if now >= old.until or len(_WALKS) >= _WALKS_KEPT:
                _WALKS.pop(old_id, None)  # expired, or the oldest of too many
        walk_id = uuid.uuid4().hex
        _WALKS[walk_id] = _Walk(
            root, cwd, archived, tuple(name for _, name in found), now + _WALK_SECONDS
        )
        return page, _encode_cursor(offset + PAGE_SIZE, walk_id)

    def delete(self, sid: uuid.UUID) -> None:
        """Remove the session's directory; raises DeleteError naming what could not go."""
        directory = self.dir_for(sid)
        failures: list[str] = []

        def note(function: Callable[..., object], path: str, exc: BaseException) -> None:
            if not isinstance(exc, FileNotFoundError):
                failures.append(f"{path} ({getattr(exc, 'strerror', None) or exc})")

        shutil.rmtree(directory, onexc=note)
        if failures and os.path.lexists(directory):
            raise DeleteError(
                f"could not remove {failures[0]}"
                + (f" and {len(failures) - 1} more" if len(failures) > 1 else "")
                + f"; remove {directory} by hand"
            )


def _first_user_text(events_dir: Path, *, look_at: int = 50) -> str | None:
    for path in event_files(events_dir)[:look_at]:
        event = _read_json(path)
        if not event or event.get("kind") != "MessageEvent" or event.get("source") != "user":
            continue
        content = (event.get("llm_message") or {}).get("content") or []
        text = " ".join(
            item["text"]
            for item in content
            if isinstance(item, dict) and isinstance(item.get("text"), str)
        )
        words = " ".join(text.split())
        if words:
            return words if len(words) <= 80 else words[:79].rstrip() + "…"
    return None


def _session_cwd(index: JsonObject, base: Callable[[], JsonObject | None]) -> str | None:
    """A session's cwd: its index's, else its conversation's working directory (`base`
    reads base_state.json, only when needed); None if neither is an absolute path."""
    cwd = index.get("cwd")
    if is_abs_path(cwd):
        return cwd
    workspace = (base() or {}).get("workspace")
    cwd = workspace.get("working_dir") if isinstance(workspace, dict) else None
    return cwd if is_abs_path(cwd) else None


def _read_json(path: Path | str) -> JsonObject | None:
    try:
        # Without a text-mode file object, a third of reading 1,000 small files (small_files.py).
        data = loads_json(read_bytes(path).decode("utf-8"))
    except (OSError, ValueError):  # nested too deeply included (loads_json)
        return None
    return data if isinstance(data, dict) else None


def _is_empty_file(path: str) -> bool:
    try:
        return os.path.isfile(path) and not Path(path).read_text(encoding="utf-8").strip()
    except (OSError, ValueError):
        return False


def _encode_cursor(offset: int, walk_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset, "w": walk_id}).encode()).decode()


def _decode_cursor(cursor: str) -> tuple[int, str | None]:
    """The offset and the walk a cursor names (None: a cursor of an older version)."""
    try:
        data = loads_json(base64.urlsafe_b64decode(cursor.encode()))
        offset, walk_id = data["o"], data.get("w")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ValueError(f"invalid cursor {cursor[:80]!r}") from None
    if (
        not isinstance(offset, int)
        or offset < 0
        or not (walk_id is None or isinstance(walk_id, str))
    ):
        raise ValueError(f"invalid cursor {cursor[:80]!r}")
    return offset, walk_id
