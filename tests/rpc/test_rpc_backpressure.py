"""Back-pressure on inbound requests: a bound per connection, and no deadlock under it.

A client that pipelines requests and reads no answers must meet a reader that stops
reading (its writes block, as on a socket), not a process that grows (issue: 200,000
requests, RSS 37 → 1,623 MiB; bench/flood.py). Every request is answered once it reads.
While the requests that run wait on something only the client can give — an answer to our
own request, a notification — the frames that bring it must still be read.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from _rpc_helpers import RawSide, RecordingHandler, strip_error

from trio_acp.rpc import Peer, RequestError, open_peer
from trio_acp.rpc._admission import Admission

RUNNING, WAITING, QUEUED = 8, 16, 4


def req(id: Any, method: str, params: Any = None) -> dict[str, Any]:
    msg = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notif(method: str, params: Any = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


class Counting(RecordingHandler):
    """Counts the requests read and, at each, the request tasks running then."""

    def __init__(self) -> None:
        super().__init__()
        self.peer: Peer | None = None
        self.read: list[Any] = []
        self.most_running = 0
        self.release = trio.Event()

    def request_received(self, request_id: Any, method: str, params: Any) -> None:
        self.read.append(request_id)
        assert self.peer is not None and self.peer._handler_nursery is not None
        self.most_running = max(self.most_running, len(self.peer._handler_nursery.child_tasks))

    async def handle_request(self, method: str, params: Any) -> Any:
        if method == "wait":
            await self.release.wait()
            return "released"
        if method == "ask":
            assert self.peer is not None
            return await self.peer.request("question", params)
        return await super().handle_request(method, params)

    async def handle_notification(self, method: str, params: Any) -> None:
        await super().handle_notification(method, params)
        if method == "release":
            self.release.set()


def bounded(stream: trio.abc.Stream, handler: Counting) -> Any:
    return open_peer(
        stream,
        handler,
        max_running_requests=RUNNING,
        max_waiting_requests=WAITING,
        max_queued_frames=QUEUED,
        request_received=handler.request_received,
    )


async def test_a_client_that_does_not_read_is_held_back_then_answered(
    autojump_clock: trio.abc.Clock,
) -> None:
    # lockstep: a write returns only once the other side has read it, as a full pipe.
    raw_stream, peer_stream = trio.testing.lockstep_stream_pair()
    raw = RawSide(raw_stream)
    handler = Counting()
    total = 2_000
    sent = 0

    async def flood() -> None:
        nonlocal sent
        for i in range(total):
            await raw.send(req(i, "echo", [i]))
            sent += 1

    async with bounded(peer_stream, handler) as peer:
        handler.peer = peer
        async with trio.open_nursery() as nursery:
            nursery.start_soon(flood)
            await trio.testing.wait_all_tasks_blocked()
            # Nobody reads the answers: the agent stopped reading. What it took in: the
            # requests running (their answers blocked), the answers queued for the writer
            # (and the one it is writing), the requests waiting their turn, and the one
            # the reader holds while it waits for room.
            most = RUNNING + (QUEUED + 1) + WAITING + 1
            assert len(handler.read) <= most
            assert sent <= most + 1
            assert handler.most_running <= RUNNING
            assert len(peer._handler_nursery.child_tasks) <= RUNNING  # type: ignore[union-attr]
            # Now the client reads: every request is answered, once, with its own result.
            answers = [await raw.receive() for _ in range(total)]
        assert sent == total
    assert sorted(a["id"] for a in answers) == list(range(total))
    assert all(a["result"] == [a["id"]] for a in answers)
    # Each seen once by the wire-order hook, in wire order (the agent queues prompts there).
    assert handler.read == list(range(total))
    assert handler.most_running <= RUNNING


async def test_a_notification_behind_waiting_requests_is_read(
    autojump_clock: trio.abc.Clock,
) -> None:
    # Every running request waits for a notification (as a turn for session/cancel) that
    # comes behind more requests: those wait their turn, the notification is read.
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    handler = Counting()
    with trio.fail_after(60):
        async with bounded(peer_stream, handler) as peer:
            handler.peer = peer
            for i in range(RUNNING):
                await raw.send(req(f"w{i}", "wait"))
            for i in range(WAITING):
                await raw.send(req(i, "echo", [i]))
            await raw.send(notif("release"))
            answers = [await raw.receive() for _ in range(RUNNING + WAITING)]
    assert sorted(str(a["id"]) for a in answers) == sorted(
        [f"w{i}" for i in range(RUNNING)] + [str(i) for i in range(WAITING)]
    )
    assert all("result" in a for a in answers)
    assert handler.most_running <= RUNNING


async def test_while_waiting_on_the_client_the_reader_reads_on(
    autojump_clock: trio.abc.Clock,
) -> None:
    # Every running request waits for the client's answer to a request of ours (as a turn
    # for session/request_permission), and the client sends more requests than may run
    # and wait before its answers: the reader must read on to reach them. What it cannot
    # keep it refuses, each answered.
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    handler = Counting()
    extra = 5
    with trio.fail_after(60):
        async with bounded(peer_stream, handler) as peer:
            handler.peer = peer
            for i in range(RUNNING):
                await raw.send(req(f"a{i}", "ask", [i]))
            questions = [await raw.receive() for _ in range(RUNNING)]
            assert all(q["method"] == "question" for q in questions)
            for i in range(WAITING + extra):
                await raw.send(req(i, "echo", [i]))
            for q in questions:
                await raw.send({"jsonrpc": "2.0", "id": q["id"], "result": q["params"]})
            answers = [await raw.receive() for _ in range(RUNNING + WAITING + extra)]
    by_id = {a["id"]: a for a in answers}
    assert len(by_id) == len(answers)
    assert [by_id[f"a{i}"]["result"] for i in range(RUNNING)] == [[i] for i in range(RUNNING)]
    assert [by_id[i]["result"] for i in range(WAITING)] == [[i] for i in range(WAITING)]
    refused = [strip_error(by_id[i]) for i in range(WAITING, WAITING + extra)]
    assert refused == [
        {"jsonrpc": "2.0", "id": i, "error": {"code": -32603}}
        for i in range(WAITING, WAITING + extra)
    ]
    assert handler.most_running <= RUNNING


async def test_answers_to_garbage_never_stop_the_reader_short_of_the_bound(
    autojump_clock: trio.abc.Clock,
) -> None:
    # A client that writes invalid frames and reads nothing, while a request of ours waits
    # on it: the answers the reader makes itself queue for the writer (within the waiting
    # bounds), the reader reads on, and the client's answer behind the garbage is read.
    # lockstep: a write returns only once the other side has read it, as a full pipe.
    raw_stream, peer_stream = trio.testing.lockstep_stream_pair()
    raw = RawSide(raw_stream)
    handler = Counting()
    garbage = WAITING - 1  # more than the writer's queue holds, less than may wait
    with trio.fail_after(60):
        async with bounded(peer_stream, handler) as peer:
            handler.peer = peer
            await raw.send(req("a", "ask", ["x"]))
            question = await raw.receive()
            assert question["method"] == "question"
            await raw.send_raw(b"".join(b"not json %d\n" % i for i in range(garbage - 2)))
            await raw.send_raw(b"[]\n")  # valid JSON, no message
            await raw.send(req(None, "echo"))  # a null id: an invalid request
            # Read by the agent (lockstep) although nobody read its answers yet.
            await raw.send({"jsonrpc": "2.0", "id": question["id"], "result": "yes"})
            answers = [await raw.receive() for _ in range(garbage + 1)]
    errors = [a for a in answers if "error" in a]
    assert len(errors) == garbage and all(a["id"] is None for a in errors)
    assert {a["error"]["code"] for a in errors} == {-32700, -32600}
    assert [a["result"] for a in answers if a.get("id") == "a"] == ["yes"]


async def test_waiting_requests_are_answered_at_eof(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    handler = Counting()
    async with bounded(peer_stream, handler) as peer:
        handler.peer = peer
        for i in range(RUNNING + 3):
            await raw.send(req(i, "forever"))
        await trio.testing.wait_all_tasks_blocked()
        assert peer._admission.waiting == 3
        await raw.send_eof()
    answers = [strip_error(m) for m in await raw.receive_all()]
    assert sorted(a["id"] for a in answers) == list(range(RUNNING + 3))
    assert all(a["error"]["code"] == -32800 for a in answers)
    assert not peer._inbound


async def test_a_waiting_request_can_be_cancelled(autojump_clock: trio.abc.Clock) -> None:
    raw_stream, peer_stream = trio.testing.memory_stream_pair()
    raw = RawSide(raw_stream)
    handler = Counting()
    async with bounded(peer_stream, handler) as peer:
        handler.peer = peer
        for i in range(RUNNING):
            await raw.send(req(i, "forever"))
        # Still run when its turn comes (the handler may have bookkeeping to undo, as
        # the agent's queued prompts), cancelled from the start.
        await raw.send(req("late", "forever"))
        await raw.send(notif("$/cancel_request", {"requestId": "late"}))
        await raw.send(notif("$/cancel_request", {"requestId": 0}))
        first = [strip_error(await raw.receive()) for _ in range(2)]
        assert sorted(str(a["id"]) for a in first) == ["0", "late"]
        assert all(a["error"]["code"] == -32800 for a in first)
        # The connection goes on.
        await raw.send(req("next", "echo", ["y"]))
        assert (await raw.receive())["result"] == ["y"]


def test_admission() -> None:
    a = Admission(max_running=2, max_waiting=2, max_waiting_bytes=10)
    assert [a.offer(b"r1"), a.offer(b"r2")] == ["run", "run"]
    assert a.offer(b"123456") == "wait"
    assert not a.has_room(5) and a.has_room(4)
    assert a.offer(b"12345") == "full"
    assert a.offer(b"w2") == "wait"
    assert a.offer(b"w") == "full"  # two waiting
    assert a.finished() == b"123456"
    assert a.finished() == b"w2"
    assert a.running == 2
    assert a.finished() is None and a.finished() is None
    assert a.running == 0
    # An empty waiting room takes one line of any size.
    assert [a.offer(b"a"), a.offer(b"b"), a.offer(b"x" * 100)] == ["run", "run", "wait"]
    assert a.take_all() == [b"x" * 100] and a.running == 3 and a.waiting == 0
    with pytest.raises(ValueError):
        Admission(max_running=0, max_waiting=0, max_waiting_bytes=0)


def test_the_refusal_is_an_ordinary_error() -> None:
    from trio_acp.rpc._peer import _too_many_requests

    error = _too_many_requests()
    assert isinstance(error, RequestError) and error.code == -32603
    assert "\n" not in error.message and error.message
