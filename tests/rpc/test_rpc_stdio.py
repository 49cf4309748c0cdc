"""The stdio transport in a real subprocess: protocol-only stdout, EOF and signals."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from _rpc_helpers import RawSide

AGENT = Path(__file__).with_name("stdio_echo_agent.py")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FdStream is Unix-only")


class Agent:
    def __init__(self, process: trio.Process) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self.stdin = process.stdin
        self.out = RawSide(trio.StapledStream(process.stdin, process.stdout))
        self.stderr = b""

    async def send(self, message: Any) -> None:
        await self.stdin.send_all(orjson.dumps(message) + b"\n")


async def start_agent(nursery: trio.Nursery, *args: str) -> Agent:
    process = await trio.lowlevel.open_process(
        [sys.executable, str(AGENT), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    agent = Agent(process)

    async def collect_stderr() -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.receive_some():
            agent.stderr += chunk

    nursery.start_soon(collect_stderr)
    return agent


def echo(id: int, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "echo", "params": params}


async def test_stdout_has_only_frames_and_stdin_eof_exits() -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            agent = await start_agent(nursery)
            await agent.send(echo(1, {"text": "héllo\nworld"}))
            await agent.send({"jsonrpc": "2.0", "method": "note", "params": {}})
            await agent.stdin.send_all(b"not json\n")
            await agent.send(echo(2, [2]))
            frames = [await agent.out.receive() for _ in range(3)]
            # Requests run concurrently: answers come in any order.
            assert sorted(frames, key=lambda m: str(m["id"])) == [
                {"jsonrpc": "2.0", "id": 1, "result": {"text": "héllo\nworld"}},
                {"jsonrpc": "2.0", "id": 2, "result": [2]},
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
            ]
            await agent.stdin.aclose()  # EOF: the agent must exit on its own
            assert await agent.out.receive_all() == []
            assert await agent.process.wait() == 0
    # Every stdout line was a JSON-RPC frame; all the noise went to stderr.
    assert all(orjson.loads(line)["jsonrpc"] == "2.0" for line in agent.out.raw_lines)
    for noise in [b"junk", b"raw-junk", b"child-junk", b"banner: starting", b"notification note"]:
        assert noise in agent.stderr
    assert b"exited cleanly" in agent.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
async def test_signal_shuts_down_gracefully(signum: int) -> None:
    """The first signal acts like stdin EOF: in-flight requests are answered (-32800),
    queued frames flushed, and the process exits 0, although stdin is still open."""
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            agent = await start_agent(nursery)
            await agent.send({"jsonrpc": "2.0", "id": 1, "method": "forever"})
            await agent.send(echo(2, [2]))
            assert await agent.out.receive() == {"jsonrpc": "2.0", "id": 2, "result": [2]}
            agent.process.send_signal(signum)
            rest = await agent.out.receive_all()
            assert [(m["id"], m["error"]["code"]) for m in rest] == [(1, -32800)]
            assert await agent.process.wait() == 0
            await agent.stdin.aclose()
    assert b"exited cleanly" in agent.stderr


async def test_grace_deadline_ends_a_stuck_serve() -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            agent = await start_agent(nursery, "--linger", "--grace", "0.5")
            await agent.send(echo(1, [1]))
            await agent.out.receive()
            agent.process.send_signal(signal.SIGTERM)
            assert await agent.out.receive_all() == []
            assert await agent.process.wait() == 0
            await agent.stdin.aclose()
    assert b"connection ended" in agent.stderr


async def test_second_signal_stops_at_once() -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            # A grace far longer than this test may take: only the second signal can
            # end the process in time.
            agent = await start_agent(nursery, "--linger", "--grace", "3600")
            await agent.send(echo(1, [1]))
            await agent.out.receive()
            agent.process.send_signal(signal.SIGTERM)
            assert await agent.out.receive_all() == []  # the connection has ended
            agent.process.send_signal(signal.SIGTERM)
            assert await agent.process.wait() == 0
            await agent.stdin.aclose()


async def test_protocol_fds_not_inherited_and_stdio_repointed() -> None:
    """In-process check of open_stdio_stream's fd juggling, on a forked child so the
    test runner's own stdio is untouched."""
    script = r"""
import os, sys, trio
from trio_acp.stdio import open_stdio_stream
stream = open_stdio_stream()
print("to-stderr")
os.write(1, b"fd1-to-stderr\n")
assert os.read(0, 10) == b""  # fd 0 is /dev/null now
async def main():
    data = await stream.receive_some(100)
    await stream.send_all(b"echo:" + data)
    await stream.aclose()
trio.run(main)
"""
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, "-c", script], stdin=b"ping", capture_stdout=True, capture_stderr=True
        )
    assert result.stdout == b"echo:ping"
    assert b"to-stderr" in result.stderr and b"fd1-to-stderr" in result.stderr
