"""Reading small files whole, fast: a conversation's event files and the session list's JSON.

Opening a long conversation reads 10,000 event files, and a new process's first
`session/list` 2,000 small JSON files. Python's file objects cost more than the read
itself: a text-mode `open` (buffered reader, decoder, newline set-up per file) took 0.2 s of
CPU for 10,000 files here, a binary unbuffered one 0.11 s, `os.open` + `os.read` 0.07 s
(bench/README.md, "Big histories").
"""

from __future__ import annotations

import os

__all__ = ["read_bytes"]


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
