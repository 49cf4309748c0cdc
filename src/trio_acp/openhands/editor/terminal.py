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

A client that answers ``terminal/create`` with an error (acpx: its user or its policy
refused the command) fails the tool call with its own reason (`client_reason`: acpx's
``data.details``, not its generic ``"Internal error"``); the command never ran, so it has
no exit code (`CommandNotStarted`).

On the turn's cancel the Trio task running this is cancelled: the pending request gets
``$/cancel_request`` (rpc layer), then ``terminal/kill`` and ``terminal/release`` are sent,
shielded, within `CLEANUP_BUDGET` (`client_calls.ClientCalls.cancel_turn_and_wait` lets
the turn wait for them before it answers `cancelled`). `terminal/create` itself may wait
for a person (the client may ask its user first), so it has no short timeout and a cancel
does not wait for it: the request is cancelled, and a terminal the client still creates
afterwards is killed and released as soon as its answer arrives (``on_late``).

A client terminal runs one command, where the SDK's terminal is a shell session that
lives across commands. The client is asked for exactly the command the model wrote:
``terminal/create`` carries ``bash`` and ``["-c", <the command>]``, which is what editors
show (acpx asks the user to approve that line, Zed and Toad head the terminal with it).
What trio-acp adds runs unseen: ``env`` (which clients pass to the process but do not
show) sets ``BASH_ENV`` to a small set-up script trio-acp writes for the command in a
private directory of the session, and bash sources it before it runs the command
(`setup_script`). The set-up keeps the working directory (the directory the command ends
in is written to a private file, read back after exit, so ``cd src`` still holds for the
next command), and stops the whole command when it should:

* `terminal/kill` must stop the whole command, whatever the client signals: some clients
  (acpx 0.15) signal only the process they spawned, which left a ``sleep`` under that bash
  running. So the command runs in its own session (util-linux ``setsid``), and a watcher,
  also in a session of its own, holds the read end of a pipe only the spawned bash writes
  to: when that bash dies in any way (signal, SIGKILL, its group killed), the pipe closes
  and the watcher sends the command's process group SIGTERM, then SIGKILL after
  `terminal_launch.KILL_GRACE` seconds.
* The session's end, and the agent's death however it comes (SIGKILL included), stop the
  command and what it left running in the background: the watcher also waits on the
  session's lifeline, a FIFO whose only writer is this process (`_Private`); the kernel
  closes it when the process dies, and the watcher then stops the group. A process that
  dies that way leaves its private directory behind (`trio-acp-session-<pid>-…` in the
  temporary directory): the next trio-acp process that opens one removes those of
  processes that no longer exist (private_dirs.py).

A client that drops ``env`` runs the bare command (no set-up ran: its private file is
untouched); from then on the session passes ``BASH_ENV`` on the command line instead
(``BASH_ENV=… exec bash -c '<the command>'``, still far shorter than the script itself).
Exported variables do not carry over; input to a running process (``is_input``) is
refused with an explanation, and ``reset`` starts again from the session's directory.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import attrs
import trio

from trio_acp import schema
from trio_acp.openhands.editor.client_calls import (
    CLEANUP_BUDGET,
    ClientCallError,
    ClientCallFailed,
    ClientCalls,
    ClientCallTimeout,
    client_reason,
)
from trio_acp.openhands.editor.terminal_launch import (
    Launch,
    _Private,
)
from trio_acp.rpc import RequestError

if TYPE_CHECKING:
    from trio_acp.connection import ClientProxy
    from trio_acp.openhands.sdk.classes import (
        Action,
        TerminalAction,
        TerminalObservation,
        ToolExecutor,
    )

log = logging.getLogger(__name__)

#: Seconds a command may run when the model sets no timeout (then it is killed).
DEFAULT_COMMAND_TIMEOUT = 600.0
#: Seconds the client may take to answer `terminal/kill` and `terminal/output` (it answers
#: them itself; `terminal/create` may wait for a person: no such bound).
ANSWER_BUDGET = 30.0
#: The most output the editor keeps per command (its `outputByteLimit`), and the model sees.
OUTPUT_BYTE_LIMIT = 256 * 1024


class CommandNotStarted(ClientCallFailed):
    """The client answered `terminal/create` with an error (acpx: the user or its policy
    refused the command): nothing ran. The message carries the client's own reason."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__("terminal/create", code, reason)
        self.args = (f"The editor did not run the command: {reason}",)


@attrs.frozen
class CommandResult:
    terminal_id: str
    output: str
    truncated: bool
    exit_code: int | None
    signal: str | None
    timed_out: bool


async def run_in_client_terminal(
    client: ClientProxy,
    session_id: str,
    *,
    command: str,
    args: list[str] | None = None,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    output_byte_limit: int | None = OUTPUT_BYTE_LIMIT,
    timeout: float = DEFAULT_COMMAND_TIMEOUT,
    on_created: Callable[[str], object] | None = None,
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
        try:
            created = await client.create_terminal(
                session_id=session_id,
                command=command,
                args=args or None,
                cwd=cwd,
                env=[schema.EnvVariable(name=k, value=v) for k, v in (env or {}).items()] or None,
                output_byte_limit=output_byte_limit,
                on_late=created_late,
            )
        except RequestError as exc:
            raise CommandNotStarted(exc.code, client_reason(exc)) from exc
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


async def _discard_terminal(client: ClientProxy, ids: dict[str, str], budget: float) -> None:
    """Kill and release a terminal nobody uses (a system task: it must never raise)."""
    try:
        with trio.move_on_after(budget):
            await _quietly(client.kill_terminal(**ids))
            await _quietly(client.release_terminal(**ids))
    except Exception:  # an exception out of a system task would crash the whole run
        log.debug("could not discard terminal %s", ids.get("terminal_id"), exc_info=True)


async def _quietly(request: Awaitable[object]) -> None:
    try:
        await request
    except Exception:
        log.debug("terminal cleanup request failed", exc_info=True)


def make_executor(
    calls: ClientCalls,
    client: ClientProxy,
    session_id: str,
    working_dir: str,
    *,
    announce: Callable[[Action, str], None] | None = None,
    env: dict[str, str] | None = None,
) -> ToolExecutor[TerminalAction, TerminalObservation]:
    """A terminal `ToolExecutor` running commands in the client's terminals (call after
    the SDK's load: `sdk/terminal_tools.py`).

    ``announce(action, terminal_id)`` is called on the Trio thread once the terminal
    exists, for the session to put ``{"type":"terminal","terminalId"}`` into the tool
    call whose action this is. ``env``: variables every command gets.
    """
    from trio_acp.openhands.sdk.terminal_tools import ClientTerminalExecutor

    terminal = ClientTerminal(calls, client, session_id, working_dir, announce=announce, env=env)
    return ClientTerminalExecutor(terminal)


@attrs.frozen
class Outcome:
    """What a command's run gives the model (the SDK's `TerminalObservation` is made of it)."""

    text: str
    command: str
    error: bool
    exit_code: int | None
    timeout: bool
    working_dir: str


class ClientTerminal:
    """The terminal tool in the editor's terminals: its state (the directory it is in, the
    session's private directory) and one command's run (module doc). The SDK's executor
    (`sdk/terminal_tools.py`) calls it and makes the SDK's observation of its `Outcome`."""

    def __init__(
        self,
        calls: ClientCalls,
        client: ClientProxy,
        session_id: str,
        working_dir: str,
        *,
        announce: Callable[[Action, str], None] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self._calls, self._client, self._session_id = calls, client, session_id
        self._announce, self._env = announce, env
        self.root = working_dir
        self.cwd = working_dir
        self._lock = threading.Lock()
        # The session's private directory and lifeline (module doc), made on first use.
        self._private: _Private | None = None
        self._closed = False
        self._commands = 0
        # Set once the client is seen dropping `env`: BASH_ENV goes on the command line.
        self._env_dropped = False

    def private(self) -> _Private | None:
        with self._lock:
            if self._private is None and not self._closed:
                self._private = _Private.open()
            return self._private

    def close(self) -> None:
        # The SDK calls this when the conversation closes: what the session's commands
        # left running in the background is stopped (their watchers see the FIFO end).
        with self._lock:
            private, self._private = self._private, None
            self._closed = True
        if private is not None:
            private.close()

    def interrupt(self) -> None:
        # The SDK calls this from another thread when the conversation is
        # interrupted: the command's wait ends, its terminal is killed and released.
        self._calls.cancel_pending()

    def _observation(
        self,
        text: str,
        command: str,
        *,
        error: bool = False,
        exit_code: int | None = None,
        timeout: bool = False,
    ) -> Outcome:
        return Outcome(text, command, error, exit_code, timeout, self.cwd)

    def _launch(self, command: str) -> Launch:
        private = self.private()
        with self._lock:
            self._commands += 1
            n = self._commands
            env_dropped = self._env_dropped
        if private is None:
            return Launch.bare(command, self._env)
        return private.launch(command, n, self._env, on_command_line=env_dropped)

    def run(self, action: TerminalAction) -> Outcome:
        """Run one `TerminalAction` in a terminal of the editor; blocking (a tool thread)."""
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
        launch = self._launch(command)

        def on_created(tid: str) -> None:
            if self._announce is not None:
                try:
                    self._announce(action, tid)
                except Exception:
                    log.warning("could not announce terminal %s", tid, exc_info=True)

        try:
            calls = self._calls
            result = calls.call(
                lambda: run_in_client_terminal(
                    self._client,
                    self._session_id,
                    command=launch.command,
                    args=launch.args,
                    cwd=cwd,
                    env=launch.env,
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
            launch.finish()
            return self._observation(str(exc), command, error=True)
        new_cwd, set_up = launch.finish()
        if new_cwd:
            with self._lock:
                self.cwd = new_cwd
        if not set_up and not result.timed_out and result.signal is None:
            # The command ran to its end without our set-up: the client dropped `env`.
            with self._lock:
                if not self._env_dropped:
                    log.info(
                        "the client ran the terminal command without the environment it "
                        "was given (BASH_ENV): the set-up goes on the command line from now"
                    )
                self._env_dropped = True
        text = result.output
        if result.truncated:
            text = f"[output truncated to its last {OUTPUT_BYTE_LIMIT} bytes]\n{text}"
        if result.timed_out:
            text += f"\n[The command did not finish within {timeout:g} s and was killed.]"
            return self._observation(text, command, error=True, timeout=True)
        if result.signal:
            text += f"\n[The command was terminated by {result.signal}.]"
        return self._observation(text, command, exit_code=result.exit_code)


def _short(command: str) -> str:
    line = " ".join(command.split())
    return line if len(line) <= 80 else line[:79] + "…"
