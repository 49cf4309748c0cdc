"""The suite as an editor: `fs/*` over buffers that differ from the disk, `terminal/*` over
real processes — for the checks of an agent's use of what the client offers
(`checks/editor.py`).

An `EditorServices` is attached to one agent process (`AgentProcess.editor`); the harness
then answers that process's `fs/*` and `terminal/*` requests through it instead of with
-32601, and it records every call with the time it arrived. Terminals are process groups
(POSIX), killed with SIGKILL; their output is kept up to the agent's `outputByteLimit`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import attrs
import trio

__all__ = ["ClientCall", "EditorServices", "ServiceError"]


class ServiceError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@attrs.define
class ClientCall:
    method: str
    params: dict[str, Any]
    at: float  # time.monotonic() when it arrived


@attrs.define
class _Terminal:
    process: trio.Process
    limit: int | None
    output: bytearray = attrs.Factory(bytearray)
    truncated: bool = False
    exit_status: dict[str, Any] | None = None
    exited: trio.Event = attrs.Factory(trio.Event)
    released: bool = False


class EditorServices:
    """What an editor client answers (module doc). `buffers`: path → unsaved text."""

    METHODS = (
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    )

    def __init__(self, nursery: trio.Nursery, buffers: dict[str, str] | None = None) -> None:
        self._nursery = nursery
        self.buffers = dict(buffers or {})
        self.calls: list[ClientCall] = []
        self.terminals: dict[str, _Terminal] = {}
        self._next = 0

    def handles(self, method: str | None) -> bool:
        return method in self.METHODS

    def methods(self, since: int = 0) -> list[str]:
        return [c.method for c in self.calls[since:]]

    def live_terminals(self) -> list[str]:
        return [tid for tid, t in self.terminals.items() if not t.released]

    async def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(ClientCall(method, params, time.monotonic()))
        name = method.replace("/", "_")
        return await getattr(self, name)(params)

    # --- fs ---------------------------------------------------------------------------

    async def fs_read_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        path = params.get("path")
        if not isinstance(path, str) or not os.path.isabs(path):
            raise ServiceError(-32602, f"path must be absolute: {path!r}")
        if path in self.buffers:
            text = self.buffers[path]
        else:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ServiceError(-32002, f"cannot read {path}: {exc.strerror}") from None
        line, limit = params.get("line"), params.get("limit")
        if isinstance(line, int) or isinstance(limit, int):
            lines = text.splitlines(keepends=True)
            start = max(0, (line or 1) - 1)
            text = "".join(
                lines[start : start + limit] if isinstance(limit, int) else lines[start:]
            )
        return {"content": text}

    async def fs_write_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        path, content = params.get("path"), params.get("content")
        if not isinstance(path, str) or not os.path.isabs(path) or not isinstance(content, str):
            raise ServiceError(-32602, "path (absolute) and content are required")
        self.buffers[path] = content  # the buffer, for the user to review and save
        return {}

    # --- terminals ----------------------------------------------------------------------

    async def terminal_create(self, params: dict[str, Any]) -> dict[str, Any]:
        command = params.get("command")
        if not isinstance(command, str) or not command:
            raise ServiceError(-32602, "command is required")
        args = [a for a in params.get("args") or [] if isinstance(a, str)]
        env = dict(os.environ)
        for var in params.get("env") or []:
            if isinstance(var, dict) and isinstance(var.get("name"), str):
                env[var["name"]] = str(var.get("value", ""))
        cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else None
        try:
            process = await trio.lowlevel.open_process(
                [command, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise ServiceError(-32603, f"cannot start {command}: {exc}") from None
        self._next += 1
        tid = f"conformance-term-{self._next}"
        limit = params.get("outputByteLimit")
        term = _Terminal(process, limit if isinstance(limit, int) and limit >= 0 else None)
        self.terminals[tid] = term
        self._nursery.start_soon(self._collect, term)
        return {"terminalId": tid}

    async def _collect(self, term: _Terminal) -> None:
        assert term.process.stdout is not None
        async with term.process.stdout:
            while chunk := await term.process.stdout.receive_some(65536):
                term.output += chunk
                if term.limit is not None and len(term.output) > term.limit:
                    del term.output[: len(term.output) - term.limit]
                    term.truncated = True
        code = await term.process.wait()
        term.exit_status = (
            {"exitCode": None, "signal": signal.Signals(-code).name}
            if code < 0
            else {"exitCode": code, "signal": None}
        )
        term.exited.set()

    def _terminal(self, params: dict[str, Any]) -> _Terminal:
        term = self.terminals.get(params.get("terminalId"))  # type: ignore[arg-type]
        if term is None or term.released:
            raise ServiceError(-32602, f"unknown terminal {params.get('terminalId')!r}")
        return term

    async def terminal_output(self, params: dict[str, Any]) -> dict[str, Any]:
        term = self._terminal(params)
        return {
            "output": term.output.decode("utf-8", "replace"),
            "truncated": term.truncated,
            "exitStatus": term.exit_status,
        }

    async def terminal_wait_for_exit(self, params: dict[str, Any]) -> dict[str, Any]:
        term = self._terminal(params)
        await term.exited.wait()
        return dict(term.exit_status or {})

    async def terminal_kill(self, params: dict[str, Any]) -> dict[str, Any]:
        self._kill(self._terminal(params))
        return {}

    async def terminal_release(self, params: dict[str, Any]) -> dict[str, Any]:
        term = self._terminal(params)
        self._kill(term)
        term.released = True
        return {}

    @staticmethod
    def _kill(term: _Terminal) -> None:
        if term.exit_status is None:
            try:
                os.killpg(term.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        """The run is over: no process of ours outlives it."""
        for term in self.terminals.values():
            self._kill(term)
