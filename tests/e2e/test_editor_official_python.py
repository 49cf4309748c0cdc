"""End to end: `trio-acp` over stdio under the official Python client (`agent-client-protocol`)
acting as an editor — it implements `fs/*` over buffers that differ from the disk and
`terminal/*` over real processes (docs/editor-workspace.md)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

import psutil
import pytest

acp = pytest.importorskip("acp")

from _oh_harness import TIMEOUT, Client, Wire, _run, agent_env  # noqa: E402
from acp.schema import (  # noqa: E402
    ClientCapabilities,
    CreateTerminalResponse,
    FileSystemCapabilities,
    Implementation,
    ReadTextFileResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    TextContentBlock,
    ToolCallProgress,
    WaitForTerminalExitResponse,
)

from trio_acp.testing import scenario_prompt  # noqa: E402

BUFFER = "greeting = 'unsaved'\n"
ON_DISK = "greeting = 'on disk'\n"


class Editor(Client):
    """The harness's client plus an editor's files and terminals, every call recorded."""

    def __init__(self, buffers: dict[str, str]) -> None:
        super().__init__()
        self.buffers = dict(buffers)
        self.calls: list[str] = []
        self.terminals: dict[str, dict[str, Any]] = {}
        self.created = asyncio.Event()

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any):
        self.calls.append("fs/read_text_file")
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        with open(path, encoding="utf-8") as f:
            return ReadTextFileResponse(content=f.read())

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any):
        self.calls.append("fs/write_text_file")
        self.buffers[path] = content
        return None

    async def create_terminal(
        self, session_id: str, command: str, args=None, env=None, cwd=None, **kwargs: Any
    ):
        self.calls.append("terminal/create")
        proc = await asyncio.create_subprocess_exec(
            command,
            *(args or []),
            cwd=cwd,
            env={**os.environ, **{v.name: v.value for v in env or []}},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        tid = f"py-term-{len(self.terminals) + 1}"
        term: dict[str, Any] = {"proc": proc, "out": b""}

        async def pump() -> None:
            assert proc.stdout is not None
            while data := await proc.stdout.read(65536):
                term["out"] += data
            await proc.wait()

        term["pump"] = asyncio.ensure_future(pump())
        self.terminals[tid] = term
        self.created.set()
        return CreateTerminalResponse(terminal_id=tid)

    def _status(self, term: dict[str, Any]) -> TerminalExitStatus | None:
        rc = term["proc"].returncode
        if rc is None:
            return None
        return TerminalExitStatus(exit_code=rc) if rc >= 0 else TerminalExitStatus(signal="KILL")

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any):
        self.calls.append("terminal/wait_for_exit")
        term = self.terminals[terminal_id]
        await term["pump"]
        status = self._status(term)
        assert status is not None
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any):
        self.calls.append("terminal/output")
        term = self.terminals[terminal_id]
        return TerminalOutputResponse(
            output=term["out"].decode(errors="replace"),
            truncated=False,
            exit_status=self._status(term),
        )

    def _kill(self, term: dict[str, Any]) -> None:
        if term["proc"].returncode is None:
            try:
                os.killpg(term["proc"].pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any):
        self.calls.append("terminal/kill")
        self._kill(self.terminals[terminal_id])
        return None

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any):
        self.calls.append("terminal/release")
        self._kill(self.terminals.pop(terminal_id))
        return None


async def _scenario(llm, home: str, ws: str) -> dict[str, Any]:
    path = os.path.join(ws, "app.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(ON_DISK)
    editor = Editor({path: BUFFER})
    out: dict[str, Any] = {"editor": editor, "path": path}
    async with acp.spawn_agent_process(
        editor,
        sys.executable,
        "-m",
        "trio_acp",
        env=agent_env(llm, home),
        transport_kwargs={"stderr": None},
    ) as (conn, _process):
        conn._conn.add_observer(Wire())
        await asyncio.wait_for(
            conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                    terminal=True,
                ),
                client_info=Implementation(name="official-python-editor", version="0.0.1"),
            ),
            TIMEOUT,
        )
        sid = (await asyncio.wait_for(conn.new_session(cwd=ws, mcp_servers=[]), TIMEOUT)).session_id

        async def prompt(text: str):
            return await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=[TextContentBlock(type="text", text=text)]),
                TIMEOUT,
            )

        review = scenario_prompt("review", path=path, old="'unsaved'", new="'edited'")
        out["review"] = (await prompt(review)).stop_reason
        out["review_calls"] = list(editor.calls)
        editor.calls.clear()
        out["echo"] = (
            await prompt(scenario_prompt("terminal", command="echo from python"))
        ).stop_reason
        out["echo_calls"] = list(editor.calls)
        editor.calls.clear()
        editor.created.clear()
        sleeping = asyncio.ensure_future(prompt(scenario_prompt("sleep", seconds=30)))
        await asyncio.wait_for(editor.created.wait(), TIMEOUT)
        await asyncio.sleep(0.3)
        await conn.cancel(session_id=sid)
        out["sleep"] = (await sleeping).stop_reason
        out["sleep_calls"] = list(editor.calls)
        out["live_terminals"] = list(editor.terminals)
    with open(path, encoding="utf-8") as f:
        out["disk"] = f.read()
    return out


def test_the_official_python_client_as_an_editor():
    out = _run(_scenario)
    editor: Editor = out["editor"]
    path = out["path"]
    # The view read the buffer; the edit went to the editor; the disk is untouched.
    assert out["review"] == "end_turn"
    assert "fs/read_text_file" in out["review_calls"]
    assert out["review_calls"][-1] == "fs/write_text_file"
    assert editor.buffers[path] == "greeting = 'edited'\n"
    assert out["disk"] == ON_DISK
    # `echo` ran in an editor terminal, embedded in its tool call, and was released.
    assert out["echo"] == "end_turn"
    assert out["echo_calls"] == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    finals = [
        u
        for u in editor.of(ToolCallProgress)
        if u.status == "completed"
        and any(getattr(c, "type", "") == "terminal" for c in u.content or [])
    ]
    assert finals and "from python" in finals[-1].raw_output["output"]
    # `sleep 30` cancelled: killed and released before the `cancelled` response.
    assert out["sleep"] == "cancelled"
    assert out["sleep_calls"][0] == "terminal/create"
    assert "terminal/kill" in out["sleep_calls"] and out["sleep_calls"][-1] == "terminal/release"
    assert out["live_terminals"] == []


FOREGROUND, BACKGROUND = "304", "303"  # `sleep` figures no other test uses


def sleeps() -> list[psutil.Process]:
    """Our two `sleep`s, while they run."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["cmdline"] in (["sleep", FOREGROUND], ["sleep", BACKGROUND]) and (
            proc.info["status"] != psutil.STATUS_ZOMBIE
        ):
            found.append(proc)
    return found


async def _killed_agent(llm, home: str, ws: str) -> dict[str, Any]:
    editor = Editor({})
    env = agent_env(llm, home)
    env["TRIO_ACP_WARM"] = "0"  # the process we kill is the agent itself, not a launcher
    out: dict[str, Any] = {}
    try:
        # The client's own close fails on the dead agent's pipe: expected.
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            async with acp.spawn_agent_process(
                editor, sys.executable, "-m", "trio_acp", env=env, transport_kwargs={"stderr": None}
            ) as (conn, process):
                await asyncio.wait_for(
                    conn.initialize(
                        protocol_version=acp.PROTOCOL_VERSION,
                        client_capabilities=ClientCapabilities(terminal=True),
                        client_info=Implementation(name="official-python-editor", version="0.0.1"),
                    ),
                    TIMEOUT,
                )
                sid = (
                    await asyncio.wait_for(conn.new_session(cwd=ws, mcp_servers=[]), TIMEOUT)
                ).session_id
                command = f"sleep {BACKGROUND} & sleep {FOREGROUND}"
                prompting = asyncio.ensure_future(
                    conn.prompt(
                        session_id=sid,
                        prompt=[
                            TextContentBlock(
                                type="text", text=scenario_prompt("terminal", command=command)
                            )
                        ],
                    )
                )
                loop = asyncio.get_running_loop()
                deadline = loop.time() + TIMEOUT
                while len(sleeps()) < 2:  # the command runs in the editor's terminal
                    assert loop.time() < deadline, "the command never started"
                    assert not prompting.done(), prompting
                    await asyncio.sleep(0.05)
                process.kill()  # SIGKILL: no clean-up of the agent's own can run
                await process.wait()
                # The editor keeps its terminals (nothing here kills them): the command's
                # processes must end by themselves, within a bound (not a figure).
                deadline = loop.time() + 15
                while (left := sleeps()) and loop.time() < deadline:
                    await asyncio.sleep(0.1)
                out["left"] = [p.info["cmdline"] for p in left]
                out["terminals"] = len(editor.terminals)
                prompting.cancel()
    finally:
        for term in editor.terminals.values():
            editor._kill(term)
        for proc in sleeps():  # never left behind, whatever the assertion says
            proc.kill()
    return out


def test_editor_terminals_end_with_a_killed_agent():
    """kill -9 of the agent while its command runs in a client that keeps its terminals:
    the foreground `sleep` and the one sent to the background end all the same."""
    out = _run(_killed_agent)
    assert out["terminals"] == 1  # the editor did not release it: the agent was gone
    assert out["left"] == []
