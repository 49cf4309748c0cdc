"""The Trio driver: one JSON-RPC connection over any `trio.abc.Stream`.

Task layout of one connection (all inside `open_peer`'s nursery)::

    _run
     ├── writer        the only task that calls stream.send_all()
     └── handlers      nursery: one task per inbound request
          └── reader   the body: the only task that calls stream.receive_some()

* Writing.  Every outgoing message is serialized first and queued, whole, on a bounded
  memory channel; the writer drains everything queued and writes it with one
  ``send_all`` (or, where the stream allows it and the pipe has room, one synchronous
  ``write()``: no extra scheduler pass).  A task cancelled while sending can therefore
  never leave half a frame on the wire, and the channel bound gives back-pressure.
  Where the bytes leave (the direct write below and the writer's batch) they pass the
  connection's ``mask`` (given to `open_peer`): the one place every frame goes through,
  whatever made it (an update, a response, an error message, a request to the other
  side) and whatever the stream is (stdio, a socket, an in-memory pair).  Requests and responses (frames
  the other side waits for) skip the queue when it is empty and the writer idle: they are
  written at once, synchronously, if the stream allows it (`trio_acp.rpc._direct`), and
  the writer sends whatever the pipe did not take.  Notifications queue, so a burst of
  them still leaves in few writes, unless the sender asks for one to go at once
  (``notify(..., at_once=True)``: the last it has for now; the session's update pump does).
* Reading.  The reader parses each line and
    - starts a task per inbound **request** (so a handler awaiting a request to the other
      side never blocks the reader), at most ``max_running_requests`` at once: the next
      ones wait their turn, in order, as their lines (``max_waiting_requests``,
      ``max_waiting_bytes``), and when those are full too the reader stops reading, so a
      client that pipelines requests and reads no answers meets back-pressure (its writes
      block) instead of a process that grows without bound.  Except while this side waits
      on an answer from the other (an outbound request is pending): that answer, or a
      notification such as ``session/cancel``, may be behind the requests, so the reader
      reads on and refuses what it cannot keep (``-32603``, "too many requests in
      flight").  See `trio_acp.rpc._admission`;
    - runs **notification** handlers inline, one at a time, in wire order.  So every
      notification that precedes a response on the wire has been handled before the task
      awaiting that response wakes up (ACP: all ``session/update``\\s of a turn before the
      ``session/prompt`` result).  The price: a notification handler must be quick and must
      never await a request to the same peer (the response could not be read: deadlock).
      Hand slow work to a task;
    - completes pending outbound requests from **responses** (late or unknown ids are
      dropped);
    - answers anything **invalid** with a JSON-RPC error (never a notification).
    The answers the reader makes itself (to invalid frames, to requests it refuses) never
    make it wait on the writer: past a full writer queue they are kept, as many as
    requests may wait, for a task that queues them (`Peer._answer`), so a client that
    writes garbage and reads nothing cannot stop the reader short of that bound (the
    answer it owes to a request of ours may be behind the garbage).
* Shutdown (EOF, a broken pipe, `Peer.aclose`, leaving `open_peer`): stop reading; fail
  pending outbound requests with `PeerClosed`; cancel in-flight inbound handlers, which
  answer ``-32800`` unless they return something else first; wait for them at most
  ``shutdown_grace`` seconds (then cancel them hard: no answer); flush queued frames for
  at most ``shutdown_grace`` seconds more; close the stream.  Trio cannot abandon a task:
  shielded cleanup in a handler must carry its own deadline
  (``trio.move_on_after(t, shield=True)``) or it will hold the shutdown up.
"""

from __future__ import annotations

import collections
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, Protocol

import trio

from ..exception_groups import leaves, reraise
from ._admission import Admission
from ._context import current_request_id
from ._direct import direct_sender
from ._errors import ErrorCode, PeerClosed, RequestError
from ._framing import DEFAULT_MAX_FRAME_SIZE, FrameTooLarge, LineBuffer
from ._messages import (
    ErrorResponse,
    InvalidMessage,
    Notification,
    Request,
    RequestId,
    Result,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
    is_request_id,
    parse_message,
)

__all__ = [
    "CANCEL_REQUEST_METHOD",
    "FrameMask",
    "Handler",
    "Peer",
    "after_response",
    "current_request_id",
    "open_peer",
]

logger = logging.getLogger("trio_acp.rpc")

#: The protocol-level notification that cancels a request (ACP ``$/cancel_request``).
CANCEL_REQUEST_METHOD = "$/cancel_request"

#: Inbound requests served at once per connection, and how many more wait (their lines,
#: at most so many bytes) before the reader stops reading (`trio_acp.rpc._admission`).
#: Far above what an editor keeps in flight (a prompt per session, a few lists and
#: loads), far below what costs memory: a running request is a task and, until the
#: client reads it, its answer.
DEFAULT_MAX_RUNNING_REQUESTS = 256
DEFAULT_MAX_WAITING_REQUESTS = 1024
DEFAULT_MAX_WAITING_BYTES = 16 * 1024 * 1024

#: What a connection applies to the bytes it writes (`open_peer`'s ``mask``): whole frames
#: in, the same frames out (e.g. the agent's credentials replaced, `trio_acp.credentials`).
FrameMask = Callable[[bytes], bytes]

#: Inside a task handling an inbound request: that request's id (``None`` elsewhere).
_after_response: ContextVar[list[Callable[[], Awaitable[None]]] | None] = ContextVar(
    "trio_acp.rpc.after_response", default=None
)


def after_response(fn: Callable[[], Awaitable[None]]) -> None:
    """Run `fn()` in the current request's task once its response is queued.

    For what must follow a response on the wire and never precede it — e.g. ACP's
    `available_commands_update` after `session/new` (the writer is FIFO, so anything `fn`
    sends goes out after the response). Only valid inside a request handler; errors from
    `fn` are logged, never answered.
    """
    callbacks = _after_response.get()
    if callbacks is None:
        raise RuntimeError("after_response() is only valid inside a request handler")
    callbacks.append(fn)


class Handler(Protocol):
    """What a `Peer` dispatches inbound messages to.  Works on plain JSON values."""

    async def handle_request(self, method: str, params: Any) -> Any:
        """Answer one request: return a JSON-ready result (``None`` → ``"result": null``)
        or raise `RequestError` (e.g. ``RequestError.method_not_found(method)``).  Any
        other exception answers ``-32603`` and is logged.  Runs in a task of its own."""
        ...

    async def handle_notification(self, method: str, params: Any) -> None:
        """Handle one notification.  Runs inline in the reader task, in wire order: be
        quick, and never await a request to the same peer.  Exceptions are logged, never
        answered.  Receives every notification except ``$/cancel_request`` (which the peer
        handles itself), including other ``$/…`` ones, which it may simply ignore."""
        ...


# `open_peer(..., request_received=hook)`: called in the reader, synchronously, with
# (request id, method, raw params) the moment a request is read — in wire order with the
# notifications around it and before the request's task starts (whose
# `current_request_id` is the id).  For bookkeeping that must follow the wire's order
# rather than the scheduler's: a notification right behind a request on the wire (ACP's
# `session/cancel` behind a `session/prompt`) must find that request registered, and
# requests read in one order must be served in that order.  Must be quick and must not
# raise (exceptions are logged and ignored).
RequestReceived = Callable[[RequestId, str, Any], None]


class _Pending:
    """The slot an outbound request waits on."""

    __slots__ = ("error", "event", "result")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def complete(self, result: Any = None, error: BaseException | None = None) -> None:
        if not self.event.is_set():
            self.result = result
            self.error = error
            self.event.set()


class _Late:
    """The slot of a request whose waiting task was cancelled but whose caller still
    wants the answer if it comes (`Peer.request`'s ``on_late``): a result is handed to
    ``on_late`` (from the reader task), an error or the connection's end drops it."""

    __slots__ = ("on_late",)

    def __init__(self, on_late: Callable[[Any], None]) -> None:
        self.on_late = on_late

    def complete(self, result: Any = None, error: BaseException | None = None) -> None:
        if error is not None:
            return
        try:
            self.on_late(result)
        except Exception:
            logger.exception("the late-answer hook of a cancelled request failed")


class Peer:
    """One side of a JSON-RPC connection.  Create it with `open_peer`."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        handler: Handler,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_queued_frames: int = 64,
        shutdown_grace: float = 1.5,
        receive_size: int = 256 * 1024,
        max_running_requests: int = DEFAULT_MAX_RUNNING_REQUESTS,
        max_waiting_requests: int = DEFAULT_MAX_WAITING_REQUESTS,
        max_waiting_bytes: int = DEFAULT_MAX_WAITING_BYTES,
        mask: FrameMask | None = None,
        request_received: RequestReceived | None = None,
    ) -> None:
        self._stream = stream
        self._mask = mask
        self._handler = handler
        self._buffer = LineBuffer(max_frame_size)
        self._send_channel, self._receive_channel = trio.open_memory_channel[bytes | memoryview](
            max_queued_frames
        )
        self._send_now = direct_sender(stream)
        self._shutdown_grace = shutdown_grace
        self._receive_size = receive_size
        self._next_id = 0
        self._pending: dict[int, _Pending | _Late] = {}
        self._inbound: dict[RequestId, trio.CancelScope] = {}
        self._admission = Admission(
            max_running=max_running_requests,
            max_waiting=max_waiting_requests,
            max_waiting_bytes=max_waiting_bytes,
        )
        # Where the reader waits while no request can be run or kept (`_receive_request`),
        # or no answer of its own (`_answer`).
        self._room = trio.lowlevel.ParkingLot()
        # The answers the reader makes itself (an invalid frame, a refused request), in
        # order, while the writer's queue is full: a task of their own (`_write_answers`)
        # queues them, so the reader never waits on a client that does not read. Bounded
        # as the waiting requests are.
        self._answers: collections.deque[bytes] = collections.deque()
        self._answers_bytes = 0
        self._answers_writing = False
        self._reader_scope = trio.CancelScope()
        self._closing = False
        self._closing_event = trio.Event()
        self._done = trio.Event()
        self._internal_error: Exception | None = None
        self._system_nursery: trio.Nursery | None = None
        self._handler_nursery: trio.Nursery | None = None
        self._request_received = request_received

    # -- public API ------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once the peer stopped reading (EOF, broken pipe, `aclose`): from then on
        `request` raises `PeerClosed`.  `notify` still works while queued frames are being
        flushed (e.g. updates a cancelled handler sends before its answer)."""
        return self._closing

    async def request(
        self, method: str, params: Any = None, *, on_late: Callable[[Any], None] | None = None
    ) -> Any:
        """Send a request and wait for its response.

        Returns the result (``None`` for ``"result": null``); raises `RequestError` if the
        other side answered an error, `PeerClosed` if the connection closed first, and
        TypeError if ``params`` is not JSON-serializable.  If the waiting task is
        cancelled, ``$/cancel_request`` is sent to the other side (best effort, without
        waiting) and a late response is dropped, unless ``on_late`` is given: then a
        result the other side still sends (it may ignore ``$/cancel_request``) is passed
        to ``on_late(result)``, called in the reader task (it must not block; start a
        task for anything slow).  A request that creates something the caller must undo
        (a terminal) needs it: the other side may have created it anyway.
        """
        if self._closing:
            raise self._peer_closed()
        self._next_id += 1
        request_id = self._next_id
        frame = encode_request(request_id, method, params)
        slot = _Pending()
        self._pending[request_id] = slot
        # The answer may come behind requests the reader is holding back: it reads on.
        self._room.unpark_all()
        sent = False
        late = False
        try:
            # A cancelled caller sends nothing (the queued path below would raise here).
            await trio.lowlevel.checkpoint_if_cancelled()
            if not self._write_now(frame):
                try:
                    await self._send_channel.send(frame)
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    raise self._peer_closed() from None
            sent = True
            await slot.event.wait()
        except BaseException:
            if sent and not slot.event.is_set():
                self._send_cancel_request(request_id)
                if on_late is not None and not self._closing:
                    self._pending[request_id] = _Late(on_late)
                    late = True
            elif on_late is not None and slot.error is None and slot.event.is_set():
                # Answered, but the cancel reached the caller first: the answer is late.
                _Late(on_late).complete(slot.result)
            raise
        finally:
            if not late:
                del self._pending[request_id]
        if slot.error is not None:
            raise slot.error
        return slot.result

    async def notify(self, method: str, params: Any = None, *, at_once: bool = False) -> None:
        """Queue a notification; it goes out in order with everything else this peer
        sends (so notifications a handler sends precede its response).  A cancel point,
        but it yields to the scheduler only when the outgoing queue is full, so a burst
        of notifications leaves in few ``send_all`` calls.  Raises `PeerClosed` once the
        connection can no longer write.

        ``at_once``: this notification ends a burst (the last one the sender has for now,
        before it waits): written at once, as requests and responses are, if nothing is
        queued and the writer is idle — one scheduler pass less, the writer's
        (trio_acp/rpc/_direct.py).  Otherwise it queues like any other, in order."""
        frame = encode_notification(method, params)
        await trio.lowlevel.checkpoint_if_cancelled()
        if at_once and self._write_now(frame):
            return
        try:
            try:
                # Fast path: queue without yielding, so a burst of notifications fills
                # the queue and the writer sends it with one send_all.  When the queue
                # is full, send() below waits (and yields): the bound keeps this fair.
                self._send_channel.send_nowait(frame)
            except trio.WouldBlock:
                await self._send_channel.send(frame)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            raise self._peer_closed() from None

    async def wait_closed(self) -> None:
        """Return once the peer stopped reading: the other side hit EOF, the pipe broke,
        or `aclose` was called.  (The shutdown may still be flushing; leaving `open_peer`
        or `aclose` waits for it to finish.)"""
        await self._closing_event.wait()

    async def aclose(self) -> None:
        """Close gracefully (the same sequence as EOF, started locally) and wait for the
        shutdown to finish.  Idempotent."""
        self._reader_scope.cancel()
        await self._done.wait()

    # -- the connection's tasks ------------------------------------------------------

    async def _run(self) -> None:
        # Tasks spawned from here inherit this context: handlers of *this* connection
        # must not see the id of some request that happened to open it.
        current_request_id.set(None)
        try:
            async with trio.open_nursery() as system:
                self._system_nursery = system
                system.start_soon(self._write_loop)
                try:
                    async with trio.open_nursery() as handlers:
                        self._handler_nursery = handlers
                        with self._reader_scope:
                            await self._read_loop()
                        self._begin_close()
                        handlers.cancel_scope.deadline = self._grace_deadline()
                finally:
                    self._begin_close()
                    # Nothing answers requests any more: closing the channel lets the
                    # writer flush what is queued and stop.
                    self._send_channel.close()
                    system.cancel_scope.deadline = min(
                        system.cancel_scope.deadline, self._grace_deadline()
                    )
        finally:
            self._begin_close()
            self._system_nursery = self._handler_nursery = None
            await trio.aclose_forcefully(self._stream)
            self._done.set()

    def _grace_deadline(self) -> float:
        if math.isinf(self._shutdown_grace):
            return math.inf
        return trio.current_time() + self._shutdown_grace

    def _begin_close(self) -> None:
        if self._closing:
            return
        self._closing = True
        for slot in self._pending.values():
            slot.complete(error=self._peer_closed())
        for scope in self._inbound.values():
            scope.cancel()
        # Requests still waiting for their turn are answered too (-32800: their scopes
        # are cancelled), at once.
        for line in self._admission.take_all():
            self._run_waiting(line)
        self._room.unpark_all()
        self._closing_event.set()

    def _peer_closed(self) -> PeerClosed:
        exc = PeerClosed()
        exc.__cause__ = self._internal_error
        return exc

    def _record_internal_error(self, exc: Exception) -> None:
        logger.debug("JSON-RPC connection failed", exc_info=exc)
        if self._internal_error is None:
            self._internal_error = exc

    async def _read_loop(self) -> None:
        try:
            while True:
                try:
                    data = await self._stream.receive_some(self._receive_size)
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    logger.debug("receive side failed, treating it as EOF: %r", exc)
                    data = b""
                if not data:
                    for item in self._buffer.feed_eof():
                        await self._dispatch(item)
                    return
                for item in self._buffer.feed(data):
                    await self._dispatch(item)
        except Exception as exc:
            self._record_internal_error(exc)

    async def _write_loop(self) -> None:
        receive = self._receive_channel
        send_now = self._send_now
        try:
            async for frame in receive:
                frames = [frame]
                while True:
                    try:
                        frames.append(receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                data = frame if len(frames) == 1 else b"".join(frames)
                if self._mask is not None:
                    # One pass over the batch: frames are whole lines, so no secret can
                    # straddle two of them.
                    data = self._mask(bytes(data))
                if send_now is not None:
                    # Synchronously where the pipe has room: send_all would first yield
                    # once more (its checkpoint), a scheduler pass per write. This loop
                    # yields on every turn anyway, in receive.
                    try:
                        data = send_now(data)
                    except Exception:
                        pass  # nothing written: send_all meets the error
                if data:
                    await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            logger.debug("send side closed: %r", exc)
        except Exception as exc:
            self._record_internal_error(exc)
        finally:
            receive.close()
            # Nobody to talk to any more: wind the whole connection down.
            self._reader_scope.cancel()

    def _write_now(self, frame: bytes) -> bool:
        """Write `frame` at once if nothing is queued and the writer is idle, without a
        scheduler pass; hand the writer what the stream did not take.  False: not
        written, queue it as usual."""
        send_now = self._send_now
        # A receiver waiting on the channel is the writer, idle: it holds no frame and
        # nothing is queued (a queued frame would have woken it), so this one is next.
        if send_now is None or self._receive_channel.statistics().tasks_waiting_receive == 0:
            return False
        try:
            rest = send_now(frame if self._mask is None else self._mask(frame))
        except Exception:  # nothing written: the writer's send_all meets the error
            return False
        if rest:
            # Straight to the waiting writer, ahead of anything queued after this. It is
            # masked already; the writer's mask passes over it once more, finding nothing
            # (masked bytes hold no secret): only when the pipe was full.
            self._send_channel.send_nowait(rest)
        return True

    async def _send_quietly(self, frame: bytes) -> None:
        try:
            await self._send_channel.send(frame)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            logger.debug("connection closed, dropping a frame")

    # -- inbound ---------------------------------------------------------------------

    async def _dispatch(self, item: bytes | FrameTooLarge) -> None:
        if isinstance(item, FrameTooLarge):
            logger.warning("dropping a frame over %d bytes", item.max_frame_size)
            error = RequestError.invalid_request(
                message=f"Invalid request: frame too large (limit {item.max_frame_size} bytes)"
            )
            await self._answer(encode_error(None, error))
            return
        msg = parse_message(item)
        if isinstance(msg, Notification):
            if msg.method == CANCEL_REQUEST_METHOD:
                self._cancel_inbound(msg.params)
            else:
                await self._handle_notification(msg)
        elif isinstance(msg, Request):
            await self._receive_request(msg, item)
        elif isinstance(msg, Result):
            self._complete(msg.id, result=msg.result)
        elif isinstance(msg, ErrorResponse):
            self._complete(msg.id, error=msg.error)
        else:
            assert isinstance(msg, InvalidMessage)
            logger.info("answering an invalid message: %s", msg.error.message)
            await self._answer(encode_error(msg.id, msg.error))

    async def _receive_request(self, request: Request, line: bytes) -> None:
        """Run, keep or refuse a request just read (`trio_acp.rpc._admission`)."""
        admission = self._admission
        while not admission.has_room(len(line)) and not self._pending and not self._closing:
            # As many requests run and wait as allowed: stop reading (the other side's
            # writes block) until one finishes. Not while we wait on the other side
            # (`self._pending`, e.g. a session/request_permission): its answer, or a
            # session/cancel, may be behind this request, and a turn waiting for it
            # would wait forever.
            await self._room.park()
        if request.id in self._inbound:
            error = RequestError.invalid_request(
                message="Invalid request: id of a request still in progress"
            )
            await self._answer(encode_error(request.id, error))
            return
        decision = admission.offer(line)
        if decision == "full":
            # Reading on for an answer we wait for: a request beyond every bound is
            # refused, never kept (memory) and never ignored (it must be answered).
            logger.warning(
                "refusing %r: %d requests running, %d waiting",
                request.method,
                admission.running,
                admission.waiting,
            )
            await self._answer(encode_error(request.id, _too_many_requests()))
            return
        # Registered before the task starts, so a $/cancel_request right behind the
        # request on the wire finds it (a scope cancelled before entry starts cancelled).
        scope = trio.CancelScope()
        self._inbound[request.id] = scope
        if self._request_received is not None:
            try:
                self._request_received(request.id, request.method, request.params)
            except Exception:
                logger.exception("request_received(%r) failed", request.method)
        if decision == "run":
            assert self._handler_nursery is not None
            self._handler_nursery.start_soon(self._serve_request, request, scope)

    async def _answer(self, frame: bytes) -> None:
        """Send an answer the reader made itself, without waiting on the writer.

        Queued at once if the writer's queue has room and no earlier such answer waits;
        otherwise kept for `_write_answers`, up to as many (and as many bytes) as requests
        may wait (`trio_acp.rpc._admission`). When even that is full the reader waits for
        room, as it does for requests: a bound, never a process that grows.
        """
        if not self._answers:
            try:
                self._send_channel.send_nowait(frame)
                return
            except trio.WouldBlock:
                pass
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                logger.debug("connection closed, dropping a frame")
                return
        admission = self._admission
        while (
            self._answers
            and (
                len(self._answers) >= admission.max_waiting
                or self._answers_bytes + len(frame) > admission.max_waiting_bytes
            )
            and not self._closing
        ):
            await self._room.park()
        if self._closing:
            return  # nothing is written any more but what is queued
        self._answers.append(frame)
        self._answers_bytes += len(frame)
        if not self._answers_writing and self._system_nursery is not None:
            self._answers_writing = True
            self._system_nursery.start_soon(self._write_answers)

    async def _write_answers(self) -> None:
        try:
            while self._answers:
                frame = self._answers[0]
                await self._send_channel.send(frame)
                self._answers.popleft()
                self._answers_bytes -= len(frame)
                self._room.unpark_all()  # the reader may wait for room
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            logger.debug("connection closed, dropping %d answers", len(self._answers))
        finally:
            self._answers_writing = False

    def _run_waiting(self, line: bytes) -> None:
        """Start the task of a request that waited its turn (its line, as read)."""
        request = parse_message(line)
        assert isinstance(request, Request)  # it was one when it was read
        scope = self._inbound[request.id]
        if self._handler_nursery is None:
            return  # torn down: nothing answers any more
        try:
            self._handler_nursery.start_soon(self._serve_request, request, scope)
        except RuntimeError:  # the nursery is closing
            pass

    def _request_done(self) -> None:
        line = self._admission.finished()
        if line is not None:
            self._run_waiting(line)
        # Room for one more: the reader reads on if it stopped.
        self._room.unpark_all()

    async def _serve_request(self, request: Request, scope: trio.CancelScope) -> None:
        try:
            await self._serve(request, scope)
        finally:
            self._request_done()

    async def _serve(self, request: Request, scope: trio.CancelScope) -> None:
        current_request_id.set(request.id)
        callbacks: list[Callable[[], Awaitable[None]]] = []
        _after_response.set(callbacks)
        frame: bytes | None = None
        try:
            with scope:
                frame = await self._call_handler(request)
        finally:
            if self._inbound.get(request.id) is scope:
                del self._inbound[request.id]
        if frame is None:
            # Cancelled by $/cancel_request or by the shutdown, with no answer of its own:
            # the request must still be answered.
            frame = encode_error(request.id, RequestError.request_cancelled())
        if not self._write_now(frame):
            await self._send_quietly(frame)
        for fn in callbacks:
            try:
                await fn()
            except Exception:
                logger.exception("after-response callback of %r failed", request.method)

    async def _call_handler(self, request: Request) -> bytes:
        """The per-request error boundary.

        See docs/ARCHITECTURE.md#d8-one-error-boundary-per-request.
        """
        try:
            result = await self._handler.handle_request(request.method, request.params)
        except RequestError as exc:
            return encode_error(request.id, exc)
        except Exception as exc:
            return encode_error(request.id, self._error_for(exc, request))
        except BaseExceptionGroup as group:
            # Cancelled (or KeyboardInterrupt…) in a group: the cancellation wins and must
            # propagate; log the failures that came with it.
            failures, rest = group.split(Exception)
            if failures is not None:
                logger.error(
                    "handler for %r failed while being cancelled",
                    request.method,
                    exc_info=failures,
                )
            assert rest is not None
            raise rest from None
        try:
            return encode_result(request.id, result)
        except (TypeError, ValueError):
            logger.exception("the result of %r is not JSON-serializable", request.method)
            return encode_error(request.id, RequestError.internal_error())

    def _error_for(self, exc: Exception, request: Request) -> RequestError:
        failures = leaves(exc)
        for leaf in failures:
            if isinstance(leaf, RequestError):
                if len(failures) > 1:
                    logger.error("handler for %r failed", request.method, exc_info=exc)
                return leaf
        if self._closing and all(isinstance(leaf, PeerClosed) for leaf in failures):
            logger.debug("handler for %r stopped: connection closed", request.method)
            return RequestError.request_cancelled()
        logger.error(
            "handler for %r (request id %r) failed", request.method, request.id, exc_info=exc
        )
        return RequestError.internal_error()

    async def _handle_notification(self, msg: Notification) -> None:
        try:
            await self._handler.handle_notification(msg.method, msg.params)
        except Exception as exc:
            if all(isinstance(leaf, RequestError) for leaf in leaves(exc)):
                logger.debug("notification %r not handled: %s", msg.method, exc)
            else:
                logger.error("notification handler for %r failed", msg.method, exc_info=exc)
        except BaseExceptionGroup as group:
            failures, rest = group.split(Exception)
            if failures is not None:
                logger.error("notification handler for %r failed", msg.method, exc_info=failures)
            assert rest is not None
            raise rest from None

    def _cancel_inbound(self, params: Any) -> None:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if not is_request_id(request_id):
            logger.debug("ignoring %s with params %r", CANCEL_REQUEST_METHOD, params)
            return
        scope = self._inbound.get(request_id)
        if scope is None:
            logger.debug("ignoring %s for unknown request %r", CANCEL_REQUEST_METHOD, request_id)
            return
        scope.cancel()

    def _complete(
        self, request_id: RequestId | None, *, result: Any = None, error: RequestError | None = None
    ) -> None:
        slot = self._pending.get(request_id) if type(request_id) is int else None
        if isinstance(slot, _Late):
            assert type(request_id) is int  # found under it
            del self._pending[request_id]
        elif slot is None:
            if request_id is None and error is not None:
                logger.warning("the other side reported an error: %s", error)
            else:
                logger.debug("dropping a response to unknown request %r", request_id)
            return
        slot.complete(result, error)

    # -- outbound cancellation ---------------------------------------------------------

    def _send_cancel_request(self, request_id: int) -> None:
        if self._closing:
            return
        frame = encode_notification(CANCEL_REQUEST_METHOD, {"requestId": request_id})
        try:
            self._send_channel.send_nowait(frame)
        except trio.WouldBlock:
            # The queue is full: let a task wait for room, never the cancelled caller.
            if self._system_nursery is not None:
                try:
                    self._system_nursery.start_soon(self._send_quietly, frame)
                except RuntimeError:  # the nursery is closing
                    pass
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass


def _too_many_requests() -> RequestError:
    return RequestError(
        ErrorCode.INTERNAL_ERROR,
        "Too many requests in flight: read the answers, then send this request again",
    )


@asynccontextmanager
async def open_peer(
    stream: trio.abc.Stream,
    handler: Handler,
    *,
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    max_queued_frames: int = 64,
    shutdown_grace: float = 1.5,
    receive_size: int = 256 * 1024,
    max_running_requests: int = DEFAULT_MAX_RUNNING_REQUESTS,
    max_waiting_requests: int = DEFAULT_MAX_WAITING_REQUESTS,
    max_waiting_bytes: int = DEFAULT_MAX_WAITING_BYTES,
    mask: FrameMask | None = None,
    request_received: RequestReceived | None = None,
) -> AsyncIterator[Peer]:
    """Run a JSON-RPC connection over ``stream`` for the duration of the block.

    ``max_frame_size``: the largest inbound line accepted (a DoS limit; bigger lines are
    answered ``-32600`` with ``id: null`` and skipped).  ``max_queued_frames``: the bound
    of the outgoing queue (back-pressure on senders).  ``shutdown_grace``: seconds the
    shutdown gives cancelled handlers to answer, and again to flush queued frames.
    ``max_running_requests``, ``max_waiting_requests``, ``max_waiting_bytes``: how many
    inbound requests run at once and how many (and how many bytes of them) wait before
    the reader stops reading (see the module's docstring, "Reading").  ``mask``: applied
    to every byte this side writes, frame by frame or to a batch of whole frames (see
    "Writing"); it must map masked bytes to themselves, and must be quick (it runs in the
    writer, on the Trio thread).
    ``request_received``: a hook the reader calls the moment a request is read, in wire
    order (see `RequestReceived`).

    Leaving the block normally closes the peer gracefully (see `Peer.aclose`).  If the
    body raises, the connection is torn down at once (no grace) and the body's exception
    propagates as itself, not wrapped in an exception group.  If the connection itself
    failed (an unexpected transport error), that exception is raised on leaving the block.
    """
    peer = Peer(
        stream,
        handler,
        max_frame_size=max_frame_size,
        max_queued_frames=max_queued_frames,
        shutdown_grace=shutdown_grace,
        receive_size=receive_size,
        max_running_requests=max_running_requests,
        max_waiting_requests=max_waiting_requests,
        max_waiting_bytes=max_waiting_bytes,
        mask=mask,
        request_received=request_received,
    )
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer._run)
            try:
                yield peer
            except BaseException as exc:
                body_error = exc
                raise
            await peer.aclose()
    except BaseExceptionGroup as group:
        # Trio's strict nurseries wrap even a lone exception; the peer's own tasks raise
        # nothing but what the body or the surrounding cancellation caused.
        if body_error is not None:
            # (Trio may re-derive a group the body raised, but its leaves stay the same.)
            mine = {id(leaf) for leaf in leaves(body_error)}
            others = [leaf for leaf in leaves(group) if id(leaf) not in mine]
            if peer._internal_error is not None:
                others.append(peer._internal_error)
            for leaf in others:
                if not isinstance(leaf, trio.Cancelled):
                    logger.error("JSON-RPC connection failed", exc_info=leaf)
            reraise(body_error)
        failures = leaves(group)
        if len(failures) == 1:
            reraise(failures[0])
        raise
    if peer._internal_error is not None:
        raise peer._internal_error
