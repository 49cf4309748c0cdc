"""Files as the client names them: `file://` URIs and paths, for POSIX and Windows alike.

ACP names files two ways: tool call locations and diffs carry absolute *paths*; resource
links and embedded resources carry *URIs*. Everything that turns one into the other is
here, so the prompt (`prompt.py`: a resource link's local path) and the translator (a tool
argument given as a `file://` URI) read a URI the same way.

Both flavours are handled whatever the host, so each is testable everywhere:

* POSIX: `/home/me/a b.txt` <-> `file:///home/me/a%20b.txt`;
* Windows drive: `C:\\Users\\me\\a.txt` <-> `file:///C:/Users/me/a.txt`;
* Windows UNC: `\\\\server\\share\\a.txt` <-> `file://server/share/a.txt`.

Every character that is not unreserved is percent-encoded as UTF-8 (spaces, non-ASCII,
`#`, `?`, `%`, `;`), so a name holding them survives the round trip. `windows=None` means
the host's flavour. Pure: no I/O but the `is_dir` callable passed in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import PureWindowsPath
from urllib.parse import quote, unquote, urlsplit

__all__ = [
    "HOST_IS_WINDOWS",
    "abs_path",
    "file_uri_to_path",
    "is_dir_safe",
    "local_path",
    "path_to_file_uri",
]

HOST_IS_WINDOWS = os.name == "nt"

# `/C:/x`, `/C:` (and the legacy `/C|/x`) at the start of a file URI's path.
_DRIVE_IN_URI = re.compile(r"/([A-Za-z])[:|](?=[/\\]|\Z)")
# POSIX paths may hold undecodable bytes as surrogate escapes (os.fsdecode): keep them.
_ERRORS = "surrogateescape"


def _windows(windows: bool | None) -> bool:
    return HOST_IS_WINDOWS if windows is None else windows


def path_to_file_uri(path: str, *, windows: bool | None = None) -> str:
    """The `file://` URI of an absolute `path`. Raises ValueError for a relative path."""
    if not _windows(windows):
        if not path.startswith("/"):
            raise ValueError(f"not an absolute POSIX path: {path!r}")
        return "file://" + quote(path, safe="/", errors=_ERRORS)
    win = PureWindowsPath(path)
    if not win.is_absolute():
        raise ValueError(f"not an absolute Windows path: {path!r}")
    rest = "/".join(quote(part, safe="", errors=_ERRORS) for part in win.parts[1:])
    drive = win.drive
    if drive.startswith("\\\\"):  # UNC: \\server\share
        server, _, share = drive[2:].partition("\\")
        tail = f"/{rest}" if rest else "/"
        return f"file://{quote(server, safe='')}/{quote(share, safe='')}{tail}"
    return f"file:///{drive}/{rest}"


def file_uri_to_path(uri: str, *, windows: bool | None = None) -> str:
    """The local path of a `file:` URI, percent-decoded.

    POSIX: `file:///a%20b` -> `/a b`; a drive letter or a host is kept in a form a
    POSIX tool still recognizes (`C:/x`, `//server/share/x`). Windows: `C:\\x`,
    `\\\\server\\share\\x`. A host of `localhost` (or none) is this machine.
    """
    parts = urlsplit(uri)  # not urlparse: `;` in a name is not a parameter
    host = unquote(parts.netloc, errors=_ERRORS)
    if host.lower() == "localhost":
        host = ""
    path = unquote(parts.path, errors=_ERRORS)
    # A drive whether written `C:` or `C%3A` (VS Code's form). The cost: the POSIX path
    # `/C:/x` reads back as `C:/x`, which is what a Windows-made URI means far more often.
    drive = _DRIVE_IN_URI.match(path)
    if drive is not None:
        path = f"{drive.group(1)}:{path[drive.end() :]}"
    if drive is None and host:
        path = f"//{host}{path}"
    if not _windows(windows):
        return path
    path = path.replace("/", "\\")
    if drive is not None and len(path) == 2:
        path += "\\"  # `file:///C:` is the root of C:, not the current directory there
    return path


def local_path(uri: str, *, windows: bool | None = None) -> str | None:
    """The local path a `file:` URI names; None for any other URI (or an empty path)."""
    try:
        if not isinstance(uri, str) or urlsplit(uri).scheme.lower() != "file":
            return None
        return file_uri_to_path(uri, windows=windows) or None
    except ValueError:  # e.g. a malformed host (`file://[x/`): no local path
        return None


def abs_path(cwd: str, path: object) -> str | None:
    """Absolute, normalized form of a tool's `path` argument (relative to `cwd`, or a
    `file:` URI), in the host's flavour; None when it is not a non-empty string."""
    if not isinstance(path, str) or not path.strip():
        return None
    local = local_path(path)
    if local is not None:
        path = local
    absolute: str = path if os.path.isabs(path) else os.path.join(cwd, path)
    return os.path.normpath(absolute)


def is_dir_safe(is_dir: Callable[[str], bool], path: str) -> bool:
    """`is_dir(path)`, False when it raises."""
    try:
        return bool(is_dir(path))
    except Exception:
        return False
