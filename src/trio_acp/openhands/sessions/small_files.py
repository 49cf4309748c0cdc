"""Reading small files whole, fast: a conversation's event files and the session list's JSON.

And reading them safely: files in the persistence directory can be anything (a crash, a
hand edit, a hostile tool), so a JSON file nested deeper than the parser recurses
(100,000 `[`) is an invalid file like any other, never a RecursionError that escapes
(`loads_json`).

Opening a long conversation reads 10,000 event files, and a new process's first
`session/list` 2,000 small JSON files. Python's file objects cost more than the read
itself: a text-mode `open` (buffered reader, decoder, newline set-up per file) took 0.2 s of
CPU for 10,000 files here, a binary unbuffered one 0.11 s, `os.open` + `os.read` 0.07 s
(bench/README.md, "Big histories").
"""

from __future__ import annotations

import json
import os

from trio_acp.openhands.translate.shapes import JsonValue

__all__ = ["loads_json", "read_bytes"]


def loads_json(data: bytes | str) -> JsonValue:
    """`json.loads(data)`; ValueError for anything that is not JSON, nesting deeper than
    the parser can recurse included (json raises RecursionError for it)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The whole file at `path`; the errors `open` would raise (FileNotFoundError, ...)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        chunks = []
        while True:
            # One read for a regular file (size + 1 sees the end at once); a file that
            # grows meanwhile, or that reports no size, is read to its end all the same.
            chunk = os.read(fd, max(size + 1, 65536))
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
