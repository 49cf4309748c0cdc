"""A session's roots: its `cwd` plus the client's `additionalDirectories` — pure.

ACP lets a client give a session extra workspace roots (`additionalDirectories` on
`session/new`, `session/load`, `session/resume` and the unstable `session/fork`) once the
agent advertises ``agentCapabilities.sessionCapabilities.additionalDirectories: {}``.
They widen what the agent may read and edit without changing `cwd`, which stays the base
of relative paths. The rules this module keeps (from the schema's descriptions):

* every entry must be absolute (a relative one is refused: `RootsError`, answered
  ``-32602``); entries are normalized, duplicates and `cwd` itself dropped, order kept;
  an entry that is not an existing directory is refused too;
* omitted or empty means no extra roots; on load/resume a non-empty list is the complete
  new list and nothing stored is restored implicitly;
* `session/list` may report a session's list (`SessionInfo.additionalDirectories`): the
  index keeps the last one (`with_roots` / `roots_from_index`).

For permissions and previews: `contains` / `root_of` say whether a path is inside the
session's roots; `describe` names a path relative to its root for titles and prompts;
a path outside them is never covered by an "always" rule (the permission layer asks). No trio, no SDK; the only I/O is the `is_dir` passed in.
"""

from __future__ import annotations

import ntpath
import os
import posixpath
from collections.abc import Callable, Iterable, Mapping

import attrs

__all__ = [
    "INDEX_KEY",
    "RootsError",
    "SessionRoots",
    "parse_roots",
    "roots_from_index",
    "roots_prompt",
    "with_roots",
]

#: Where the session index keeps the list (the wire name, as `SessionInfo` reports it).
INDEX_KEY = "additionalDirectories"


class RootsError(ValueError):
    """An `additionalDirectories` entry the agent cannot use; the message says which."""


def _is_absolute(path: str) -> bool:
    # A client on Windows sends Windows paths, whatever this machine is.
    return posixpath.isabs(path) or (ntpath.isabs(path) and bool(ntpath.splitdrive(path)[0]))


def _norm(path: str) -> str:
    return os.path.normpath(path)


@attrs.frozen
class SessionRoots:
    cwd: str
    additional: tuple[str, ...] = ()

    @property
    def all(self) -> tuple[str, ...]:
        return (self.cwd, *self.additional)

    def root_of(self, path: str) -> str | None:
        """The root `path` lies in (the deepest, if roots nest), or None."""
        if not isinstance(path, str) or not _is_absolute(path):
            return None
        target = _norm(path)
        best = None
        for root in self.all:
            root_n = _norm(root)
            if target == root_n or target.startswith(root_n.rstrip(os.sep) + os.sep):
                if best is None or len(root_n) > len(best):
                    best = root_n
        return best

    def contains(self, path: str) -> bool:
        return self.root_of(path) is not None

    def describe(self, path: str) -> str:
        """`path` for a title or a prompt: relative to `cwd`, or to the extra root it is
        in (named), or absolute when it is outside every root."""
        root = self.root_of(path)
        if root is None:
            return path
        rel = os.path.relpath(_norm(path), root)
        if root == _norm(self.cwd):
            return rel
        return f"{os.path.basename(root) or root}/{rel}" if rel != "." else root

    def to_wire(self) -> list[str] | None:
        """For `SessionInfo.additionalDirectories` (None: report none)."""
        return list(self.additional) or None


def parse_roots(
    cwd: str, additional: Iterable[object] | None, *, is_dir: Callable[[str], bool] = os.path.isdir
) -> SessionRoots:
    """The roots of a session from a lifecycle request's `cwd` and `additionalDirectories`."""
    cwd_n = _norm(cwd)
    seen = {cwd_n}
    roots: list[str] = []
    for entry in additional or ():
        if not isinstance(entry, str) or not entry:
            continue  # the schema skips invalid items rather than failing the request
        if not _is_absolute(entry):
            raise RootsError(f"additionalDirectories entries must be absolute paths: {entry!r}")
        path = _norm(entry)
        if path in seen:
            continue
        if not is_dir(path):
            raise RootsError(f"additionalDirectories entry is not an existing directory: {entry}")
        seen.add(path)
        roots.append(path)
    return SessionRoots(cwd=cwd_n, additional=tuple(roots))


def with_roots(index: dict[str, object], roots: SessionRoots) -> dict[str, object]:
    """The session index with `roots`' list recorded (removed when there is none)."""
    data = dict(index)
    if roots.additional:
        data[INDEX_KEY] = list(roots.additional)
    else:
        data.pop(INDEX_KEY, None)
    return data


def roots_from_index(index: Mapping[str, object]) -> list[str]:
    """The list the index recorded, for `session/list` (never re-activated by itself)."""
    value = index.get(INDEX_KEY)
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, str) and _is_absolute(v)]


def roots_prompt(roots: SessionRoots) -> str | None:
    """What the model is told about the extra roots (None: nothing to tell)."""
    if not roots.additional:
        return None
    listed = "\n".join(f"- {root}" for root in roots.additional)
    return (
        "Besides the working directory, the user has added these directories to the "
        "workspace; you may read and edit files in them (use absolute paths):\n" + listed
    )
