"""A conversation's files as trio-acp stores them: the SDK's `LocalFileStore`, with the
agent's secret values masked as they are written, and the event files of a long history
read and listed fast (figures: bench/README.md).

Imports the SDK: only `trio_acp.openhands.sdk.loaded` imports it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from openhands.sdk import LocalFileStore
from openhands.sdk.conversation.persistence_const import EVENT_NAME_RE, EVENTS_DIR

from trio_acp.openhands.sessions.small_files import read_bytes

if TYPE_CHECKING:
    from trio_acp.credentials import SecretValues


class MaskingFileStore(LocalFileStore):
    """A conversation's files, with the agent's secret values masked as they are written.

    The SDK masks tool output and text replies itself (`mask_in_conversation`), but not
    a tool call's arguments, the model's text around a tool call, or an error's detail:
    whatever an event holds is stored without them here.
    """

    def __init__(self, root: str, *, secrets: SecretValues, **kwargs: int) -> None:
        # `kwargs`: the SDK store's cache bounds (`cache_limit_size`, `cache_memory_size`).
        super().__init__(root, **kwargs)
        self.secrets = secrets

    def read(self, path: str) -> str:
        # Opening a stored conversation, the SDK reads every event file of its history
        # (10,000 for a long one) through here. The generic read normalizes and
        # sandboxes each path and keeps each text in an LRU cache, which the SDK's
        # event log makes redundant (it keeps the parsed events): a third of the open's
        # time. An event file's name (the SDK's own pattern: digits, hex and dashes)
        # cannot leave the directory, so it is read as it is; the same text, the same
        # errors. Anything else takes the generic path. Figures: bench/README.md.
        folder, _, name = path.partition("/")
        if folder == EVENTS_DIR and EVENT_NAME_RE.match(name):
            try:
                return _read_text(os.path.join(self.root, EVENTS_DIR, name))
            except FileNotFoundError:
                raise FileNotFoundError(path) from None
        text: str = super().read(path)
        return text

    def list(self, path: str) -> list[str]:
        # Opening a stored conversation, the SDK's event log lists the events
        # directory once (10,000 files for a long one); the generic list sandboxes
        # every entry's path and stats it to tell directories: 0.14 s for 10,000
        # files here, against 0.02 s for one scandir, whose entries already know
        # their type (symbolic links followed, as `os.path.isdir` follows them). The
        # same list in the same order; a name the generic path would rewrite (a
        # backslash, which it reads as a separator) takes the generic path.
        if path != EVENTS_DIR:
            listed: list[str] = super().list(path)
            return listed
        try:
            with os.scandir(os.path.join(self.root, EVENTS_DIR)) as entries:
                found = [(entry.name, _is_dir(entry)) for entry in entries]
        except (FileNotFoundError, NotADirectoryError):
            listed = super().list(path)  # no directory, or a file: the SDK's answer
            return listed
        if any("\\" in name for name, _ in found):
            listed = super().list(path)
            return listed
        return [f"{path}/{name}/" if is_dir else f"{path}/{name}" for name, is_dir in found]

    def write(self, path: str, contents: str | bytes) -> None:
        if isinstance(contents, str):
            contents = self.secrets.mask(contents)
        else:
            contents = self.secrets.mask_bytes(bytes(contents))
        super().write(path, contents)


def _read_text(path: str) -> str:
    """What `open(path, encoding="utf-8").read()` returns, without the text layer's cost
    (small_files.py). Its universal newlines are kept: a stored event never has a bare
    carriage return outside a JSON string, but the same text is the rule."""
    text = read_bytes(path).decode("utf-8")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return os.path.isdir(entry.path)
