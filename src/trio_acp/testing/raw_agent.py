"""A raw-frame client for `trio-acp` as a subprocess: bytes in, checked frames out.

For tests and benchmarks that must put on the wire what no well-behaved client would
(invalid UTF-8, over-size lines, odd ids, requests pipelined while not reading), and that
check what comes back: every line on the agent's stdout must be one valid JSON-RPC 2.0
frame (`RawAgent.bad_lines` collects the others).

Synchronous on purpose (`subprocess` + `selectors`): one agent process can then serve
many plain test functions through a module-scoped fixture, and every wait has a deadline,
so a hang is a `Hang` error naming what was awaited, never a stuck test run.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Hang", "RawAgent", "frame_problem", "same_id"]


class Hang(AssertionError):
    """The agent did not do what was awaited before the deadline."""


def same_id(a: Any, b: Any) -> bool:
    """Id equality without Python's ``True == 1`` and ``1 == 1.0``."""
    return type(a) is type(b) and a == b


def frame_problem(frame: Any) -> str | None:
    """Why ``frame`` (a decoded line) is not a valid JSON-RPC 2.0 message an agent may send,
    or None when it is one."""
    if not isinstance(frame, dict):
        return "not a JSON object"
    if frame.get("jsonrpc") != "2.0":
        return 'no "jsonrpc": "2.0"'
    rid = frame.get("id", ...)
    valid_id = isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
    if "method" in frame:
        if not isinstance(frame["method"], str):
            return "a method that is not a string"
        if rid is not ... and not valid_id:
            return f"a request id of type {type(rid).__name__}"
        params = frame.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            return "params neither an object nor an array"
        return None
    if ("result" in frame) == ("error" in frame):
        return 'a response needs exactly one of "result" and "error"'
    if rid is ...:
        return "a response without an id"
    if "result" in frame and not valid_id:
        return f"a result with an id of type {type(rid).__name__}"
    if "error" in frame:
        if rid is not None and not valid_id:
            return f"an error with an id of type {type(rid).__name__}"
        error = frame["error"]
        if not (
            isinstance(error, dict)
            and type(error.get("code")) is int
            and isinstance(error.get("message"), str)
        ):
            return "a malformed error object"
    return None


class RawAgent:
    """`python -m trio_acp` (or ``argv``) with raw bytes on its stdin and stdout."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.frames: list[dict[str, Any]] = []  # every frame received, in order
        self.bad_lines: list[bytes] = []  # stdout lines that were not valid frames
        self._seen = 0  # frames already looked at by `read_until`
        self._claimed: set[int] = set()  # indexes of responses handed out by `response`
        self._buffer = bytearray()
        self._eof = False
        self._next_id = 1_000_000
        os.set_blocking(process.stdin.fileno(), False)  # type: ignore[union-attr]
        os.set_blocking(process.stdout.fileno(), False)  # type: ignore[union-attr]

    @classmethod
    def spawn(
        cls,
        env: Mapping[str, str],
        *,
        argv: list[str] | None = None,
        stderr: Any = None,
        cwd: str | None = None,
    ) -> RawAgent:
        """Start the agent; ``stderr`` None inherits ours (a pipe nobody reads could fill)."""
        process = subprocess.Popen(
            argv or [sys.executable, "-m", "trio_acp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=dict(env),
            cwd=cwd,
        )
        return cls(process)

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    # -- writing ---------------------------------------------------------------------

    def write(self, data: bytes, *, timeout: float = 30.0, read: bool = True) -> None:
        """Write all of ``data``.  With ``read``, frames are collected meanwhile (a real
        client's reader runs concurrently); without it, stdout is left unread, and a
        write that cannot finish within ``timeout`` is a `Hang`."""
        view = memoryview(data)
        deadline = time.monotonic() + timeout
        fd_in = self.process.stdin.fileno()  # type: ignore[union-attr]
        with selectors.DefaultSelector() as sel:
            sel.register(fd_in, selectors.EVENT_WRITE)
            if read and not self._eof:
                sel.register(self.process.stdout.fileno(), selectors.EVENT_READ)  # type: ignore[union-attr]
            while view:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Hang(
                        f"the agent stopped reading its stdin ({len(view):,} bytes not written)"
                    )
                for key, _ in sel.select(min(left, 1.0)):
                    if key.fd == fd_in:
                        try:
                            written = os.write(fd_in, view[: 1 << 20])
                        except BlockingIOError:
                            continue
                        except BrokenPipeError as exc:
                            raise Hang(
                                f"the agent closed its stdin (exit status {self.process.poll()})"
                            ) from exc
                        view = view[written:]
                    elif not self._read_available():
                        sel.unregister(key.fd)
                if not view:
                    break
                if not self.alive():
                    raise Hang(
                        f"the agent exited (status {self.process.returncode}) while being written to"
                    )

    def send(self, frame: Mapping[str, Any], **kwargs: Any) -> None:
        self.write(json.dumps(frame).encode() + b"\n", **kwargs)

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    # -- reading ---------------------------------------------------------------------

    def _read_available(self) -> bool:
        """Read what is there; False at EOF."""
        fd = self.process.stdout.fileno()  # type: ignore[union-attr]
        while True:
            try:
                data = os.read(fd, 1 << 20)
            except BlockingIOError:
                return True
            if not data:
                self._eof = True
                return False
            self._buffer += data
            self._split()

    def _split(self) -> None:
        while (newline := self._buffer.find(b"\n")) >= 0:
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            try:
                frame = json.loads(line)
            except ValueError:
                self.bad_lines.append(line)
                continue
            if frame_problem(frame) is not None:
                self.bad_lines.append(line)
                continue
            self.frames.append(frame)

    def read_until(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 60.0,
        what: str = "a frame",
    ) -> dict[str, Any]:
        """The first frame not handed out before that matches ``predicate``; frames before it
        stay in `frames`.  A `Hang` at the deadline or at EOF."""
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()  # type: ignore[union-attr]
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                while self._seen < len(self.frames):
                    frame = self.frames[self._seen]
                    self._seen += 1
                    if predicate(frame):
                        return frame
                if self._eof:
                    raise Hang(
                        f"the agent closed its stdout (exit status {self.process.poll()}) "
                        f"while we waited for {what}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Hang(f"no {what} within {timeout} s")
                if sel.select(min(left, 1.0)):
                    self._read_available()

    def response(self, rid: Any, **kwargs: Any) -> dict[str, Any]:
        """The response to request ``rid`` not handed out before (frames received earlier too)."""

        def unclaimed(index: int, frame: dict[str, Any]) -> bool:
            return (
                index not in self._claimed
                and "method" not in frame
                and same_id(frame.get("id"), rid)
            )

        for index, frame in enumerate(self.frames):
            if unclaimed(index, frame):
                self._claimed.add(index)
                return frame
        frame = self.read_until(
            lambda f: unclaimed(self._seen - 1, f),
            what=f"the response to request {rid!r}",
            **kwargs,
        )
        self._claimed.add(self._seen - 1)
        return frame

    def request(
        self, method: str, params: Any = None, *, rid: Any = None, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Send a request and return its response frame (result or error)."""
        rid = self.new_id() if rid is None else rid
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            frame["params"] = params
        self.send(frame)
        return self.response(rid, timeout=timeout)

    def result(self, method: str, params: Any = None, **kwargs: Any) -> Any:
        reply = self.request(method, params, **kwargs)
        if "result" not in reply:
            raise AssertionError(f"{method} failed: {reply.get('error')}")
        return reply["result"]

    def drain(self, seconds: float = 0.2) -> None:
        """Collect what arrives within ``seconds``."""
        deadline = time.monotonic() + seconds
        fd = self.process.stdout.fileno()  # type: ignore[union-attr]
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while not self._eof and (left := deadline - time.monotonic()) > 0:
                if sel.select(left):
                    self._read_available()

    # -- ACP conveniences ------------------------------------------------------------

    def initialize(self) -> dict[str, Any]:
        return self.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def new_session(self, cwd: str, *, timeout: float = 240.0) -> str:
        return self.result("session/new", {"cwd": cwd, "mcpServers": []}, timeout=timeout)[
            "sessionId"
        ]

    def prompt(
        self, session_id: str, blocks: list[dict[str, Any]] | str, *, timeout: float = 90.0
    ) -> dict[str, Any]:
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        return self.request(
            "session/prompt", {"sessionId": session_id, "prompt": blocks}, timeout=timeout
        )

    # -- ending ----------------------------------------------------------------------

    def close(self, *, timeout: float = 15.0) -> int:
        """Close stdin (the editor went away) and wait for the exit; kill at the deadline
        (and raise `Hang`).  Returns the exit status."""
        try:
            self.process.stdin.close()  # type: ignore[union-attr]
        except BrokenPipeError:
            pass
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            self.drain(0.1)
        if self.alive():
            self.process.kill()
            self.process.wait()
            raise Hang(f"the agent did not exit within {timeout} s of its stdin closing")
        if not self._eof:
            self._read_available()
        self.process.stdout.close()  # type: ignore[union-attr]
        return self.process.returncode

    def __enter__(self) -> RawAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.alive():
            try:
                self.close()
            except Hang:
                pass
