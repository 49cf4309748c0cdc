"""An editor-shaped ACP client, in process: its files are buffers (a dict that may differ
from the disk), it runs terminals itself (real processes), and it records every call —
for tests and benchmarks of the agent's `fs/*` and `terminal/*` use
(`trio_acp.openhands.editor.workspace`). `editor_pair` connects it to a bare agent and
yields that agent's `ClientProxy`, for making client calls the way a session does.
POSIX only (terminals are process groups)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from .. import schema
from ..connection import AgentHooks, ClientProxy
from ..rpc import RequestError
from .pair import open_in_memory_pair

SESSION = "0f9e6a52-3a6e-4cf5-9f0c-5d2e8c3b9a11"


class ProxyAgent(AgentHooks):
    """The least an agent needs to be served; keeps the `ClientProxy` it is given."""

    def __init__(self) -> None:
        self.client: Any = None

    def on_connect(self, client: ClientProxy) -> None:
        self.client = client

    async def initialize(self, params):
        return schema.InitializeResponse(protocol_version=1)

    async def new_session(self, params):
        return schema.NewSessionResponse(session_id=SESSION)

    async def prompt(self, params):
        return schema.PromptResponse(stop_reason="end_turn")

    async def cancel(self, params):
        return None


class EditorClient:
    """Buffers in `buffers` (path → text); `refuse` (path → reason) refuses writes;
    `hang` makes every fs call wait forever (until cancelled, which it records).
    Terminals are killed as a process group; with `kill_spawned_only` set to a signal,
    kill and release send it to the spawned process alone (as acpx 0.15 does).
    `create_gate`: `terminal/create` waits for it (a person deciding, as acpx asks its
    user); with `ignore_cancel` it creates the terminal even if the agent cancelled the
    request meanwhile (as a client that does not honour `$/cancel_request` may, e.g. acpx 0.15)."""

    def __init__(self, buffers: dict[str, str] | None = None, *, terminal: bool = True) -> None:
        self.buffers = dict(buffers or {})
        self.refuse: dict[str, str] = {}
        self.hang = False
        self.calls: list[tuple[str, Any]] = []
        self.cancelled: list[str] = []
        self.received = trio.Event()
        self.terminal = terminal
        self.terminals: dict[str, dict[str, Any]] = {}
        self._nursery: trio.Nursery | None = None
        self.updates: list[Any] = []
        self.create_delay = 0.0
        self.create_gate: trio.Event | None = None
        self.create_received = trio.Event()
        self.ignore_cancel = False
        self.kill_spawned_only: signal.Signals | None = None
        self._next = 0

    def capabilities(self) -> schema.ClientCapabilities:
        return schema.ClientCapabilities(
            fs=schema.FileSystemCapabilities(read_text_file=True, write_text_file=True),
            terminal=self.terminal,
        )

    async def session_update(self, params):
        self.updates.append(params.update)

    async def request_permission(self, params):
        return schema.RequestPermissionResponse(outcome=schema.CancelledPermissionOutcome())

    async def _maybe_hang(self, method: str) -> None:
        self.received.set()
        if self.hang:
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.cancelled.append(method)
                raise

    async def read_text_file(self, params):
        self.calls.append(("fs/read_text_file", params.path))
        await self._maybe_hang("fs/read_text_file")
        if params.path not in self.buffers:
            raise RequestError(-32002, f"Resource not found: {params.path}")
        text = self.buffers[params.path]
        if params.line is not None or params.limit is not None:
            lines = text.splitlines(keepends=True)
            start = (params.line or 1) - 1
            end = start + params.limit if params.limit is not None else None
            text = "".join(lines[start:end])
        return schema.ReadTextFileResponse(content=text)

    async def write_text_file(self, params):
        self.calls.append(("fs/write_text_file", params.path))
        await self._maybe_hang("fs/write_text_file")
        if params.path in self.refuse:
            raise RequestError(-32603, self.refuse[params.path])
        self.buffers[params.path] = params.content
        return schema.WriteTextFileResponse()

    # --- terminals: real processes, run by the "editor" ---------------------------------

    async def create_terminal(self, params):
        self.calls.append(("terminal/create", params))
        self.create_received.set()
        with trio.CancelScope(shield=self.ignore_cancel):
            await trio.sleep(self.create_delay)
            if self.create_gate is not None:
                await self.create_gate.wait()
            return await self._create(params)

    async def _create(self, params):
        self._next += 1
        tid = f"term-{self._next}"
        env = {v.name: v.value for v in params.env or []}
        proc = await trio.lowlevel.open_process(
            [params.command, *(params.args or [])],
            cwd=params.cwd,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        term = {
            "proc": proc,
            "out": b"",
            "limit": params.output_byte_limit,
            "done": trio.Event(),
            "truncated": False,
        }
        self.terminals[tid] = term
        self._nursery.start_soon(self._pump, term)
        return schema.CreateTerminalResponse(terminal_id=tid)

    async def _pump(self, term):
        proc = term["proc"]
        async with proc.stdout:
            while data := await proc.stdout.receive_some(65536):
                out = term["out"] + data
                limit = term["limit"]
                if limit is not None and len(out) > limit:
                    out = out[len(out) - limit :]
                    term["truncated"] = True
                term["out"] = out
        await proc.wait()
        term["done"].set()

    def _status(self, term):
        rc = term["proc"].returncode
        if rc is None:
            return None
        if rc < 0:
            return schema.TerminalExitStatus(exit_code=None, signal=f"signal {-rc}")
        return schema.TerminalExitStatus(exit_code=rc)

    async def terminal_output(self, params):
        self.calls.append(("terminal/output", params.terminal_id))
        term = self.terminals[params.terminal_id]
        return schema.TerminalOutputResponse(
            output=term["out"].decode(errors="replace"),
            truncated=term["truncated"],
            exit_status=self._status(term),
        )

    async def wait_for_terminal_exit(self, params):
        self.calls.append(("terminal/wait_for_exit", params.terminal_id))
        term = self.terminals[params.terminal_id]
        try:
            await term["done"].wait()
        except trio.Cancelled:
            self.cancelled.append("terminal/wait_for_exit")
            raise
        status = self._status(term)
        return schema.WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(self, params):
        self.calls.append(("terminal/kill", params.terminal_id))
        self._kill(self.terminals[params.terminal_id])
        return schema.KillTerminalResponse()

    async def release_terminal(self, params):
        self.calls.append(("terminal/release", params.terminal_id))
        self._kill(self.terminals.pop(params.terminal_id))
        return schema.ReleaseTerminalResponse()

    def _kill(self, term: dict[str, Any]) -> None:
        proc = term["proc"]
        if proc.returncode is not None:
            return
        if self.kill_spawned_only is not None:
            proc.send_signal(self.kill_spawned_only)
        else:
            os.killpg(proc.pid, signal.SIGKILL)

    def methods(self) -> list[str]:
        return [m for m, _ in self.calls]


@asynccontextmanager
async def editor_pair(client: EditorClient) -> AsyncIterator[Any]:
    """Yield the agent side's `ClientProxy`, initialized with the client's capabilities."""
    agent = ProxyAgent()
    async with trio.open_nursery() as nursery:
        client._nursery = nursery
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(
                protocol_version=1, client_capabilities=client.capabilities()
            )
            yield agent.client
        nursery.cancel_scope.cancel()
