"""A session answered before the SDK is imported: its conversation is built in the background.

A new process answers `initialize` at once and imports the SDK on a thread (~7 s CPU,
docs/ARCHITECTURE.md#d3-an-instant-initialize). `session/new` used to wait for that import:
spawn → first `session/new` took 6-9 s. What its answer holds needs no SDK — the session
id, the modes, the config options (mode, model, streaming) — and neither do most of the
checks that can refuse it (the cwd, the settings, the model list, the user's set-up files
and the request's MCP servers: `agent.py`, `user_setup.py`). So a new in-process session
opened before the import is over is answered after those checks, and its conversation is
built in the session's nursery once the SDK is in (`Session._open_in_background`):

- whatever needs the conversation waits for it (`Session.until_open`): the first prompt,
  a `session/set_mode` or `set_config_option`, a fork, a load or resume of it;
- a cancel (`session/cancel`, the request's own cancel, closing) still answers
  `cancelled` at once: the prompt's wait races its ticket's cancel event;
- what the build refuses (the model's settings, which only the SDK validates; the skills,
  the hooks file; the conversation itself) is the answer to each of those requests, the
  same error `session/new` gave before;
- what only the built model tells (whether it has a reasoning effort to choose) reaches
  the client as a `config_option_update` after the answer.

Once the SDK is imported, a session is built before it is answered, as always; except in
a warm server's child (warm_server.py), whose SDK is imported before it starts: it answers
as a cold launch does (`answer_before_build`), so the build (the SDK agent, its tools, the
conversation: 100-400 ms of a warm launch) is not in its `session/new` either, and a
launch behaves the same whether it was served warm or cold.
"""

from __future__ import annotations

import trio

from trio_acp.rpc import RequestError

_always = False


def answer_before_build() -> None:
    """New sessions of this process are answered before they are built, even with the SDK
    imported (a warm child: warm_server.py)."""
    global _always
    _always = True


def always() -> bool:
    return _always


class BuildGate:
    """Whether a session's conversation is open yet: open, failed (with the error to
    answer), or never (the session closed first)."""

    def __init__(self) -> None:
        self._done = trio.Event()
        self._error: RequestError | None = None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def opened(self) -> None:
        self._done.set()

    def failed(self, error: RequestError) -> None:
        if not self._done.is_set():
            self._error = error
            self._done.set()

    def closed(self) -> None:
        self._done.set()

    async def wait(self, cancel: trio.Event | None = None) -> bool:
        """True once the build is over, False if `cancel` is set first (then at once).
        Raises the build's error, a fresh copy for each caller."""
        if not self._done.is_set():
            if cancel is None:
                await self._done.wait()
            else:
                await first_of(self._done, cancel)
        if cancel is not None and cancel.is_set():
            return False
        if self._error is not None:
            error = self._error
            raise RequestError(error.code, error.message, error.data)
        return True


async def first_of(*events: trio.Event) -> None:
    """Return as soon as one of `events` is set."""
    if any(event.is_set() for event in events):
        return
    async with trio.open_nursery() as nursery:

        async def wait(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        for event in events:
            nursery.start_soon(wait, event)
