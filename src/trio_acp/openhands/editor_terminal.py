"""The terminal tool running its commands in the editor's terminals (`terminal/*`).

When the client advertises `terminal`, each command the model runs is one client
terminal, so the user watches it live in the editor:

    terminal/create (command, cwd, env, outputByteLimit)
      → announce the terminal id (the tool call's content becomes
        ``{"type": "terminal", "terminalId": …}``: the editor embeds it)
      → terminal/wait_for_exit, raced against the command's timeout
        (on timeout: terminal/kill)
      → terminal/output: the model's result (output, truncation, exit status)
      → terminal/release, always.

On the turn's cancel the Trio task running this is cancelled: the pending request gets
``$/cancel_request`` (rpc layer), then ``terminal/kill`` and ``terminal/release`` are sent,
shielded, within `CLEANUP_BUDGET` (`client_calls.ClientCalls.cancel_turn_and_wait` lets
the turn wait for them before it answers `cancelled`). `terminal/create` itself may wait
for a person (the client may ask its user first), so it has no short timeout and a cancel
does not wait for it: the request is cancelled, and a terminal the client still creates
afterwards is killed and released as soon as its answer arrives (``on_late``).

A client terminal runs one command, where the SDK's terminal is a shell session that
lives across commands. The working directory is carried over: the command runs in a
small ``bash -c`` script that records the directory it ends in (a private file, read back
after exit), so ``cd src`` still holds for the next command. Exported variables do not
carry over; input to a running process (``is_input``) is refused with an explanation,
and ``reset`` starts again from the session's directory.

`terminal/kill` must stop the whole command, whatever the client signals: some clients
(acpx 0.15) signal only the process they spawned, which left a ``sleep`` under that bash
running. So the command runs in its own session (util-linux ``setsid``), and a watcher,
also in a session of its own, holds the read end of a pipe only the spawned bash writes
to: when that bash dies in any way (signal, SIGKILL, its group killed), the pipe closes
and the watcher sends the command's process group SIGTERM, then SIGKILL after
`KILL_GRACE` seconds. What a finished command leaves running in the background lives
until the session closes (`command_script`; docs/editor-workspace.md).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shlex
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from .. import schema
from .client_calls import CLEANUP_BUDGET, ClientCallError, ClientCalls, ClientCallTimeout

log = logging.getLogger(__name__)

#: Seconds a command may run when the model sets no timeout (then it is killed).
DEFAULT_COMMAND_TIMEOUT = 600.0
#: Seconds the client may take to answer `terminal/kill` and `terminal/output` (it answers
#: them itself; `terminal/create` may wait for a person: no such bound).
ANSWER_BUDGET = 30.0
#: The most output the editor keeps per command (its `outputByteLimit`), and the model sees.
OUTPUT_BYTE_LIMIT = 256 * 1024
#: Seconds the command's processes get between SIGTERM and SIGKILL once the terminal's
#: own process has died without the command finishing.
KILL_GRACE = 2.0


@attrs.frozen
class CommandResult:
    terminal_id: str
    output: str
    truncated: bool
    exit_code: int | None
    signal: str | None
    timed_out: bool


async def run_in_client_terminal(
    client: Any,
    session_id: str,
    *,
    command: str,
    args: list[str] | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    output_byte_limit: int | None = OUTPUT_BYTE_LIMIT,
    timeout: float = DEFAULT_COMMAND_TIMEOUT,
    on_created: Callable[[str], Any] | None = None,
    cleanup_budget: float = CLEANUP_BUDGET,
    create_timeout: float = math.inf,
) -> CommandResult:
    """Run one command in a client terminal (see the module doc). Trio side.

    ``create_timeout``: how long `terminal/create` may wait. The client may ask its user
    first (acpx does), so the default is no bound (`ClientCalls.answer_timeout`); the
    turn's cancel, the session's end or the client's exit end the wait."""

    def created_late(late: schema.CreateTerminalResponse) -> None:
        # The create was given up (cancel, timeout) after it was sent, and the client
        # created the terminal anyway (a person said yes late, or the client ignores
        # `$/cancel_request`): nobody will use it, so it must not run.
        ids = {"session_id": session_id, "terminal_id": late.terminal_id}
        log.info("terminal %s was created after its command was given up", late.terminal_id)
        trio.lowlevel.spawn_system_task(_discard_terminal, client, ids, cleanup_budget)

    with trio.move_on_after(create_timeout) as creating:
        created = await client.create_terminal(
            session_id=session_id,
            command=command,
            args=args or None,
            cwd=cwd,
            env=[schema.EnvVariable(name=k, value=v) for k, v in (env or {}).items()] or None,
            output_byte_limit=output_byte_limit,
            on_late=created_late,
        )
    if creating.cancelled_caught:
        raise ClientCallTimeout("terminal/create", create_timeout)
    tid = created.terminal_id
    ids = {"session_id": session_id, "terminal_id": tid}
    try:
        await trio.lowlevel.checkpoint()
        if on_created is not None:
            on_created(tid)
        timed_out = False
        with trio.move_on_after(timeout) as waited:
            await client.wait_for_terminal_exit(**ids)
        # The client answers these itself, not a person: a bound, so a client that never
        # does fails the command rather than hold it until a cancel.
        with trio.move_on_after(ANSWER_BUDGET) as answering:
            if waited.cancelled_caught:
                timed_out = True
                await client.kill_terminal(**ids)
            out = await client.terminal_output(**ids)
        if answering.cancelled_caught:
            raise ClientCallTimeout("terminal/output", ANSWER_BUDGET)
        status = out.exit_status
        return CommandResult(
            terminal_id=tid,
            output=out.output,
            truncated=out.truncated,
            exit_code=status.exit_code if status is not None else None,
            signal=status.signal if status is not None else None,
            timed_out=timed_out,
        )
    except BaseException:
        # Cancelled (the turn, the session) or failed: the command must not go on.
        with trio.move_on_after(cleanup_budget, shield=True):
            await _quietly(client.kill_terminal(**ids))
        raise
    finally:
        with trio.move_on_after(cleanup_budget, shield=True):
            await _quietly(client.release_terminal(**ids))


async def _discard_terminal(client: Any, ids: dict[str, str], budget: float) -> None:
    """Kill and release a terminal nobody uses (a system task: it must never raise)."""
    try:
        with trio.move_on_after(budget):
            await _quietly(client.kill_terminal(**ids))
            await _quietly(client.release_terminal(**ids))
    except Exception:  # an exception out of a system task would crash the whole run
        log.debug("could not discard terminal %s", ids.get("terminal_id"), exc_info=True)


async def _quietly(request: Any) -> None:
    try:
        await request
    except Exception:
        log.debug("terminal cleanup request failed", exc_info=True)


def make_executor(
    calls: ClientCalls,
    client: Any,
    session_id: str,
    working_dir: str,
    *,
    announce: Callable[[Any, str], None] | None = None,
    env: dict[str, str] | None = None,
) -> Any:
    """A terminal `ToolExecutor` running commands in the client's terminals.

    ``announce(action, terminal_id)`` is called on the Trio thread once the terminal
    exists, for the session to put ``{"type":"terminal","terminalId"}`` into the tool
    call whose action this is. ``env``: variables every command gets.
    """
    from openhands.sdk.tool import ToolExecutor
    from openhands.tools.terminal.definition import TerminalObservation
    from openhands.tools.terminal.metadata import CmdOutputMetadata

    class ClientTerminalExecutor(ToolExecutor):
        def __init__(self) -> None:
            self.root = working_dir
            self.cwd = working_dir
            self._lock = threading.Lock()
            # The session's lifeline (`command_script`): a FIFO only we hold open.
            self._lifeline: tuple[str, int] | None = None
            self._closed = False

        def lifeline(self) -> str | None:
            with self._lock:
                if self._lifeline is None and not self._closed:
                    self._lifeline = _open_lifeline()
                return self._lifeline[0] if self._lifeline is not None else None

        def close(self) -> None:
            # The SDK calls this when the conversation closes: what the session's commands
            # left running in the background is stopped (their watchers see the FIFO end).
            with self._lock:
                lifeline, self._lifeline = self._lifeline, None
                self._closed = True
            if lifeline is not None:
                _close_lifeline(*lifeline)

        def interrupt(self) -> None:
            # The SDK calls this from another thread when the conversation is
            # interrupted: the command's wait ends, its terminal is killed and released.
            calls.cancel_pending()

        def _observation(
            self,
            text: str,
            command: str,
            *,
            error: bool = False,
            exit_code: int | None = None,
            timeout: bool = False,
        ) -> Any:
            return TerminalObservation.from_text(
                text=text,
                command=command,
                is_error=error,
                exit_code=exit_code,
                timeout=timeout,
                metadata=CmdOutputMetadata(
                    exit_code=-1 if exit_code is None else exit_code, working_dir=self.cwd
                ),
            )

        def __call__(self, action: Any, conversation: Any = None) -> Any:
            command = action.command
            if action.reset:
                with self._lock:
                    self.cwd = self.root
                return self._observation(
                    "The terminal was reset; commands run in " + self.root, command, exit_code=0
                )
            if action.is_input:
                return self._observation(
                    "Input cannot be sent to a running process: each command runs to completion in "
                    "its own terminal of the editor. Run the command non-interactively instead.",
                    command,
                    error=True,
                )
            if not command.strip():
                return self._observation(
                    "No command is running: each command runs to completion.", command, error=True
                )
            timeout = action.timeout if action.timeout else DEFAULT_COMMAND_TIMEOUT
            with self._lock:
                cwd = self.cwd
            fd, cwd_file = tempfile.mkstemp(prefix="trio-acp-cwd-")
            os.close(fd)
            script = command_script(command, cwd_file, lifeline=self.lifeline())

            def on_created(tid: str) -> None:
                if announce is not None:
                    try:
                        announce(action, tid)
                    except Exception:
                        log.warning("could not announce terminal %s", tid, exc_info=True)

            try:
                result = calls.call(
                    lambda: run_in_client_terminal(
                        client,
                        session_id,
                        command="bash",
                        args=["-c", script],
                        cwd=cwd,
                        env=env,
                        timeout=timeout,
                        on_created=on_created,
                        create_timeout=calls.answer_timeout,
                    ),
                    what=f"running `{_short(command)}` in the editor's terminal",
                    # The create waits for whoever the client asks (no bound unless
                    # configured), then the command its own timeout.
                    timeout=calls.answer_timeout + timeout + 4 * CLEANUP_BUDGET + 30,
                )
            except ClientCallError as exc:
                return self._observation(str(exc), command, error=True)
            finally:
                new_cwd = _read_cwd(cwd_file)
            if new_cwd:
                with self._lock:
                    self.cwd = new_cwd
            text = result.output
            if result.truncated:
                text = f"[output truncated to its last {OUTPUT_BYTE_LIMIT} bytes]\n{text}"
            if result.timed_out:
                text += f"\n[The command did not finish within {timeout:g} s and was killed.]"
                return self._observation(text, command, error=True, timeout=True, exit_code=-1)
            if result.signal:
                text += f"\n[The command was terminated by {result.signal}.]"
            return self._observation(text, command, exit_code=result.exit_code)

    return ClientTerminalExecutor()


def command_script(
    command: str, cwd_file: str, *, lifeline: str | None = None, kill_grace: float = KILL_GRACE
) -> str:
    """The ``bash -c`` script running ``command`` in a client terminal (see the module doc).

    The command's own shell (the inner ``bash -c``) runs it as the text it is, then writes
    the directory it ends in to ``cwd_file``; its exit status is the script's, its stdin,
    stdout and stderr are the terminal's. It runs in the foreground (a background job
    would get /dev/null for stdin and SIGINT ignored), in a new session: no controlling
    terminal, so a command that opens /dev/tty fails at once instead of waiting for input
    nobody can send. Its first act is to tell the watcher its pid (its session's process
    group) and close the pipe, so nothing the command starts keeps the pipe open.

    The spawned bash writes ``done`` when the command has finished. If the command left
    something running in the background (``server &``), it keeps running as in the SDK's
    own terminal, until the session ends: the watcher then waits on ``lifeline``, a FIFO
    the agent holds open for the session (`ClientTerminalExecutor.close` closes it, and so
    does the agent's exit, however it comes), and stops the group when it reads its end.
    Without a lifeline (or if it is not on this machine) such processes are left alone.

    If the command's shell itself dies of a signal, the status is 128+N (the spawned bash
    outlives it), where a plain ``bash -c`` would have died of it. Without ``setsid`` the
    script runs the command as before, unwatched.
    """
    ticks = max(1, round(kill_grace * 10))
    life = shlex.quote(lifeline) if lifeline else "''"
    # POSIX sh (dash on Debian starts in a fraction of bash's time): no `kill --`.
    watch = (
        "read -r pg || exit 0\n"
        'case "$pg" in ""|*[!0-9]*|0|1) exit 0;; esac\n'
        'read -r how\nif [ "$how" = done ]; then\n'
        '  kill -0 "-$pg" 2>/dev/null || exit 0\n'
        f"  [ -p {life} ] || exit 0\n"
        f"  read -r _ < {life}\n"
        "fi\n"
        'kill -TERM "-$pg" 2>/dev/null || exit 0\n'
        f"for _ in $(seq {ticks}); do sleep 0.1; "
        'kill -0 "-$pg" 2>/dev/null || exit 0; done\n'
        'kill -KILL "-$pg" 2>/dev/null'
    )
    inner = (
        "trap '' PIPE; echo $$ >&9 2>/dev/null; trap - PIPE; exec 9>&-\n"
        f"{command}\n__trio_acp_status=$?\n"
        f"pwd -P > {shlex.quote(cwd_file)} 2>/dev/null\nexit $__trio_acp_status"
    )
    # fd 3 carries the terminal's stderr to the command, while the spawned bash's own
    # report of a shell killed by a signal ("Terminated") goes to /dev/null. SIGPIPE is
    # ignored only after the command, so that a watcher gone cannot fail a finished command.
    return (
        "if command -v setsid >/dev/null 2>&1; then\n"
        f"exec 9> >(exec setsid sh -c {shlex.quote(watch)} >/dev/null 2>&1); __trio_acp_s=setsid\n"
        "else exec 9>/dev/null; __trio_acp_s=; fi\n"
        f"{{ $__trio_acp_s bash -c {shlex.quote(inner)} 2>&3 3>&-; }} 3>&2 2>/dev/null\n"
        "__trio_acp_status=$?\ntrap '' PIPE\necho done >&9 2>/dev/null\n"
        "exit $__trio_acp_status"
    )


def _open_lifeline() -> tuple[str, int] | None:
    """A FIFO in a private directory, held open by us (read-write, so opening it never
    blocks and it reads its end only when we close it); (path, fd), or None."""
    try:
        path = os.path.join(tempfile.mkdtemp(prefix="trio-acp-session-"), "lifeline")
        os.mkfifo(path, 0o600)
        return path, os.open(path, os.O_RDWR)  # not inherited by our children (PEP 446)
    except OSError:
        log.warning("no lifeline for the editor terminal's background processes", exc_info=True)
        return None


def _close_lifeline(path: str, fd: int) -> None:
    # Unlinked before it is closed: a watcher opens it while we still hold it, or not at all.
    with contextlib.suppress(OSError):
        os.unlink(path)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(path))
    os.close(fd)


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


def _short(command: str) -> str:
    line = " ".join(command.split())
    return line if len(line) <= 80 else line[:79] + "…"
