"""The SDK's own terminal, its command's output shown live through Zed's `_meta` convention.

For a client that asks for `_meta.terminal_output` and offers no terminals of its own
(`terminal_meta.supports_terminal_meta`), the commands still run in the SDK's shell, but
the tool call embeds a pseudo-terminal and receives the output as it comes
(`terminal_meta.TerminalMetaStream`: `terminal_info`, `terminal_output` with only the new
text, `terminal_exit`). The SDK's executor has no output callback; it keeps the shell's
screen, which it polls itself while a command runs. `LiveTerminalExecutor` wraps it: while
the SDK's executor runs the command (in its tool thread), a watcher thread reads the same
screen every `POLL_INTERVAL` seconds and streams what was added since the command began.

Only whole lines are streamed while the command runs (the rest at the end): a credential
split across two updates would be in no single frame, where the writer's masking finds
whole values (credentials.py). The prompt markers the SDK puts on the screen
(`###PS1JSON###`) end the streamed part; the model's result is the SDK's observation, as
without this.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from trio_acp import schema
from trio_acp.openhands.editor.terminal_meta import TerminalMetaStream
from trio_acp.openhands.permissions import run_gate

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import (
        Action,
        TerminalAction,
        TerminalObservation,
        ToolExecutor,
    )

#: Sends an update of the running turn (from any thread).
Post = Callable[[schema.ToolCallProgress], None]

log = logging.getLogger(__name__)

#: Seconds between two reads of the screen while a command runs.
POLL_INTERVAL = 0.1
_PS1_MARK = "###PS1JSON###"
# The shell's bracketed-paste toggles around each command: noise on a client's terminal
# (colours and the like are kept: a terminal renders them).
_PASTE_MODE = re.compile(r"\x1b\[\?2004[hl]")


class _Watch:
    """One command's screen watcher (its own daemon thread)."""

    def __init__(self, read_screen: Callable[[], str], stream: TerminalMetaStream, post: Post):
        self._read = read_screen
        self._stream = stream
        self._post = post
        self._stop = threading.Event()
        self._start = self._screen()
        self._sent = 0  # characters of the new text already streamed
        self._thread = threading.Thread(
            target=self._run, name="trio-acp-terminal-live", daemon=True
        )

    def _screen(self) -> str | None:
        try:
            return self._read()
        except Exception:
            return None

    def _new_text(self) -> str | None:
        screen = self._screen()
        start = self._start
        if screen is None or start is None or not screen.startswith(start):
            return None  # the screen was cleared or replaced: nothing we can place
        text = _PASTE_MODE.sub("", screen[len(start) :])
        mark = text.find(_PS1_MARK)
        if mark >= 0:
            text = text[:mark]
            text = text[: text.rfind("\n") + 1]  # the marker's own line is not output
        return text

    def _feed(self, *, whole_lines: bool) -> None:
        text = self._new_text()
        if text is None or len(text) <= self._sent:
            return
        fresh = text[self._sent :]
        if whole_lines:
            cut = fresh.rfind("\n")
            if cut < 0:
                return
            fresh = fresh[: cut + 1]
        self._sent += len(fresh)
        for update in self._stream.feed(fresh):
            self._post(update)

    def _run(self) -> None:
        while not self._stop.wait(POLL_INTERVAL):
            try:
                self._feed(whole_lines=True)
            except Exception:
                log.debug("reading the terminal's screen failed", exc_info=True)
                return

    def start(self) -> None:
        self._post(self._stream.start())
        self._thread.start()

    def finish(self, exit_code: int | None) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * POLL_INTERVAL + 1)
        try:
            self._feed(whole_lines=False)
        except Exception:
            log.debug("reading the terminal's screen failed", exc_info=True)
        self._post(self._stream.exit(exit_code))


class LiveOutput:
    """One session's live terminal output: what the SDK's executor wrapper
    (`sdk/terminal_tools.py`, `LiveTerminalExecutor`) does around each command.

    ``tool_call_id(action)`` names the tool call of an action; ``post(update)`` sends an
    update of the running turn (from any thread); ``embed(tool_call_id, terminal_id)``
    keeps the pseudo-terminal in the tool call's last update.
    """

    def __init__(
        self,
        *,
        tool_call_id: Callable[[Action], str | None],
        post: Post,
        embed: Callable[[str, str], None],
    ) -> None:
        self._tool_call_id, self._post, self._embed = tool_call_id, post, embed

    def run(
        self,
        action: TerminalAction,
        command: Callable[[], TerminalObservation],
        *,
        read: Callable[[], str] | None,
        cwd: str | None,
    ) -> TerminalObservation:
        """`command()` (the SDK's executor on `action`), its screen `read` streamed to
        the tool call while it runs; returns its observation."""
        call_id = self._tool_call_id(action)
        if call_id is None:
            return command()
        # Its command can be stopped on its own, the turn going on (run_gate.py).
        with run_gate.working_on(call_id):
            return self._run(action, call_id, command, read=read, cwd=cwd)

    def _run(
        self,
        action: TerminalAction,
        call_id: str,
        command: Callable[[], TerminalObservation],
        *,
        read: Callable[[], str] | None,
        cwd: str | None,
    ) -> TerminalObservation:
        if read is None or action.is_input or not action.command.strip():
            return command()
        stream = TerminalMetaStream(call_id, cwd=cwd)
        self._embed(call_id, stream.terminal_id)
        watch = _Watch(read, stream, self._post)
        watch.start()
        exit_code: int | None = None
        try:
            observation = command()
            exit_code = getattr(observation, "exit_code", None)
            if exit_code == -1:
                exit_code = None  # still running (the SDK's timeout)
            return observation
        finally:
            watch.finish(exit_code)


def wrap_executor(
    executor: ToolExecutor[TerminalAction, TerminalObservation],
    *,
    tool_call_id: Callable[[Action], str | None],
    post: Post,
    embed: Callable[[str, str], None],
) -> ToolExecutor[TerminalAction, TerminalObservation]:
    """The SDK's `TerminalExecutor`, streaming each command's output (module doc); call
    after the SDK's load (`sdk/terminal_tools.py`)."""
    from trio_acp.openhands.sdk.terminal_tools import LiveTerminalExecutor

    return LiveTerminalExecutor(
        executor, LiveOutput(tool_call_id=tool_call_id, post=post, embed=embed)
    )
