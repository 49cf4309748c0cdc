"""The SDK's file editor over the editor's files (`editor/files.py` says what and why).

Overrides the SDK `FileEditor`'s I/O (`read_file`, `_count_lines`, `write_file`, `insert`,
`validate_path`) and builds its `FileEditorExecutor` without the parent's `__init__`:
reliance.py lists each, with the signatures we override. Imports the SDK: imported inside
`editor/files.py`'s functions, after the load.
"""

from __future__ import annotations

import threading
from pathlib import Path

from openhands.tools.file_editor.definition import CommandLiteral, FileEditorObservation
from openhands.tools.file_editor.editor import FileEditor
from openhands.tools.file_editor.exceptions import EditorToolParameterInvalidError, ToolError
from openhands.tools.file_editor.impl import FileEditorExecutor
from openhands.tools.file_editor.utils.config import SNIPPET_CONTEXT_WINDOW

from trio_acp.openhands.editor.client_calls import ClientCallError
from trio_acp.openhands.editor.files import EditorFiles, lines_of


class ClientFileEditor(FileEditor):
    """The SDK's `FileEditor` (its commands, checks, undo history and messages), its text
    read and written through `EditorFiles`: the editor's buffers, unsaved ones too."""

    def __init__(self, workspace_root: str | None, files: EditorFiles) -> None:
        super().__init__(workspace_root=workspace_root)
        self._files = files
        self._local = threading.local()

    # -- one editor call: its own cache of the buffers it read ------------------------

    def __call__(
        self,
        *,
        command: CommandLiteral,
        path: str,
        file_text: str | None = None,
        view_range: list[int] | None = None,
        old_str: str | None = None,
        new_str: str | None = None,
        insert_line: int | None = None,
    ) -> FileEditorObservation:
        self._local.cache = {}
        try:
            return super().__call__(
                command=command,
                path=path,
                file_text=file_text,
                view_range=view_range,
                old_str=old_str,
                new_str=new_str,
                insert_line=insert_line,
            )
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
    # (`**_`: the SDK's `encoding`, which its decorator passes: the buffer's text is decoded.)

    def read_file(
        self, path: Path, start_line: int | None = None, end_line: int | None = None, **_: object
    ) -> str:
        self.validate_file(path)
        text = self._buffer(path)
        if start_line is None and end_line is None:
            return text
        if start_line is None or end_line is None:
            raise ToolError("Both start_line and end_line must be provided together")
        lines = lines_of(text)
        return "".join(lines[start_line - 1 : end_line])

    def _count_lines(self, path: Path, **_: object) -> int:
        return len(lines_of(self._buffer(path)))

    def write_file(self, path: Path, file_text: str, **_: object) -> None:
        self.validate_file(path)
        key = str(path)
        crlf = self._cache().get(key, ("", False))[1]
        wire = file_text.replace("\n", "\r\n") if crlf else file_text
        try:
            self._files.write(key, wire)
        except ClientCallError as exc:
            raise ToolError(str(exc)) from None
        self._cache()[key] = (file_text, crlf)

    def insert(
        self, path: Path, insert_line: int, new_str: str, **_: object
    ) -> FileEditorObservation:
        self.validate_file(path)
        before = self._buffer(path)
        lines = lines_of(before)
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
        snippet = "".join(lines_of(after)[start:end])
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

    def validate_path(self, command: CommandLiteral, path: Path) -> None:
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


class ClientFileEditorExecutor(FileEditorExecutor):
    """The SDK's `FileEditorExecutor` (with its restrictions) over `ClientFileEditor`."""

    def __init__(self, workspace_root: str | None, files: EditorFiles) -> None:
        # Not the parent's __init__: it would build (and leave behind) a disk editor.
        self.editor = ClientFileEditor(workspace_root, files)
        self.allowed_edits_files = None
        self._files = files

    def interrupt(self) -> None:
        # The SDK calls this from another thread when the conversation is
        # interrupted: a read or write waiting on the editor fails at once.
        self._files.cancel_pending()
