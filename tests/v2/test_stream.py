"""`negotiated_stream`, the Trio driver: v1 untouched, v2 through the gateway.

The agent here is a fake v1 agent reading and writing raw lines on the stream the driver
hands it, so each step is explicit and nothing waits on timing.
"""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from trio_acp.v2.stream import negotiated_stream

V1_INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
V2_INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": 2, "info": {"name": "c", "version": "1"}},
}


def line(frame: dict[str, Any]) -> bytes:
    return json.dumps(frame).encode() + b"\n"


class Lines:
    """Whole lines read from a stream."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buffer = b""

    async def next(self) -> dict[str, Any] | None:
        while b"\n" not in self.buffer:
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.buffer += data
        first, self.buffer = self.buffer.split(b"\n", 1)
        frame: dict[str, Any] = json.loads(first)
        return frame


async def test_a_v1_client_gets_the_bytes_it_sent_and_writes_pass_through() -> None:
    client, server = trio.testing.memory_stream_pair()
    sent = line(V1_INIT) + b'{"jsonrpc":"2.0","id":1,"method":"session/new"'
    with trio.fail_after(10):
        await client.send_all(sent)
        async with negotiated_stream(server) as agent_stream:
            got = b""
            while len(got) < len(sent):
                got += await agent_stream.receive_some(7)  # the prefix, in small reads
            assert got == sent
            await agent_stream.send_all(b'{"raw":"v1"}\n')
            assert await client.receive_some(100) == b'{"raw":"v1"}\n'


async def test_a_v2_connection_runs_through_the_gateway_masked_and_closes_in_order() -> None:
    client, server = trio.testing.memory_stream_pair()

    def mask(data: bytes) -> bytes:
        return data.replace(b"hunter2", b"*******")

    async def fake_v1_agent(stream: trio.abc.Stream) -> None:
        lines = Lines(stream)
        init = await lines.next()
        assert init is not None and init["params"]["protocolVersion"] == 1
        await stream.send_all(line({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}))
        new = await lines.next()
        assert new is not None and new["method"] == "session/new"
        await stream.send_all(line({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}}))
        prompt = await lines.next()
        assert prompt is not None and prompt["method"] == "session/prompt"
        await stream.send_all(
            line({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": "end_turn"}})
        )
        assert await lines.next() is None  # the client hung up: EOF reaches the agent

    with trio.fail_after(10):
        # The first line arrives in two pieces, the next request right behind it.
        whole = line(V2_INIT)
        await client.send_all(whole[:10])
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                async with negotiated_stream(server, mask=mask) as agent_stream:
                    await fake_v1_agent(agent_stream)

            nursery.start_soon(serve)
            await client.send_all(
                whole[10:]
                + line(
                    {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w"}}
                )
            )
            frames = Lines(client)
            init = await frames.next()
            assert init is not None and init["result"]["protocolVersion"] == 2
            new = await frames.next()
            assert new == {"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s"}}
            await client.send_all(
                line(
                    {
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "session/prompt",
                        "params": {
                            "sessionId": "s",
                            "prompt": [{"type": "text", "text": "pw hunter2"}],
                        },
                    }
                )
            )
            got = [await frames.next() for _ in range(4)]
            assert got[0] is not None and "messageId" in got[0]["result"]
            echoed = got[1]
            assert echoed is not None
            assert echoed["params"]["update"]["content"] == [{"type": "text", "text": "pw *******"}]
            assert [g["params"]["update"].get("state") for g in got[2:] if g] == ["running", "idle"]
            await client.send_eof()
            assert await frames.next() is None  # the agent ended: the client's stream closes


async def test_blank_lines_before_a_v2_initialize_do_not_hide_it() -> None:
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        await client.send_all(b"\n  \n" + line(V2_INIT))
        async with negotiated_stream(server) as agent_stream:
            frame = await Lines(agent_stream).next()
            assert frame is not None and frame["params"]["protocolVersion"] == 1  # v2 -> v1
            await agent_stream.aclose()


async def test_a_huge_first_line_without_a_newline_is_left_to_the_v1_path_whole() -> None:
    client, server = trio.testing.memory_stream_pair()
    huge = b"x" * (3 * 1024 * 1024)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.send_all, huge)
            async with negotiated_stream(server) as agent_stream:
                got = b""
                while len(got) < len(huge):
                    got += await agent_stream.receive_some(1 << 20)
                assert got == huge


async def test_a_frame_the_gateway_fails_on_goes_on_as_it_came(monkeypatch) -> None:
    from trio_acp.v2.gateway import Gateway

    real = Gateway.from_client

    def from_client(self: Gateway, frame: dict[str, Any]) -> Any:
        if frame.get("method") == "_boom":
            raise RuntimeError("a gateway bug")
        return real(self, frame)

    monkeypatch.setattr(Gateway, "from_client", from_client)
    client, server = trio.testing.memory_stream_pair()
    boom = {"jsonrpc": "2.0", "id": 5, "method": "_boom", "params": {}}
    with trio.fail_after(10):
        await client.send_all(line(V2_INIT) + line(boom))
        async with negotiated_stream(server) as agent_stream:
            lines = Lines(agent_stream)
            init = await lines.next()
            assert init is not None and init["method"] == "initialize"
            assert await lines.next() == boom  # passed on; the connection lives on
            await client.send_all(line({"jsonrpc": "2.0", "id": 6, "method": "session/list"}))
            listed = await lines.next()
            assert listed is not None and listed["id"] == 6
            await agent_stream.aclose()
