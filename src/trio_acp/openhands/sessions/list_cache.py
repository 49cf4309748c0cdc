"""`session/list`'s cache file: what a list parsed of each session, kept for the next process.

`.trio_acp_list.json` in the conversations directory (`LIST_CACHE_FILE`) keeps, per session
directory, the stamps of its files (`stamp`: inode, mtime, size of base_state.json, our
index, the events directory) and what was read from them (`StoredSession`). A new process's
first list uses an entry only while its files keep those stamps, and never shows one it has
not read itself (`SessionStore._vouch` in store.py): the cache only saves reading, it never
speaks for a session against its own files. A cache file that cannot be read, or that was
caught disagreeing with a session's files, is set aside (`SET_ASIDE_CACHE_FILE`) and rebuilt.

Every value taken from the file is checked as strictly as the session's own files are
(`is_abs_path`, `is_timestamp`, `is_wire_text`, titles cleaned as translate/text.py cleans
them): a damaged or hand-edited cache costs reading the sessions it gets wrong, never a
wrong entry.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import threading
import uuid
from typing import TypeGuard

import attrs

from trio_acp import __version__
from trio_acp.openhands.sessions.small_files import loads_json, read_bytes
from trio_acp.openhands.translate.shapes import JsonValue
from trio_acp.openhands.translate.text import clean_title

log = logging.getLogger(__name__)

# A file (a dot file, so that no one takes it for a conversation) that only saves reading;
# deleting it loses nothing.
LIST_CACHE_FILE = ".trio_acp_list.json"
# Where a cache file that cannot be read, or that was caught lying, is set aside (the last
# one only), for whoever wants to see what it was; the list is rebuilt from the sessions.
SET_ASIDE_CACHE_FILE = LIST_CACHE_FILE + ".damaged"
# The title mark of a session whose base_state.json cannot be read (store.py lists it).
DAMAGED = "[damaged]"


@attrs.define
class StoredSession:
    session_id: str
    cwd: str
    title: str | None
    updated_at: str
    # The last additionalDirectories the session was opened with (session_roots.py).
    additional_directories: list[str] = attrs.Factory(list)
    # Archived by `session/archive` (sessions/archive.py): hidden from default lists.
    archived: bool = False


# A file's identity for the listing cache: replaced (new inode), rewritten (mtime, size) or
# gone (None) all change it.
Stamp = tuple[int, int, int] | None
Stamps = tuple[Stamp, Stamp, Stamp]  # base_state.json, our index, the events directory


def stamp(path: str) -> Stamp:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


# A stamp cannot tell two versions of a file apart that were written within one tick of the
# file system's clock (a directory that gains a file, a file rewritten in place at the same
# size): an entry whose files changed less than this before they were stamped is not kept,
# the next list reads it again (git's "racy" entries). Two seconds covers the coarsest
# clocks (FAT's); a session changed that recently costs one read per list.
RACY_NS = 2_000_000_000

# The cache file's format: a cache of another format or another version of trio-acp (whose
# reading of a session may differ) is not used. Bump it when `_read`'s result changes.
_CACHE_FORMAT = f"2/{__version__}"


@attrs.define
class Listing:
    """The parsed entries of one conversations directory, shared by its stores."""

    # directory name -> the stamps it was read under, and what it read
    entries: dict[str, tuple[Stamps, StoredSession | None]] = attrs.Factory(dict)
    loaded: bool = False  # the cache file has been read
    dirty: bool = False  # entries differ from what the cache file holds
    # Entries taken from the cache file and not yet read from their sessions' files by
    # this process: they order and filter a list, but a page shows none of them unread
    # (`SessionStore._vouch`).
    borrowed: set[str] = attrs.Factory(set)
    # Borrowed entries whose cwd was read from their files (`SessionStore._vouch_cwds`).
    cwd_vouched: set[str] = attrs.Factory(set)
    # Lists run in worker threads, two at once if a client asks so.
    lock: threading.Lock = attrs.Factory(threading.Lock)


LISTINGS: dict[str, Listing] = {}


def load_cache(root: str) -> dict[str, tuple[Stamps, StoredSession]] | None:
    """The entries the cache file of `root` holds that are well formed ({} if there is no
    file, or one of another version); None if the file cannot be read as a cache."""
    path = os.path.join(root, LIST_CACHE_FILE)
    try:
        data = loads_json(read_bytes(path).decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):  # nested too deeply included (loads_json)
        return None
    if not isinstance(data, dict):
        return None
    if data.get("format") != _CACHE_FORMAT:
        return {}  # another version's: replaced by the next save
    raw = data.get("entries")
    if not isinstance(raw, dict):
        return None
    entries: dict[str, tuple[Stamps, StoredSession]] = {}
    for name, item in raw.items():
        # Checked as strictly as the files they stand for: a damaged or hand-edited cache
        # costs reading the sessions it gets wrong, never a wrong entry. (Checked by hand,
        # not with uuid.UUID and generators: those were most of a cold list's time.)
        # An entry for no session (a directory that is no conversation) is not taken: it
        # would hide one, and such a directory costs little to read again.
        try:
            (base, index, events), stored_raw = item
            stamps = (_stamp_of(base), _stamp_of(index), _stamp_of(events))
            stored = _session_of(_sid_of(name), stored_raw)
        except (ValueError, TypeError):
            continue
        entries[name] = (stamps, stored)
    return entries


def set_aside_cache(root: str, why: str) -> None:
    """Move the cache file out of the way (SET_ASIDE_CACHE_FILE); the next list saves a
    new one from the sessions' files."""
    try:
        os.replace(os.path.join(root, LIST_CACHE_FILE), os.path.join(root, SET_ASIDE_CACHE_FILE))
    except FileNotFoundError:
        return
    except OSError as exc:
        log.warning("could not set the session list's cache in %s aside (%s): %s", root, why, exc)
        return
    log.warning(
        "the session list's cache %s was set aside as %s (%s); the list is rebuilt from "
        "the sessions' files",
        os.path.join(root, LIST_CACHE_FILE),
        SET_ASIDE_CACHE_FILE,
        why,
    )


_HEX32 = re.compile(r"[0-9a-fA-F]{32}")


def _sid_of(name: str) -> str:
    """str(uuid.UUID(hex=name)) (ValueError if it is none), in a tenth of its time."""
    if _HEX32.fullmatch(name) is None:
        return str(uuid.UUID(hex=name))
    n = name.lower()
    return f"{n[:8]}-{n[8:12]}-{n[12:16]}-{n[16:20]}-{n[20:]}"


def _stamp_of(raw: JsonValue) -> Stamp:
    if raw is None:
        return None
    ino, mtime, size = raw
    if type(ino) is not int or type(mtime) is not int or type(size) is not int:
        raise ValueError(raw)
    return (ino, mtime, size)


def _session_of(sid: str, raw: JsonValue) -> StoredSession:
    session_id, cwd, title, updated, dirs, archived = raw
    if (
        session_id != sid
        or type(archived) is not bool
        or not is_abs_path(cwd)
        or not (title is None or (type(title) is str and _is_clean_title(title)))
        or not is_timestamp(updated)
        or type(dirs) is not list
    ):
        raise ValueError(raw)
    for d in dirs:
        if type(d) is not str or not is_wire_text(d):
            raise ValueError(raw)
    return StoredSession(session_id, cwd, title, updated, dirs, archived)


def save_cache(root: str, entries: dict[str, tuple[Stamps, StoredSession | None]]) -> None:
    data = {
        "format": _CACHE_FORMAT,
        "entries": {
            name: [
                stamps,
                None
                if stored is None
                else [
                    stored.session_id,
                    stored.cwd,
                    stored.title,
                    stored.updated_at,
                    stored.additional_directories,
                    stored.archived,
                ],
            ]
            for name, (stamps, stored) in entries.items()
        },
    }
    try:
        # Whole or not at all, owner-only (titles are the user's words); two processes
        # saving at once each write their own temporary file, the last one stays.
        fd, tmp = tempfile.mkstemp(prefix=f"{LIST_CACHE_FILE}.", suffix=".tmp", dir=root)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(json.dumps(data, separators=(",", ":")).encode("utf-8"))
            os.replace(tmp, os.path.join(root, LIST_CACHE_FILE))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        # A read-only directory: lists work, a new process's first one is slower.
        log.debug("could not save the session list's cache in %s: %s", root, exc)


def _is_clean_title(title: str) -> bool:
    # As `_read` makes them: cleaned, or cleaned behind the "[damaged]" mark.
    if title.startswith(f"{DAMAGED} "):
        title = title[len(DAMAGED) + 1 :]
    return clean_title(title) == title


def is_timestamp(value: object) -> TypeGuard[str]:
    # An ISO 8601 date-time as we write it (now_iso), loosely: short, plain ASCII.
    return isinstance(value, str) and len(value) <= 40 and value.isascii() and value.isprintable()


def is_abs_path(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and os.path.isabs(value) and is_wire_text(value)


# Lone surrogates (JSON's "\ud800" escapes): no UTF-8 encodes them, so one in a listed
# value would fail the whole session/list answer.
_WIRE_UNSAFE = re.compile("[\ud800-\udfff]")


def is_wire_text(value: str) -> bool:
    return value.isascii() or _WIRE_UNSAFE.search(value) is None
