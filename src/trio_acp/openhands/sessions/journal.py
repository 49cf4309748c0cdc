"""A session's turn journal: what the user was shown of the running turn, and what they
approved, kept on disk until the SDK's own events hold it.

The SDK saves a reply only once its model call is over, and a tool call's result only once
it ran. A process killed in between (kill -9, a crash, the machine's OOM killer) leaves the
user having read text that no event holds, and a tool call that has no result: was it
approved? did it run? The journal answers both for the next process (recovery.py):

* `shown(updates)`: the text of the agent message / thought chunks as they were sent,
  with the agent's credentials masked (what the user saw: the connection masks the frames,
  this masks the file and `current`), one line per batch;
* `approved(ids)`: the tool calls the user (or an "always" rule) let run, written before
  they can run;
* `clear()`: the turn is over and every event of it is saved; nothing left to keep.

A turn cut short (a cancel, a failed model call) saves no event for the reply it was
streaming: before it ends, the session asks the journal what it showed (`current`, kept in
memory too) and the conversation keeps what no event holds (recovery.py, `unsaved_text`).

File: `trio_acp_turn.jsonl` in the session's directory (store.py), one JSON object per
line, appended. Writes go through one daemon thread per process: the Trio thread only
puts a line on a queue (`SimpleQueue.put`, never blocks), so streaming does not wait on
the disk (figures: bench/README.md, "The turn journal"). A killed process loses nothing the
writer thread has written (the kernel has it); what it had not written yet is lost: the
streamed lines of the last `LINGER` (20 ms) at most. `approved` waits until its line is written: an approved action
only runs after that.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from trio_acp import schema
from trio_acp.credentials import SecretValues
from trio_acp.openhands.translate.shapes import JsonObject
from trio_acp.schema import SessionUpdate

if TYPE_CHECKING:
    import uuid

    from trio_acp.openhands.backends.local_conversation import LocalConversation

log = logging.getLogger(__name__)

JOURNAL_FILE = "trio_acp_turn.jsonl"
# How long the writer gathers streamed lines before it writes them: a process killed
# meanwhile loses at most this much of the end of what it streamed.
LINGER = 0.02
# More than this is not read back (a journal only spans one turn; a damaged or hostile
# file must not cost a reopen its memory).
MAX_READ = 16 * 1024 * 1024


@attrs.frozen
class Shown:
    """Text the user was shown of one message: `part` is "message" or "thought"."""

    part: str
    message_id: str
    text: str


@attrs.frozen
class JournalRecord:
    """What a journal held when its session was reopened."""

    shown: tuple[Shown, ...] = ()
    approved: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.shown or self.approved)


class TurnJournal:
    def __init__(self, path: Path, secrets: SecretValues | None = None) -> None:
        self.path = path
        self._secrets = secrets if secrets is not None else SecretValues()
        # What the file holds of the running turn, in memory (`current`).
        self._texts: dict[tuple[str, str], list[str]] = {}
        self._approved: set[str] = set()

    # --- the Trio thread: never blocks ---------------------------------------------

    def shown(self, updates: list[SessionUpdate]) -> None:
        """Journal the text of the agent message and thought chunks among `updates`."""
        lines = []
        for update in updates:
            if isinstance(update, schema.AgentMessageChunk):
                part = "message"
            elif isinstance(update, schema.AgentThoughtChunk):
                part = "thought"
            else:
                continue
            text = getattr(update.content, "text", None)
            if not isinstance(text, str) or not text or update.message_id is None:
                continue
            lines.append({"shown": part, "id": update.message_id, "text": text})
            self._texts.setdefault((part, update.message_id), []).append(text)
        if lines:
            # One pass per batch, over its JSON lines (the JSON forms are masked too).
            data = self._secrets.mask_bytes(_lines(lines))
            _writer().put(("append", self.path, data, None))

    async def approved(self, tool_call_ids: list[str]) -> None:
        """Journal that these tool calls may run; returns once it is written."""
        if tool_call_ids:
            self._approved.update(tool_call_ids)
            await _wait(("append", self.path, _lines([{"approved": tool_call_ids}])))

    def current(self) -> JournalRecord:
        """What the journal holds of the running turn (from memory: no disk, no wait)."""
        mask = self._secrets.mask
        shown = tuple(Shown(part, mid, mask("".join(t))) for (part, mid), t in self._texts.items())
        return JournalRecord(shown, frozenset(self._approved))

    def clear(self) -> None:
        """The turn's events are all saved: empty the journal (after what is queued)."""
        self._texts, self._approved = {}, set()
        _writer().put(("clear", self.path, b"", None))

    async def cleared(self) -> None:
        """`clear`, returning once done."""
        self._texts, self._approved = {}, set()
        await _wait(("clear", self.path, b""))

    async def aclose(self) -> None:
        """Written and closed: nothing of this session's is pending (session/delete may
        remove its directory next)."""
        await _wait(("close", self.path, b""))

    # --- a worker thread ------------------------------------------------------------

    def read(self) -> JournalRecord:
        """What the journal holds (blocking). A torn last line (a kill mid-write) is skipped."""
        try:
            # Not through a symbolic link: the journal is ours, in the session's directory.
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with open(fd, "rb") as f:
                data = f.read(MAX_READ)
        except FileNotFoundError:
            return JournalRecord()
        except OSError:
            log.warning("cannot read the turn journal %s", self.path, exc_info=True)
            return JournalRecord()
        texts: dict[tuple[str, str], list[str]] = {}
        approved: set[str] = set()
        for line in data.splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if not isinstance(item, dict):
                continue
            part, mid, text = item.get("shown"), item.get("id"), item.get("text")
            if part in ("message", "thought") and isinstance(mid, str) and isinstance(text, str):
                texts.setdefault((part, mid), []).append(text)
            ids = item.get("approved")
            if isinstance(ids, list):
                approved.update(i for i in ids if isinstance(i, str))
        shown = tuple(Shown(part, mid, "".join(t)) for (part, mid), t in texts.items())
        return JournalRecord(shown, frozenset(approved))


def _lines(items: list[JsonObject]) -> bytes:
    return b"".join(json.dumps(i, ensure_ascii=False).encode() + b"\n" for i in items)


async def _wait(op: tuple[str, Path, bytes]) -> None:
    done = trio.Event()
    token = trio.lowlevel.current_trio_token()
    _writer().put((*op, lambda: token.run_sync_soon(done.set)))
    await done.wait()


class _Writer:
    """The one thread that writes every session's journal, in the order asked."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[_Op] = queue.SimpleQueue()
        self._fds: dict[Path, int] = {}
        threading.Thread(target=self._run, name="trio-acp-journal", daemon=True).start()

    def put(self, op: _Op) -> None:
        self.queue.put(op)

    def _run(self) -> None:
        while True:
            batch = [self.queue.get()]
            if batch[0][3] is None:
                # Nobody waits for it (a streamed line): what comes in the next moments
                # goes with it. Woken per line, this thread took the GIL from the SDK's
                # and the Trio thread hundreds of times a second (bench/README.md,
                # "The turn journal").
                time.sleep(LINGER)
            # Whatever else is queued goes with it: consecutive appends to one file are one
            # write (a streaming turn queues a line per batch of chunks).
            while len(batch) < 1000:
                try:
                    batch.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            for what, path, data, done in _merged(batch):
                try:
                    self._do(what, path, data)
                except OSError:
                    log.warning("turn journal %s: %s failed", path, what, exc_info=True)
                finally:
                    for callback in done:
                        try:
                            callback()
                        except RuntimeError:  # the Trio run that waited is over
                            pass

    def _do(self, what: str, path: Path, data: bytes) -> None:
        fd = self._fds.get(path)
        if what == "close":
            if fd is not None:
                os.close(self._fds.pop(path))
            return
        if what == "clear":
            if fd is not None:
                os.ftruncate(fd, 0)
            elif os.path.isfile(path) and not os.path.islink(path):
                os.truncate(path, 0)
            return
        if fd is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
            fd = os.open(path, flags, 0o600)
            self._fds[path] = fd
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]


_Op = tuple[str, Path, bytes, Callable[[], None] | None]


def _merged(batch: list[_Op]) -> list[tuple[str, Path, bytes, list[Callable[[], None]]]]:
    """`batch` with each run of appends to one file as one append."""
    runs: list[tuple[str, Path, list[bytes], list[Callable[[], None]]]] = []
    for what, path, data, done in batch:
        if not (runs and what == "append" and runs[-1][0] == "append" and runs[-1][1] == path):
            runs.append((what, path, [], []))
        runs[-1][2].append(data)
        if done is not None:
            runs[-1][3].append(done)
    return [(what, path, b"".join(data), done) for what, path, data, done in runs]


_WRITER: _Writer | None = None
_WRITER_LOCK = threading.Lock()


def _writer() -> _Writer:
    global _WRITER
    if _WRITER is None:
        with _WRITER_LOCK:
            if _WRITER is None:
                _WRITER = _Writer()
    return _WRITER


async def recover_cut_turn(
    journal: TurnJournal, conv: LocalConversation, cwd: str, sid: uuid.UUID
) -> None:
    """Close what a process that stopped mid-turn left of a conversation, keeping what it
    had shown (recovery.py); before anything replays or runs it."""
    record = await trio.to_thread.run_sync(journal.read)
    try:
        plan = await conv.recover(record, cwd)
    except Exception:
        log.exception("session %s: closing its interrupted turn failed", sid)
        return
    if plan:
        log.warning(
            "session %s: its last turn was cut short when its process stopped; "
            "%d tool call(s) closed, shown text %s",
            sid,
            len(plan.endings),
            "kept" if plan.text is not None else "all saved",
        )
    if record:
        await journal.cleared()
