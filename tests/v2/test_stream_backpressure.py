"""A v2 connection stays bounded when the client reads slowly or not at all, as a v1
connection does (docs/ARCHITECTURE.md#d1-our-own-json-rpc-layer).

The client's end is a lockstep stream: what the gateway writes waits until the client
reads it. The agent here is a fake v1 agent writing raw lines. Nothing waits on timing:
each test lets every task run until all are blocked, then counts what is queued.
"""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from trio_acp.v2 import stream as v2_stream
from trio_acp.v2.stream import negotiated_stream

V2_INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 2, "info": {"name": "c", "version": "1"}},
}
MANY = 5000


def line(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame).encode() + b"\n"


def update(n: int) -> bytes:
    return line(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "s",
                "update": {"sessionUpdate": "session_info_update", "title": f"title {n}"},
            },
        }
    )


async def test_an_agent_writing_to_a_client_that_reads_nothing_waits_with_a_bounded_queue() -> None:
    client, server = trio.testing.lockstep_stream_pair()
    written = 0
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.send_all, line(V2_INIT))
            async with negotiated_stream(server) as agent_stream:

                async def agent_writes() -> None:
                    nonlocal written
                    for n in range(MANY):
                        await agent_stream.send_all(update(n))
                        written += 1

                nursery.start_soon(agent_writes)
                await trio.testing.wait_all_tasks_blocked()
                # The agent's writes wait, as on a full stdout: memory stays bounded.
                assert written < 200, written
                to_client, _ = agent_stream.queued()  # type: ignore[attr-defined]
                assert to_client <= v2_stream.CLIENT_BACKLOG
                # The client reads again: everything arrives, in order.
                got: list[bytes] = []
                buffer = b""
                while len(got) < MANY:
                    buffer += await client.receive_some(65536)
                    *lines, buffer = buffer.split(b"\n")
                    got += [ln for ln in lines if b"session/update" in ln]
                    assert len(agent_stream.queued()) == 2  # type: ignore[attr-defined]
                    assert agent_stream.queued()[0] <= v2_stream.CLIENT_BACKLOG  # type: ignore[attr-defined]
                titles = [json.loads(g)["params"]["update"]["title"] for g in got]
                assert titles == [f"title {n}" for n in range(MANY)]
                assert written == MANY
                nursery.cancel_scope.cancel()


async def test_a_client_sending_requests_and_reading_no_answers_is_read_no_further() -> None:
    # The gateway answers these itself (v2 dropped session/load): with a client that
    # reads none of the answers, it stops reading the client once its queue is full.
    client, server = trio.testing.lockstep_stream_pair()
    sent = 0
    request = line(
        {"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": "s"}}
    )
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def client_writes() -> None:
                nonlocal sent
                await client.send_all(line(V2_INIT))
                for _ in range(MANY):
                    await client.send_all(request)
                    sent += 1

            nursery.start_soon(client_writes)
            async with negotiated_stream(server) as agent_stream:
                await trio.testing.wait_all_tasks_blocked()
                assert sent < MANY
                to_client, _ = agent_stream.queued()  # type: ignore[attr-defined]
                # At most one read of the client's past the bound.
                assert to_client <= v2_stream.CLIENT_BACKLOG_HARD + 1
                nursery.cancel_scope.cancel()


async def test_a_client_that_reads_slowly_still_gets_its_cancel_through() -> None:
    # The agent's output waits for the client; the client's frames are read on: a
    # session/cancel reaches the agent while its updates are queued.
    client, server = trio.testing.lockstep_stream_pair()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.send_all, line(V2_INIT))
            async with negotiated_stream(server) as agent_stream:

                async def agent_writes() -> None:
                    for n in range(MANY):
                        await agent_stream.send_all(update(n))

                nursery.start_soon(agent_writes)
                await trio.testing.wait_all_tasks_blocked()
                cancel = {
                    "jsonrpc": "2.0",
                    "method": "session/cancel",
                    "params": {"sessionId": "s"},
                }
                nursery.start_soon(client.send_all, line(cancel))
                seen = b""
                while b"session/cancel" not in seen:
                    seen += await agent_stream.receive_some(65536)
                nursery.cancel_scope.cancel()
