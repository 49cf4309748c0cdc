"""The editor terminals' private directories a killed trio-acp process left behind.

Each session that runs commands in the client's terminals keeps a private directory
(`terminal._Private`: its lifeline FIFO, each command's set-up script) named
`trio-acp-session-<pid>-…` in the temporary directory, removed when the session closes. A
SIGKILL ends the process before it can: the next process that opens one removes those of
processes that no longer exist.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile

PRIVATE_PREFIX = "trio-acp-session-"
_PRIVATE_NAME = re.compile(re.escape(PRIVATE_PREFIX) + r"(\d+)-[^/]+")
_swept = False


def sweep_dead_once() -> None:
    """`sweep_dead` of the temporary directory, once per process."""
    global _swept
    if not _swept:
        _swept = True
        sweep_dead(tempfile.gettempdir())


def sweep_dead(tmp: str) -> list[str]:
    """Remove the private directories that trio-acp processes which no longer exist left
    in `tmp`: a SIGKILL ends a process before it can remove its own. Only this user's,
    only real directories; a pid in use again keeps its directory (the cost: a few
    bytes, never a live session's files). Returns what it removed."""
    removed: list[str] = []
    try:
        names = os.listdir(tmp)
    except OSError:
        return removed
    for name in names:
        found = _PRIVATE_NAME.fullmatch(name)
        if found is None or _alive(int(found.group(1))):
            continue
        path = os.path.join(tmp, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: another user's process has it
        return True
    return True
