"""The file editor tool reading and writing through the editor (`fs/*`), not the disk.

When the client advertises `fs.readTextFile` and `fs.writeTextFile`, the SDK's file editor
(`openhands.tools.file_editor`) keeps all its logic — view, create, str_replace, insert,
undo_edit, their checks and messages — but its text I/O goes to the editor:

* a view, and the before-image of every edit, is the buffer the user sees, unsaved
  changes included (`fs/read_text_file`), so an edit never rests on a stale read;
* every write is an `fs/write_text_file`: the editor applies it (and may show it for
  review); the agent never writes the disk itself. A write the editor refuses fails the
  tool call with the editor's reason.

What stays on the disk: listing directories, viewing images (ACP's fs is text only), the
size/binary guard of files that exist on disk, and the undo history (the editor's own).

Capabilities: with both flags, reads and writes go to the editor; with only
`writeTextFile`, writes go to the editor and reads to the disk; with only `readTextFile`,
everything stays on the disk — reading a buffer and then writing the disk would overwrite
the user's unsaved changes (docs/editor-workspace.md).

Line endings: a buffer with CRLF line endings is edited as LF (as the SDK does on disk,
where Python's universal newlines translate them) and written back with CRLF, so an edit
does not turn every line of the file into a change.

The override points are the editor's own I/O methods (`read_file`, `_count_lines`,
`write_file`, `insert`'s direct reads, and `validate_path`'s existence check for a file
that so far exists only in the editor); each editor call keeps the buffers it read in a
per-thread cache, so a `str_replace` costs one read and one write.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from trio_acp.openhands.editor.client_calls import ClientCalls

if TYPE_CHECKING:
    from trio_acp.connection import ClientProxy
    from trio_acp.openhands.sdk.file_editor import ClientFileEditor, ClientFileEditorExecutor

log = logging.getLogger(__name__)

#: Seconds a read of the editor's buffer may take: the editor answers it, not a person
#: (no client asks its user before a read; acpx refuses reads only under --deny-all).
READ_TIMEOUT = 30.0


class EditorFiles:
    """Text I/O of one session through its client; used from tool threads."""

    def __init__(
        self,
        calls: ClientCalls,
        client: ClientProxy,
        session_id: str,
        *,
        read: bool,
        write: bool,
        read_timeout: float = READ_TIMEOUT,
        write_timeout: float | None = None,
    ) -> None:
        """``write_timeout``: None waits as long as a person may take to answer
        (`ClientCalls.answer_timeout`): an editor may hold a write until its user reviewed
        it (Zed), or ask before it writes (acpx)."""
        self._calls = calls
        self._client = client
        self._session_id = session_id
        # Never read a buffer and then write the disk (see the module doc).
        self.reads_from_editor = read and write
        self.writes_to_editor = write
        self._read_timeout = read_timeout
        self._write_timeout = calls.answer_timeout if write_timeout is None else write_timeout
        self._written: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def for_client(
        cls, calls: ClientCalls, client: ClientProxy, session_id: str
    ) -> EditorFiles | None:
        """The backend the client's capabilities allow, or None (the disk, as before)."""
        fs = getattr(getattr(client, "capabilities", None), "fs", None)
        read = getattr(fs, "read_text_file", None) is True
        write = getattr(fs, "write_text_file", None) is True
        if not write:
            return None
        return cls(calls, client, session_id, read=read, write=write)

    def read(self, path: str) -> str:
        """The editor's text of `path` (its buffer when open); raises ClientCallError."""
        if not self.reads_from_editor:
            return Path(path).read_text()
        response = self._calls.call(
            lambda: self._client.read_text_file(session_id=self._session_id, path=path),
            what=f"reading {path} from the editor",
            timeout=self._read_timeout,
        )
        return response.content

    def write(self, path: str, text: str) -> None:
        """Hand `text` to the editor as the new content of `path`; raises ClientCallError."""
        self._calls.call(
            lambda: self._client.write_text_file(
                session_id=self._session_id, path=path, content=text
            ),
            what=f"writing {path} in the editor",
            timeout=self._write_timeout,
        )
        with self._lock:
            self._written.add(path)

    def cancel_pending(self) -> None:
        self._calls.cancel_pending()

    def wrote(self, path: str) -> bool:
        """Whether this session wrote `path` through the editor (it may not be on disk)."""
        with self._lock:
            return path in self._written


def make_editor(workspace_root: str | None, files: EditorFiles) -> ClientFileEditor:
    """A `FileEditor` (the SDK's) whose text I/O goes through `files` (call after the
    SDK's load: `sdk/file_editor.py`)."""
    from trio_acp.openhands.sdk.file_editor import ClientFileEditor

    return ClientFileEditor(workspace_root, files)


def lines_of(text: str) -> list[str]:
    """Lines as the SDK counts them on disk: split on "\\n" only, ends kept."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def make_executor(workspace_root: str | None, files: EditorFiles) -> ClientFileEditorExecutor:
    """A `FileEditorExecutor` (the SDK's, with its restrictions) over the editor's files."""
    from trio_acp.openhands.sdk.file_editor import ClientFileEditorExecutor

    return ClientFileEditorExecutor(workspace_root, files)
