"""Shared helpers for the tests in tests/rpc (imported as a plain module)."""

from __future__ import annotations

from typing import Any

import orjson
import trio
import trio.testing

from trio_acp.rpc import LineBuffer, RequestError


class RawSide:
    """The other end of a peer's stream, driven by hand: write raw lines, read frames."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._buffer = LineBuffer(1 << 30)
        self._frames: list[bytes] = []
        self.raw_lines: list[bytes] = []

    async def send(self, message: Any) -> None:
        await self.send_raw(orjson.dumps(message) + b"\n")

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def receive_line(self) -> bytes | None:
        """The next raw frame the peer wrote, or None at EOF."""
        while not self._frames:
            data = await self.stream.receive_some(1 << 16)
            if not data:
                self._frames.extend(self._buffer.feed_eof())  # type: ignore[arg-type]
                if not self._frames:
                    return None
                break
            self._frames.extend(self._buffer.feed(data))  # type: ignore[arg-type]
        line = self._frames.pop(0)
        self.raw_lines.append(line)
        return line

    async def receive(self) -> Any:
        line = await self.receive_line()
        assert line is not None, "unexpected EOF"
        return orjson.loads(line)

    async def receive_all(self) -> list[Any]:
        """Everything until EOF."""
        out = []
        while (line := await self.receive_line()) is not None:
            out.append(orjson.loads(line))
        return out

    async def send_eof(self) -> None:
        await self.stream.send_eof()  # type: ignore[attr-defined]


class RecordingHandler:
    """Echo-ish handler that records what it saw."""

    def __init__(self) -> None:
        self.notifications: list[tuple[str, Any]] = []
        self.requests: list[tuple[str, Any]] = []

    async def handle_request(self, method: str, params: Any) -> Any:
        self.requests.append((method, params))
        if method == "echo":
            return params
        if method == "null":
            return None
        if method == "sleep":
            await trio.sleep(params["seconds"])
            return "slept"
        if method == "forever":
            await trio.sleep_forever()
        if method == "fail":
            raise ValueError("boom")
        raise RequestError.method_not_found(method)

    async def handle_notification(self, method: str, params: Any) -> None:
        self.notifications.append((method, params))


def response_error(code: int, id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "error": {"code": code}}


def strip_error(msg: dict[str, Any]) -> dict[str, Any]:
    """A response with only the error code kept (messages are free text)."""
    if "error" in msg:
        return {**msg, "error": {"code": msg["error"]["code"]}}
    return msg
