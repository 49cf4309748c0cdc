"""How one command is launched in a client terminal: ``bash -c <the command>`` with the
set-up trio-acp adds through ``BASH_ENV`` (the session's private directory, the lifeline
FIFO, the kill watcher, the working directory carried across commands).

terminal.py (its module docstring) says why each part is there; this module writes and
reads the private files.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import tempfile
from pathlib import Path

import attrs

from trio_acp.openhands.editor.private_dirs import PRIVATE_PREFIX, sweep_dead_once

log = logging.getLogger(__name__)

#: Seconds the command's processes get between SIGTERM and SIGKILL once the terminal's
#: own process has died without the command finishing.
KILL_GRACE = 2.0


@attrs.frozen
class Launch:
    """One command as the client is asked to run it, and the private files of its set-up.

    ``command`` + ``args`` are what the client shows: ``bash -c <the command>``; the set-up
    comes in through ``env`` (``BASH_ENV``), or, once the client is known to drop ``env``,
    as a short prefix on the command line.
    """

    command: str
    args: list[str]
    env: dict[str, str] | None
    setup_file: str | None = None
    cwd_file: str | None = None

    @classmethod
    def bare(cls, command: str, env: dict[str, str] | None) -> Launch:
        """The command alone (no private directory could be made: no set-up)."""
        return cls("bash", ["-c", command], env)

    def finish(self) -> tuple[str | None, bool]:
        """(the directory the command ended in, or None; whether the set-up ran), once the
        command is over; removes the command's private files."""
        if self.cwd_file is None:
            return None, True
        ran = not _untouched(self.cwd_file)
        cwd = _read_cwd(self.cwd_file)
        if self.setup_file is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.setup_file)
        return cwd, ran


def _untouched(cwd_file: str) -> bool:
    # The set-up's first act writes a line into the file we made empty (module doc).
    try:
        return os.stat(cwd_file).st_size == 0
    except OSError:
        return False


class _Private:
    """The session's private directory (0700): the lifeline FIFO, held open by this
    process alone, and each command's set-up script and directory file."""

    def __init__(self, directory: str, lifeline: str | None, fd: int | None) -> None:
        self.directory = directory
        self.lifeline = lifeline
        self._fd = fd

    @classmethod
    def open(cls) -> _Private | None:
        sweep_dead_once()
        try:
            directory = tempfile.mkdtemp(prefix=f"{PRIVATE_PREFIX}{os.getpid()}-")
        except OSError:
            log.warning("no private directory for the editor terminal's commands", exc_info=True)
            return None
        path = os.path.join(directory, "lifeline")
        try:
            os.mkfifo(path, 0o600)
            # Read-write, so opening it never blocks; not inherited by our children
            # (PEP 446), so the kernel closes its last writer when this process dies.
            return cls(directory, path, os.open(path, os.O_RDWR))
        except OSError:
            log.warning("no lifeline for the editor terminal's processes", exc_info=True)
            return cls(directory, None, None)

    def launch(
        self, command: str, n: int, env: dict[str, str] | None, *, on_command_line: bool = False
    ) -> Launch:
        setup_file = os.path.join(self.directory, f"setup-{n}.sh")
        cwd_file = os.path.join(self.directory, f"cwd-{n}")
        try:
            Path(cwd_file).write_bytes(b"")
            fd = os.open(setup_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(setup_script(cwd_file, command=command, lifeline=self.lifeline))
        except OSError:
            log.warning("could not write the editor terminal's set-up", exc_info=True)
            for path in (setup_file, cwd_file):
                with contextlib.suppress(OSError):
                    os.unlink(path)
            return Launch.bare(command, env)
        if on_command_line:
            line = f"BASH_ENV={shlex.quote(setup_file)} exec bash -c {shlex.quote(command)}"
            return Launch("bash", ["-c", line], env, setup_file, cwd_file)
        return Launch(
            "bash", ["-c", command], {**(env or {}), "BASH_ENV": setup_file}, setup_file, cwd_file
        )

    def close(self) -> None:
        # The FIFO is unlinked before it is closed: a watcher opens it while we still
        # hold it, or not at all.
        with contextlib.suppress(OSError):
            shutil.rmtree(self.directory)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def setup_script(
    cwd_file: str,
    *,
    command: str | None = None,
    lifeline: str | None = None,
    kill_grace: float = KILL_GRACE,
) -> str:
    """The script bash sources (``BASH_ENV``) before a client terminal's command (module doc).

    With ``command``, only a bash running exactly that command takes the set-up: a client
    may wrap what it was asked in a shell of its own (Toad runs ``$SHELL -c "bash -c
    '<the command>'"``), and when that shell is bash it reads ``BASH_ENV`` too; the set-up
    then waits for the command's own bash, or ``cd`` would be tracked in the wrong shell.

    It is sourced twice. First by the bash the client spawned, ``bash -c <the command>``:
    there it writes an empty line to ``cwd_file`` (the sign that the set-up ran: a builtin,
    where ``rm`` would cost a process on the command's path) and runs the command
    (``$BASH_EXECUTION_STRING``) in a new bash, in a session of its own, then exits with
    that bash's status before its own ``-c`` runs. Then by that new bash, which runs the
    command exactly as ``bash -c`` would, after the set-up's second part: tell the watcher
    its pid (its session's process group) and close the pipe, so nothing the command starts
    keeps it open; drop ``BASH_ENV`` and our marker from the environment; and write the
    directory it ends in to ``cwd_file`` on exit (an EXIT trap: ``exit 3`` and syntax errors
    keep it too; a command that sets its own EXIT trap or ``exec``s does not).

    The command's stdin, stdout and stderr are the terminal's. It runs in the foreground (a
    background job would get /dev/null for stdin and SIGINT ignored), with no controlling
    terminal, so a command that opens /dev/tty fails at once instead of waiting for input
    nobody can send.

    The watcher stops the command's group (SIGTERM, then SIGKILL after ``kill_grace``
    seconds) when the spawned bash dies before the command has finished, or when
    ``lifeline`` reaches its end (the session closed or the agent died), whichever comes
    first; what a finished command left in the background (``server &``) keeps running
    until the lifeline's end. Without a lifeline (or if it is not on this machine) such
    processes are left alone.

    If the command's shell itself dies of a signal, the status is 128+N (the spawned bash
    outlives it), where a plain ``bash -c`` would have died of it. Without ``setsid`` the
    command runs as before, unwatched.
    """
    ticks = max(1, round(kill_grace * 10))
    life = shlex.quote(lifeline) if lifeline else "''"
    cwd = shlex.quote(cwd_file)
    # POSIX sh (dash on Debian starts in a fraction of bash's time): no `kill --`. The
    # lifeline is opened read-write first, then read-only (which cannot block while we
    # hold a writer), then the read-write end is closed: its only writer is the agent's,
    # and if the agent is already dead the read ends at once.
    watch = (
        "read -r pg || exit 0\n"
        'case "$pg" in ""|*[!0-9]*|0|1) exit 0;; esac\n'
        'stop() { kill -TERM "-$pg" 2>/dev/null || return 0\n'
        f"  for _ in $(seq {ticks}); do sleep 0.1; "
        'kill -0 "-$pg" 2>/dev/null || return 0; done\n'
        '  kill -KILL "-$pg" 2>/dev/null; }\n'
        "life=\n"
        f"if [ -p {life} ]; then\n"
        f"  {{ exec 7<>{life} 8<{life} 7>&-; read -r _ <&8; stop; }} &\n"
        "  life=$!\n"
        "fi\n"
        "read -r how\n"
        'if [ "$how" = done ] && [ -n "$life" ] && kill -0 "-$pg" 2>/dev/null; then\n'
        '  wait "$life"; exit 0\n'
        "fi\n"
        '[ -z "$life" ] || kill "$life" 2>/dev/null\n'
        '[ "$how" = done ] || stop'
    )
    # fd 3 carries the terminal's stderr to the command, while the spawned bash's own
    # report of a shell killed by a signal ("Terminated") goes to /dev/null. SIGPIPE is
    # ignored only after the command, so that a watcher gone cannot fail a finished command.
    gate = (
        ""
        if command is None
        else 'if [ "${TRIO_ACP_TERMINAL-}" != command ] && '
        f'[ "${{BASH_EXECUTION_STRING-}}" != {shlex.quote(command)} ]; then return 0; fi\n'
    )
    return (
        "# trio-acp: the set-up of an editor terminal's command (trio_acp.openhands.editor.terminal)\n"
        + gate
        + 'if [ "${TRIO_ACP_TERMINAL-}" != command ]; then\n'
        f"echo > {cwd}\n"
        "export TRIO_ACP_TERMINAL=command\n"
        "if command -v setsid >/dev/null 2>&1; then\n"
        f"exec 9> >(exec setsid sh -c {shlex.quote(watch)} >/dev/null 2>&1); __trio_acp_s=setsid\n"
        "else exec 9>/dev/null; __trio_acp_s=; fi\n"
        '{ $__trio_acp_s bash -c "$BASH_EXECUTION_STRING" 2>&3 3>&-; } 3>&2 2>/dev/null\n'
        "__trio_acp_status=$?\ntrap '' PIPE\necho done >&9 2>/dev/null\n"
        "exit $__trio_acp_status\n"
        "fi\n"
        "unset TRIO_ACP_TERMINAL BASH_ENV\n"
        "trap '' PIPE; echo $$ >&9 2>/dev/null; trap - PIPE; exec 9>&-\n"
        f"trap {shlex.quote(f'pwd -P > {cwd} 2>/dev/null')} EXIT\n"
    )


def _read_cwd(path: str) -> str | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        text = ""
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    return text if text and os.path.isabs(text) and os.path.isdir(text) else None
