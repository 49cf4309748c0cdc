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
from typing import Any

from trio_acp.openhands.editor.client_calls import ClientCallError, ClientCalls

log = logging.getLogger(__name__)

#: Seconds a read of the editor's buffer may take: the editor answers it, not a person
#: (no client asks its user before a read; acpx refuses reads only under --deny-all).
READ_TIMEOUT = 30.0


class EditorFiles:
    """Text I/O of one session through its client; used from tool threads."""

    def __init__(
        self,
        calls: ClientCalls,
        client: Any,
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
    def for_client(cls, calls: ClientCalls, client: Any, session_id: str) -> EditorFiles | None:
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


def make_editor(workspace_root: str | None, files: EditorFiles) -> Any:
    """A `FileEditor` (the SDK's) whose text I/O goes through `files`."""
    from openhands.tools.file_editor.definition import FileEditorObservation
    from openhands.tools.file_editor.editor import FileEditor
    from openhands.tools.file_editor.exceptions import EditorToolParameterInvalidError, ToolError
    from openhands.tools.file_editor.utils.config import SNIPPET_CONTEXT_WINDOW

    class ClientFileEditor(FileEditor):
        def __init__(self) -> None:
            super().__init__(workspace_root=workspace_root)
            self._files = files
            self._local = threading.local()

        # -- one editor call: its own cache of the buffers it read ------------------------

        def __call__(self, **kwargs: Any) -> Any:
            self._local.cache = {}
            try:
                return super().__call__(**kwargs)
            finally:
                self._local.cache = {}

        def _cache(self) -> dict[str, tuple[str, bool]]:
            cache = getattr(self._local, "cache", None)
            if cache is None:
                cache = self._local.cache = {}
            return cache

        def _buffer(self, path: Path) -> str:
            """The file's text as the editor has it, LF line endings."""
            key = str(path)
            cache = self._cache()
            if key not in cache:
                try:
                    raw = self._files.read(key)
                except ClientCallError as exc:
                    raise ToolError(str(exc)) from None
                except OSError as exc:
                    raise ToolError(f"Ran into {exc} while trying to read {path}") from None
                crlf = "\r\n" in raw
                cache[key] = (raw.replace("\r\n", "\n") if crlf else raw, crlf)
            return cache[key][0]

        # -- the editor's I/O --------------------------------------------------------------

        def read_file(
            self, path: Path, start_line: int | None = None, end_line: int | None = None, **_: Any
        ) -> str:
            self.validate_file(path)
            text = self._buffer(path)
            if start_line is None and end_line is None:
                return text
            if start_line is None or end_line is None:
                raise ToolError("Both start_line and end_line must be provided together")
            lines = _lines(text)
            return "".join(lines[start_line - 1 : end_line])

        def _count_lines(self, path: Path, **_: Any) -> int:
            return len(_lines(self._buffer(path)))

        def write_file(self, path: Path, file_text: str, **_: Any) -> None:
            self.validate_file(path)
            key = str(path)
            crlf = self._cache().get(key, ("", False))[1]
            wire = file_text.replace("\n", "\r\n") if crlf else file_text
            try:
                self._files.write(key, wire)
            except ClientCallError as exc:
                raise ToolError(str(exc)) from None
            self._cache()[key] = (file_text, crlf)

        def insert(self, path: Path, insert_line: int, new_str: str, **_: Any) -> Any:
            self.validate_file(path)
            before = self._buffer(path)
            lines = _lines(before)
            if insert_line < 0 or insert_line > len(lines):
                raise EditorToolParameterInvalidError(
                    "insert_line",
                    str(insert_line),
                    f"It should be within the range of allowed values: {[0, len(lines)]}",
                )
            if lines and not lines[-1].endswith("\n") and insert_line == len(lines):
                lines[-1] += "\n"  # as the SDK does: the inserted text starts a new line
            new_lines = [line + "\n" for line in new_str.split("\n")]
            after = "".join(lines[:insert_line] + new_lines + lines[insert_line:])
            self.write_file(path, after)
            self._history_manager.add_history(path, before)
            start = max(0, insert_line - SNIPPET_CONTEXT_WINDOW)
            end = min(
                len(lines) + len(new_lines), insert_line + SNIPPET_CONTEXT_WINDOW + len(new_lines)
            )
            snippet = "".join(_lines(after)[start:end])
            message = f"The file {path} has been edited. " + self._make_output(
                snippet,
                "a snippet of the edited file",
                max(1, insert_line - SNIPPET_CONTEXT_WINDOW + 1),
            )
            message += (
                "Review the changes and make sure they are as expected (correct "
                "indentation, no duplicate lines, etc). Edit the file again if necessary."
            )
            return FileEditorObservation.from_text(
                text=message,
                command="insert",
                prev_exist=True,
                path=str(path),
                old_content=before,
                new_content=after,
            )

        def validate_path(self, command: Any, path: Path) -> None:
            # A file this session created through the editor may exist only there (the
            # editor has not saved it yet): it exists for every command but `create`.
            if (
                command != "create"
                and path.is_absolute()
                and not path.exists()
                and self._files.wrote(str(path))
            ):
                return
            super().validate_path(command, path)

    return ClientFileEditor()


def _lines(text: str) -> list[str]:
    """Lines as the SDK counts them on disk: split on "\\n" only, ends kept."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def make_executor(workspace_root: str | None, files: EditorFiles) -> Any:
    """A `FileEditorExecutor` (the SDK's, with its restrictions) over the editor's files."""
    from openhands.tools.file_editor.impl import FileEditorExecutor

    class ClientFileEditorExecutor(FileEditorExecutor):
        def __init__(self) -> None:
            # Not the parent's __init__: it would build (and leave behind) a disk editor.
            self.editor = make_editor(workspace_root, files)
            self.allowed_edits_files = None

        def interrupt(self) -> None:
            # The SDK calls this from another thread when the conversation is
            # interrupted: a read or write waiting on the editor fails at once.
            files.cancel_pending()

    return ClientFileEditorExecutor()
