"""A raw ACP client over an agent subprocess's stdio, that records every byte.

The suite does not use trio-acp's typed client: a conformance harness must not be
forgiving.  It reads the agent's stdout itself, splits it on ``\\n`` and keeps every line as
a `Frame` (its raw bytes, whether it is UTF-8, whether it is JSON, its position in the
conversation), so that checks can judge framing, ordering and schema after the fact.

It answers the agent's requests the way a plain client that advertised no capabilities
would: ``session/request_permission`` through a per-session policy (by default: the first
"allow" option), everything else (``fs/*``, ``terminal/*``, elicitation) with ``-32601`` —
unless an `editor.EditorServices` is attached (``AgentProcess.editor``), which then answers
``fs/*`` and ``terminal/*`` as an editor that advertised them does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

__all__ = ["AgentExited", "AgentProcess", "Frame", "Reply", "RequestTimeout", "open_agent"]

#: Seconds a write to the agent's stdin may block before the agent counts as stuck.
WRITE_TIMEOUT = 30.0

#: Marks a line that is not a JSON value.
NOT_JSON = object()


@attrs.define
class Frame:
    """One line, either way.  ``seq`` orders all frames of one process."""

    seq: int
    direction: str  # "in": agent → suite (agent's stdout); "out": suite → agent
    time: float
    raw: bytes
    msg: Any = NOT_JSON  # the parsed JSON value, or NOT_JSON
    problem: str | None = None  # why the line is not one JSON-RPC message

    @property
    def is_json(self) -> bool:
        return self.msg is not NOT_JSON

    @property
    def method(self) -> str | None:
        m = self.msg.get("method") if isinstance(self.msg, dict) else None
        return m if isinstance(m, str) else None

    @property
    def params(self) -> Any:
        return self.msg.get("params") if isinstance(self.msg, dict) else None

    @property
    def is_request(self) -> bool:
        return isinstance(self.msg, dict) and "method" in self.msg and "id" in self.msg

    @property
    def is_notification(self) -> bool:
        return isinstance(self.msg, dict) and "method" in self.msg and "id" not in self.msg

    @property
    def is_response(self) -> bool:
        return (
            isinstance(self.msg, dict)
            and "method" not in self.msg
            and ("result" in self.msg or "error" in self.msg)
        )

    @property
    def session_id(self) -> Any:
        p = self.params
        return p.get("sessionId") if isinstance(p, dict) else None

    @property
    def update_kind(self) -> str | None:
        """``sessionUpdate`` of a ``session/update`` notification."""
        if self.method != "session/update":
            return None
        p = self.params
        u = p.get("update") if isinstance(p, dict) else None
        k = u.get("sessionUpdate") if isinstance(u, dict) else None
        return k if isinstance(k, str) else None

    def short(self, n: int = 160) -> str:
        text = self.raw.decode("utf-8", "replace")
        return text if len(text) <= n else text[: n - 3] + "..."


@attrs.define
class Reply:
    """The agent's response to one of our requests."""

    frame: Frame
    request: Frame

    @property
    def msg(self) -> dict[str, Any]:
        return self.frame.msg

    @property
    def ok(self) -> bool:
        return "result" in self.msg and "error" not in self.msg

    @property
    def result(self) -> Any:
        return self.msg.get("result")

    @property
    def error(self) -> dict[str, Any] | None:
        e = self.msg.get("error")
        return (
            e
            if isinstance(e, dict)
            else ({"code": None, "message": repr(e)} if "error" in self.msg else None)
        )

    @property
    def code(self) -> Any:
        return (self.error or {}).get("code")

    def describe(self) -> str:
        if self.ok:
            return f"result {json.dumps(self.result)[:200]}"
        e = self.error or {}
        return f"error {e.get('code')} {str(e.get('message'))[:160]!r}"


class AgentExited(Exception):
    """The agent's stdout closed (it exited or crashed) before it answered."""


class RequestTimeout(Exception):
    pass


def _id_key(value: Any) -> tuple[str, Any] | None:
    # 5 and "5" are different ids; so are 1 and true (bool is an int in Python).
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, float) and value.is_integer():
        return ("float", value)
    return None


#: (params, frame) → the permission outcome object to answer with, e.g.
#: ``{"outcome": "selected", "optionId": "x"}``; may wait (await) for a while.
PermissionPolicy = Callable[[dict[str, Any], Frame], Awaitable[dict[str, Any]]]


async def allow_first(params: dict[str, Any], frame: Frame) -> dict[str, Any]:
    return choose(params, ("allow_once", "allow_always"))


def choose(params: dict[str, Any], kinds: Sequence[str]) -> dict[str, Any]:
    """The first option of the first of ``kinds`` offered (else the first option)."""
    options = [o for o in params.get("options") or [] if isinstance(o, dict)]
    for kind in kinds:
        for option in options:
            if option.get("kind") == kind:
                return {"outcome": "selected", "optionId": option.get("optionId")}
    if options:
        return {"outcome": "selected", "optionId": options[0].get("optionId")}
    return {"outcome": "cancelled"}


class AgentProcess:
    """One agent subprocess.  Use `open_agent`; all I/O goes through here."""

    def __init__(
        self, name: str, process: trio.Process, nursery: trio.Nursery, stderr_path: Path
    ) -> None:
        self.name = name
        self.process = process
        self.stderr_path = stderr_path
        self._nursery = nursery
        self.frames: list[Frame] = []
        self._seq = 0
        self._next_id = 0
        self._pending: dict[tuple[str, Any], tuple[Frame, trio.Event, list[Frame]]] = {}
        self._send_lock = trio.Lock()
        self._changed = trio.Event()
        self.stdout_closed = False
        self.exited = trio.Event()
        #: Set to stop a long-lived process (the end of the run, or it stopped answering).
        self.retire = trio.Event()
        self.returncode: int | None = None
        self.stdin_closed = False
        self.started = time.monotonic()
        self.exit_time: float | None = None
        #: sessionId → permission policy; the default answers "allow".
        self.permission_policies: dict[Any, PermissionPolicy] = {}
        self.default_permission: PermissionPolicy = allow_first
        #: What the suite itself observed going wrong, e.g. a response to an unknown id.
        self.anomalies: list[str] = []
        #: Error responses with id null (answers to frames the agent could not read).
        self.null_id_errors: list[Frame] = []
        self.initialize_params: dict[str, Any] | None = None
        self.initialize_result: dict[str, Any] | None = None
        #: When set (`editor.EditorServices`), `fs/*` and `terminal/*` are answered by it:
        #: the suite is then an editor that advertised them.
        self.editor: Any = None

    # --- observation ------------------------------------------------------------------

    @property
    def inbound(self) -> list[Frame]:
        return [f for f in self.frames if f.direction == "in"]

    def mark(self) -> int:
        """A position in the conversation: frames after it have ``seq > mark``."""
        return self._seq

    def since(self, mark: int, direction: str = "in") -> list[Frame]:
        return [f for f in self.frames if f.seq > mark and f.direction == direction]

    def _touch(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[], Any], timeout: float) -> Any:
        """Wait until ``predicate()`` is truthy (re-checked on every frame); its value or None."""
        with trio.move_on_after(timeout):
            while True:
                value = predicate()
                if value:
                    return value
                if self.stdout_closed and self.exited.is_set():
                    return predicate() or None
                await self._changed.wait()
        return predicate() or None

    async def quiet(self, seconds: float) -> None:
        """Let the agent talk for ``seconds`` (to see whether anything else arrives)."""
        await trio.sleep(seconds)

    @property
    def alive(self) -> bool:
        return not self.stdout_closed and not self.exited.is_set()

    def stderr_error(self) -> str:
        """The last ``SomethingError: ...`` the agent logged (box drawing stripped), or ""."""
        text = self.stderr_tail(20000)
        lines = [" ".join(re.sub(r"[│╭╮╰╯─┃━]", " ", line).split()) for line in text.splitlines()]
        for i in range(len(lines) - 1, -1, -1):
            if re.match(r"^[A-Za-z_.]*(Error|Exception)\b:", lines[i]):
                out = [lines[i]]
                for more in lines[i + 1 : i + 4]:
                    if not more or re.match(r"^\[|^[A-Za-z_.]*(Error|Exception)\b", more):
                        break
                    out.append(more)
                return " ".join(out)[:300]
        return ""

    def stderr_tail(self, n: int = 600) -> str:
        try:
            data = self.stderr_path.read_bytes()
        except OSError:
            return ""
        return data[-n:].decode("utf-8", "replace").strip()

    # --- sending ----------------------------------------------------------------------

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def send_raw(self, data: bytes) -> Frame:
        """Write bytes as they are (one ``Frame`` records them, parsed if possible)."""
        async with self._send_lock:
            frame = self._record("out", data.rstrip(b"\n"))
            try:
                assert self.process.stdin is not None
                # An agent whose reader died (e.g. on a too-long line) stops draining its
                # stdin: the pipe fills and the write would wait forever.
                with trio.fail_after(WRITE_TIMEOUT):
                    await self.process.stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise AgentExited(f"cannot write to the agent: {exc!r}") from None
            except trio.TooSlowError:
                raise RequestTimeout(
                    f"the agent has not read its stdin for {WRITE_TIMEOUT:g} s "
                    f"({len(data)} bytes to write)"
                ) from None
            return frame

    async def send(self, msg: dict[str, Any]) -> Frame:
        return await self.send_raw(json.dumps(msg, ensure_ascii=False).encode("utf-8") + b"\n")

    async def notify(self, method: str, params: Any = None) -> Frame:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        return await self.send(msg)

    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        id: Any = None,
        timeout: float = 30.0,
        raw: bytes | None = None,
    ) -> Reply:
        """Send a request and wait for its response (``RequestTimeout``, ``AgentExited``)."""
        handle = await self.start_request(method, params, id=id, raw=raw)
        return await handle.wait(timeout)

    async def start_request(
        self, method: str, params: Any = None, *, id: Any = None, raw: bytes | None = None
    ) -> PendingRequest:
        """Send a request; `PendingRequest.wait` gets the response later."""
        if id is None:
            id = self.new_id()
        key = _id_key(id)
        assert key is not None, f"unsupported id {id!r}"
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        event = trio.Event()
        slot: list[Frame] = []
        # Registered before sending: the answer may come before send_all returns.
        placeholder = Frame(-1, "out", time.monotonic(), b"")
        self._pending[key] = (placeholder, event, slot)
        try:
            if raw is not None:
                frame = await self.send_raw(raw)
            else:
                frame = await self.send(msg)
        except BaseException:
            self._pending.pop(key, None)
            raise
        if key in self._pending:
            self._pending[key] = (frame, event, slot)
        return PendingRequest(self, key, frame, event, slot, method)

    async def send_together(self, msgs: Sequence[dict[str, Any]]) -> list[PendingRequest | None]:
        """Write several messages in ONE write (one read for the agent), as a pipelining
        client or a user pressing Esc right after Enter does.  Returns a handle per
        message: a `PendingRequest` for requests, None for notifications."""
        lines = [json.dumps(m, ensure_ascii=False).encode("utf-8") for m in msgs]
        handles: list[PendingRequest | None] = []
        keys = []
        async with self._send_lock:
            for msg, line in zip(msgs, lines, strict=False):
                frame = self._record("out", line)
                if "id" in msg and "method" in msg:
                    key = _id_key(msg["id"])
                    assert key is not None, f"unsupported id {msg['id']!r}"
                    event, slot = trio.Event(), []
                    self._pending[key] = (frame, event, slot)
                    keys.append(key)
                    handles.append(PendingRequest(self, key, frame, event, slot, msg["method"]))
                else:
                    handles.append(None)
            try:
                assert self.process.stdin is not None
                with trio.fail_after(WRITE_TIMEOUT):
                    await self.process.stdin.send_all(b"".join(line + b"\n" for line in lines))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                for key in keys:
                    self._pending.pop(key, None)
                raise AgentExited(f"cannot write to the agent: {exc!r}") from None
            except trio.TooSlowError:
                raise RequestTimeout(
                    f"the agent has not read its stdin for {WRITE_TIMEOUT:g} s"
                ) from None
        return handles

    async def close_stdin(self) -> None:
        if self.stdin_closed:
            return
        self.stdin_closed = True
        try:
            assert self.process.stdin is not None
            await self.process.stdin.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass

    # --- receiving --------------------------------------------------------------------

    def _record(self, direction: str, line: bytes) -> Frame:
        self._seq += 1
        frame = Frame(self._seq, direction, time.monotonic(), bytes(line))
        try:
            text = frame.raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            frame.problem = f"not UTF-8 ({exc.reason} at byte {exc.start})"
            text = None
        if text is not None:
            stripped = text.strip()
            if not stripped:
                frame.problem = "an empty line"
            else:
                try:
                    frame.msg = json.loads(stripped)
                except ValueError as exc:
                    frame.problem = f"not JSON ({exc})"
                else:
                    frame.problem = _envelope_problem(frame.msg)
        self.frames.append(frame)
        if direction == "in":
            self._touch()
        return frame

    async def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        buffer = bytearray()
        try:
            while True:
                try:
                    data = await self.process.stdout.receive_some(1 << 20)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    data = b""
                if not data:
                    break
                buffer += data
                while True:
                    nl = buffer.find(b"\n")
                    if nl < 0:
                        break
                    line = bytes(buffer[:nl])
                    del buffer[: nl + 1]
                    self._dispatch(self._record("in", line))
            if buffer:
                frame = self._record("in", bytes(buffer))
                frame.problem = (frame.problem or "") + " (no newline before EOF)"
                self._dispatch(frame)
        finally:
            self.stdout_closed = True
            for _frame, event, _slot in self._pending.values():
                event.set()
            self._touch()

    def _dispatch(self, frame: Frame) -> None:
        msg = frame.msg
        if not isinstance(msg, dict):
            return
        if frame.is_response:
            if msg.get("id") is None and "error" in msg:
                # An error about a frame the agent could not read (parse error, invalid
                # request): JSON-RPC gives those id null.  Checks judge them by timing.
                self.null_id_errors.append(frame)
                return
            key = _id_key(msg.get("id"))
            pending = self._pending.pop(key, None) if key is not None else None
            if pending is None:
                self.anomalies.append(
                    f"response to an id the suite never sent or already got an answer for: {frame.short()}"
                )
                return
            _req, event, slot = pending
            slot.append(frame)
            event.set()
        elif frame.is_request:
            self._nursery.start_soon(self._answer, frame)

    async def _answer(self, frame: Frame) -> None:
        method = frame.method
        params = frame.params if isinstance(frame.params, dict) else {}
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": frame.msg.get("id")}
        try:
            if method == "session/request_permission":
                policy = self.permission_policies.get(
                    params.get("sessionId"), self.default_permission
                )
                reply["result"] = {"outcome": await policy(params, frame)}
            elif self.editor is not None and self.editor.handles(method):
                try:
                    reply["result"] = await self.editor.answer(method, params)
                except Exception as exc:
                    code, message = getattr(exc, "code", -32603), getattr(exc, "message", None)
                    reply["error"] = {"code": code, "message": message or f"client error: {exc!r}"}
            else:
                reply["error"] = {
                    "code": -32601,
                    "message": f"Method not found: this client did not advertise {method}",
                }
        except Exception as exc:  # a policy bug must not hang the agent
            reply.pop("result", None)
            reply["error"] = {"code": -32603, "message": f"client error: {exc!r}"}
        try:
            await self.send(reply)
        except AgentExited:
            pass

    async def _wait_process(self) -> None:
        self.returncode = await self.process.wait()
        self.exit_time = time.monotonic()
        self.exited.set()
        self._touch()

    # --- stopping ---------------------------------------------------------------------

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except (ProcessLookupError, PermissionError, OSError):
            try:
                self.process.send_signal(sig)
            except (ProcessLookupError, OSError):
                pass

    async def stop(self, grace: float = 3.0) -> None:
        """Close stdin, then SIGTERM, then SIGKILL (the whole process group)."""
        with trio.CancelScope(shield=True):
            await self.close_stdin()
            with trio.move_on_after(grace):
                await self.exited.wait()
            if not self.exited.is_set():
                self._signal_group(signal.SIGTERM)
                with trio.move_on_after(grace):
                    await self.exited.wait()
            if not self.exited.is_set():
                self._signal_group(signal.SIGKILL)
                with trio.move_on_after(5):
                    await self.exited.wait()
            # Children that outlive the agent (tool processes) go with its group.
            self._signal_group(signal.SIGKILL)


@attrs.define
class PendingRequest:
    agent: AgentProcess
    key: tuple[str, Any]
    frame: Frame
    event: trio.Event
    slot: list[Frame]
    method: str

    @property
    def done(self) -> bool:
        return bool(self.slot)

    @property
    def reply(self) -> Reply | None:
        return Reply(self.slot[0], self.frame) if self.slot else None

    async def wait(self, timeout: float) -> Reply:
        with trio.move_on_after(timeout):
            await self.event.wait()
        if self.slot:
            return Reply(self.slot[0], self.frame)
        if self.agent.stdout_closed:
            raise AgentExited(
                f"{self.method}: the agent closed its stdout (exit code "
                f"{self.agent.returncode}) without answering"
            )
        raise RequestTimeout(f"{self.method}: no response within {timeout:g} s")


def _envelope_problem(msg: Any) -> str | None:
    """Why a JSON value is not one JSON-RPC 2.0 message (None when it is)."""
    if isinstance(msg, list):
        return "a JSON array (batch), not one message"
    if not isinstance(msg, dict):
        return f"JSON {type(msg).__name__}, not a JSON-RPC object"
    if msg.get("jsonrpc") != "2.0":
        return f"jsonrpc is {msg.get('jsonrpc')!r}, not '2.0'"
    has_method = "method" in msg
    has_result, has_error = "result" in msg, "error" in msg
    if has_method:
        if not isinstance(msg["method"], str):
            return "method is not a string"
        if has_result or has_error:
            return "a request/notification carrying result/error"
        if "id" in msg and _id_key(msg["id"]) is None:
            return f"request id {msg['id']!r} is not a string or integer"
        return None
    if has_result and has_error:
        return "a response with both result and error"
    if not (has_result or has_error):
        return "neither a request, a notification nor a response"
    if "id" not in msg:
        return "a response without id"
    if has_error:
        e = msg["error"]
        if (
            not isinstance(e, dict)
            or not isinstance(e.get("code"), int)
            or isinstance(e.get("code"), bool)
            or not isinstance(e.get("message"), str)
        ):
            return "error is not {code: integer, message: string}"
    return None


@asynccontextmanager
async def open_agent(
    name: str,
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    stderr_path: Path,
    on_close: Callable[[AgentProcess], Awaitable[None]] | None = None,
) -> AsyncIterator[AgentProcess]:
    """Start the agent in a process group of its own; stop it (and its group) on exit."""
    stderr_file = open(stderr_path, "ab")
    try:
        process = await trio.lowlevel.open_process(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except BaseException:
        stderr_file.close()
        raise
    # An exception from the caller's block is re-raised as itself, not wrapped in the
    # nursery's ExceptionGroup: checks conclude by raising (Failed, NotTested, ...).
    raised: Exception | None = None
    try:
        async with trio.open_nursery() as nursery:
            agent = AgentProcess(name, process, nursery, stderr_path)
            nursery.start_soon(agent._read_stdout)
            nursery.start_soon(agent._wait_process)
            try:
                yield agent
            except Exception as exc:
                raised = exc
            finally:
                await agent.stop()
                if on_close is not None:
                    with trio.CancelScope(shield=True):
                        await on_close(agent)
                nursery.cancel_scope.cancel()
    finally:
        stderr_file.close()
    if raised is not None:
        raise raised
