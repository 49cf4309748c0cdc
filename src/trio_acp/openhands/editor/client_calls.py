"""A tool running in an SDK thread asks the client something, and waits safely.

Reading a file through the editor (`fs/read_text_file`) or running a command in its
terminal (`terminal/*`) means a tool executor — running in one of the SDK's worker threads,
while the SDK's event loop holds the conversation's state lock — must wait for an answer
that only the Trio side can carry. That wait is the one place where the SDK waits on Trio,
so it is built to be released whatever happens:

* the thread hands the call over without blocking Trio: `TrioToken.run_sync_soon` puts it
  on an unbounded channel (never waits), and a dispatcher task in the session's nursery
  starts one Trio task per call;
* the thread then waits on a `concurrent.futures.Future`, which is completed by
  (a) the client's answer (or its error: `ClientCallFailed`);
  (b) the turn's cancel (`cancel_turn`): the future fails *at once* with
      `ClientCallCancelled`, and the Trio task is cancelled, so the rpc layer sends
      ``$/cancel_request`` for the outstanding request (`rpc/_peer.py`, `Peer.request`);
      the task's own shielded cleanup (e.g. ``terminal/kill`` + ``terminal/release``) runs
      with a deadline, and `cancel_turn_and_wait` lets the turn wait for it before it
      answers;
  (c) a timeout (`DEFAULT_TIMEOUT`, or the caller's; `math.inf` for none):
      `ClientCallTimeout`, and the Trio task is cancelled as in (b);
  (d) the session closing (`close`): `ClientCallClosed`, and every task is cancelled.
* Trio never waits on the SDK: nothing here takes the SDK's state lock, and Trio never
  waits for the thread (it completes the future and moves on).

A call a person may answer (the client asks its user before it creates a terminal or
writes a file, as acpx does) has no fixed short timeout: it waits at most
`ClientCalls.answer_timeout` (``TRIO_ACP_ANSWER_TIMEOUT`` seconds, unbounded unless set:
`configured_answer_timeout`), and the turn's cancel, the session's end and the client's
exit release it (docs/editor-workspace.md, "The wait").

After `cancel_turn` new calls fail with `ClientCallCancelled` until `begin_turn`: a tool
thread that outlives the interrupt must not start new client requests after the turn's
response. Every error is a `ClientCallError`: one type for an executor to turn into a
failed tool call with a readable reason.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar, cast

import trio

from trio_acp.rpc import PeerClosed, RequestError

__all__ = [
    "ANSWER_TIMEOUT_VAR",
    "DEFAULT_TIMEOUT",
    "CLEANUP_BUDGET",
    "ClientCallCancelled",
    "ClientCallClosed",
    "ClientCallError",
    "ClientCallFailed",
    "ClientCallTimeout",
    "ClientCalls",
    "configured_answer_timeout",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds a client call may take when its caller gives no timeout. Generous on purpose:
#: an editor may hold `fs/write_text_file` until the user has reviewed the edit.
DEFAULT_TIMEOUT = 300.0
#: Seconds a cancelled call's shielded cleanup (kill + release of a terminal) may take.
CLEANUP_BUDGET = 2.0
#: The variable bounding the wait for an answer a person may give (`answer_timeout`).
ANSWER_TIMEOUT_VAR = "TRIO_ACP_ANSWER_TIMEOUT"


def configured_answer_timeout(env: Mapping[str, str] | None = None) -> float:
    """Seconds to wait for an answer a person may give — `terminal/create` and
    `fs/write_text_file` (a client may ask its user first: acpx does) and
    `session/request_permission` — from ``TRIO_ACP_ANSWER_TIMEOUT``; `math.inf` (no bound)
    when it is unset, empty, ``0``/``none``, or not a positive number (logged). A person
    may take minutes to answer; whoever waits is released by the turn's cancel, the
    session's end or the client's exit, never by a short fixed timeout."""
    raw = (os.environ if env is None else env).get(ANSWER_TIMEOUT_VAR, "").strip()
    if raw.lower() in {"", "0", "none", "inf", "infinity"}:
        return math.inf
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value > 0:  # NaN too
        log.warning("%s=%r is not a number of seconds: no bound", ANSWER_TIMEOUT_VAR, raw)
        return math.inf
    return value


class ClientCallError(Exception):
    """A client call did not produce a result; the message says why, for the model."""


class ClientCallCancelled(ClientCallError):
    def __init__(self, what: str = "the client request") -> None:
        super().__init__(f"{what} was cancelled: the user cancelled the turn")


class ClientCallTimeout(ClientCallError):
    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(f"{what} timed out: the client did not answer within {timeout:g} s")


class ClientCallClosed(ClientCallError):
    def __init__(self, what: str = "the client request") -> None:
        super().__init__(f"{what} failed: the session or the connection is closed")


class ClientCallFailed(ClientCallError):
    """The client answered with an error: `code` and `reason` are its own."""

    def __init__(self, what: str, code: int | None, reason: str) -> None:
        self.code = code
        self.reason = reason
        super().__init__(f"{what} failed: {reason}" if reason else f"{what} failed")


class _Call:
    __slots__ = ("cancel_requested", "deadline_error", "fn", "future", "scope", "timeout", "what")

    def __init__(self, fn: Callable[[], Awaitable[object]], what: str, timeout: float) -> None:
        self.fn = fn
        self.what = what
        self.timeout = timeout
        # Holds what `fn` returned: `ClientCalls.call` gives it back as its caller's type.
        self.future: concurrent.futures.Future[object] = concurrent.futures.Future()
        # Set in the Trio thread only.
        self.scope: trio.CancelScope | None = None
        self.cancel_requested = False
        self.deadline_error: ClientCallError | None = None

    def settle(self, result: object = None, error: BaseException | None = None) -> bool:
        """Complete the future unless it already is; True if this call completed it."""
        # Future.set_* raise if already done; the future's own lock makes check+set safe
        # only under ours, since two threads (waiter, Trio) may settle at once.
        with _SETTLE_LOCK:
            if self.future.done():
                return False
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)
            return True


_SETTLE_LOCK = threading.Lock()


class ClientCalls:
    """The session's carrier of client calls made from SDK threads (see the module doc).

    Start `run` in the session's nursery (``await nursery.start(calls.run)``); call
    `call` from a tool thread; call `begin_turn` / `cancel_turn` (or
    `cancel_turn_and_wait`) from the turn, and `close` when the session ends.
    """

    def __init__(
        self, *, default_timeout: float = DEFAULT_TIMEOUT, answer_timeout: float | None = None
    ) -> None:
        self.default_timeout = default_timeout
        #: The bound of a call a person may answer (module doc); from the environment
        #: unless given.
        self.answer_timeout = (
            configured_answer_timeout() if answer_timeout is None else answer_timeout
        )
        self._lock = threading.Lock()
        self._pending: set[_Call] = set()
        self._accepting_turn = True
        self._closed = False
        self._token: trio.lowlevel.TrioToken | None = None
        self._trio_thread: threading.Thread | None = None
        self._send, self._receive = trio.open_memory_channel[_Call](math.inf)
        self._tasks = 0
        self._idle = trio.Event()
        self._idle.set()

    # --- the Trio side ----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve calls until `close` or until cancelled (which closes too)."""
        self._token = trio.lowlevel.current_trio_token()
        self._trio_thread = threading.current_thread()
        try:
            async with trio.open_nursery() as nursery:
                task_status.started()
                async with self._receive:
                    async for call in self._receive:
                        self._tasks += 1
                        if self._tasks == 1:
                            self._idle = trio.Event()
                        nursery.start_soon(self._serve, call)
                # Closed: the tasks were cancelled by close(); they finish their cleanup.
        finally:
            self.close()

    async def _serve(self, call: _Call) -> None:
        try:
            if call.future.done():
                return  # cancelled or timed out before it started: never sent
            with trio.CancelScope() as scope:
                scope.deadline = trio.current_time() + call.timeout
                call.scope = scope
                if call.cancel_requested:
                    scope.cancel()
                try:
                    result = await call.fn()
                except RequestError as exc:
                    call.settle(error=ClientCallFailed(call.what, exc.code, client_reason(exc)))
                except PeerClosed:
                    call.settle(error=ClientCallClosed(call.what))
                except ClientCallError as exc:
                    call.settle(error=exc)
                except Exception as exc:
                    log.warning("client call %s failed", call.what, exc_info=True)
                    call.settle(
                        error=ClientCallFailed(
                            call.what, None, _one_line(str(exc)) or type(exc).__name__
                        )
                    )
                else:
                    call.settle(result)
            if scope.cancelled_caught:
                call.settle(error=call.deadline_error or ClientCallTimeout(call.what, call.timeout))
        finally:
            # Cancelled from outside (the session's nursery is going): the thread must
            # still be released.
            call.settle(error=ClientCallClosed(call.what))
            self._tasks -= 1
            if self._tasks == 0:
                self._idle.set()
            with self._lock:
                self._pending.discard(call)

    def begin_turn(self) -> None:
        """A turn starts: calls are accepted again after a `cancel_turn`."""
        with self._lock:
            self._accepting_turn = True

    def cancel_turn(self) -> None:
        """Fail every pending call at once and cancel its request; refuse new calls until
        `begin_turn`. Synchronous and never blocks: callable from the Trio thread (the
        turn's cancel) or from any thread."""
        with self._lock:
            self._accepting_turn = False
        self.cancel_pending()

    def cancel_pending(self) -> None:
        """Fail every pending call at once and cancel its request, and nothing more: what
        a tool executor's `interrupt()` does (the SDK calls it from its own thread when
        the conversation is interrupted), so the wait never outlives an interrupt even
        where the turn's cancel is not wired in."""
        with self._lock:
            calls = list(self._pending)
        for call in calls:
            self._abort(call, ClientCallCancelled(call.what))

    async def cancel_turn_and_wait(self, budget: float = CLEANUP_BUDGET) -> None:
        """`cancel_turn`, then wait (at most `budget` seconds, shielded) for the cancelled
        requests' cleanup — e.g. `terminal/kill` + `terminal/release` — to be sent, so it
        precedes the turn's `cancelled` response."""
        self.cancel_turn()
        with trio.move_on_after(budget, shield=True):
            await self._idle.wait()

    def close(self) -> None:
        """The session is closing: fail everything pending, refuse every new call."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            calls = list(self._pending)
        for call in calls:
            self._abort(call, ClientCallClosed(call.what))
        self._send.close()

    def _abort(self, call: _Call, error: ClientCallError) -> None:
        call.settle(error=error)
        if self._in_trio_thread():
            self._cancel_scope(call, error)
        elif self._token is not None:
            try:
                self._token.run_sync_soon(self._cancel_scope, call, error)
            except trio.RunFinishedError:
                pass

    @staticmethod
    def _cancel_scope(call: _Call, error: ClientCallError) -> None:
        call.deadline_error = call.deadline_error or error
        call.cancel_requested = True
        if call.scope is not None:
            call.scope.cancel()

    def _in_trio_thread(self) -> bool:
        return threading.current_thread() is self._trio_thread

    @property
    def pending(self) -> int:
        """How many calls are waiting for an answer (for tests and diagnostics)."""
        with self._lock:
            return len(self._pending)

    # --- the SDK-thread side ------------------------------------------------------------

    def call(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        what: str = "the client request",
        timeout: float | None = None,
    ) -> T:
        """Run ``await fn()`` on the Trio side and wait for its result, from a thread that
        is not Trio's. Raises a `ClientCallError` (see the module doc); never hangs past
        the timeout (`math.inf`: none; the cancel, close and the client's exit still
        release it). ``what`` names the request in error messages ("reading /a/b.py")."""
        if self._in_trio_thread():
            raise RuntimeError("ClientCalls.call() waits: it must not run on the Trio thread")
        timeout = self.default_timeout if timeout is None else timeout
        call = _Call(fn, what, timeout)
        with self._lock:
            if self._closed or self._token is None:
                raise ClientCallClosed(what)
            if not self._accepting_turn:
                raise ClientCallCancelled(what)
            self._pending.add(call)
        try:
            try:
                self._token.run_sync_soon(self._submit, call)
            except trio.RunFinishedError:
                call.settle(error=ClientCallClosed(what))
            try:
                # Waiting without a bound is safe: every way out settles the future
                # (answer, cancel, close, the client's exit, the task's own end).
                # The future holds what `fn` returned (`_serve`), a T.
                return cast(T, call.future.result(None if math.isinf(timeout) else timeout))
            except concurrent.futures.TimeoutError:
                # The Trio side should have timed out first; whatever held it, the thread
                # goes now, and the request is cancelled behind it.
                error = ClientCallTimeout(what, timeout)
                self._abort(call, error)
                raise error from None
        finally:
            with self._lock:
                self._pending.discard(call)

    def _submit(self, call: _Call) -> None:
        try:
            self._send.send_nowait(call)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            call.settle(error=ClientCallClosed(call.what))


def client_reason(error: RequestError) -> str:
    """What a client's error answer says, in one line: ``data.details`` (acpx puts the
    real reason there under a generic ``"Internal error"``), else a string ``data`` or
    ``data.message``, else the error's ``message``."""
    data = error.data
    for candidate in (
        data.get("details") if isinstance(data, dict) else None,
        data if isinstance(data, str) else None,
        data.get("message") if isinstance(data, dict) else None,
        error.message,
    ):
        if isinstance(candidate, str) and candidate.strip():
            line = " ".join(candidate.split())
            return line if len(line) <= 500 else line[:499] + "…"
    return f"error {error.code}"


def _one_line(text: object) -> str:
    return " ".join(str(text).split())[:1000]
