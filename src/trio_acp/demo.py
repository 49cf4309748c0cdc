"""`trio-acp demo`: what an editor would show, on the embedded scripted model.

A terminal client of ours launches `trio-acp` as a subprocess over stdio, exactly as an
editor does, with the scripted OpenAI-compatible server on 127.0.0.1 as its model (no API
key, no network, the real litellm streaming path). It prints the streamed reply, a
terminal tool call that really runs, a file edit with its diff, the plan, and the stop
reason of each turn.

The client is editor-shaped (docs/editor-workspace.md): it offers `fs/*` and `terminal/*`,
so the agent reads the client's buffers (one holds an unsaved change), every edit arrives
for review as `fs/write_text_file` (the demo accepts it and saves it), and commands run in
the client's terminals (`trio_acp.testing.editor.EditorClient` runs them as processes).
"""

from __future__ import annotations

import difflib
import os
import shutil
import sys
import tempfile
import time
from collections import Counter

import trio
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from . import schema
from .process import spawn_agent
from .testing import ScriptedLLM, scenario_prompt, scripted_env
from .testing.editor import EditorClient
from .testing.scenarios import DEMO_FILE_NAME


class DemoClient(EditorClient):
    """Renders session updates the way an editor's agent panel would, in a terminal; its
    files are buffers over the disk, its terminals real processes."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console
        self._inline: str | None = None  # "message" / "thought" while streaming text
        self.counts: dict[str, int] = {}
        self.outputs: dict[str, str] = {}  # a released terminal's output, still shown

    # --- the editor's side: buffers, review, terminals ----------------------------------

    async def read_text_file(self, params):
        if params.path not in self.buffers:
            text = _read_or_none(params.path)
            if text is not None:
                self.buffers[params.path] = text
        return await super().read_text_file(params)

    async def write_text_file(self, params):
        self._end_inline()
        before = self.buffers.get(params.path)
        if before is None:
            before = _read_or_none(params.path)
        diff = "".join(
            difflib.unified_diff(
                (before or "").splitlines(keepends=True),
                params.content.splitlines(keepends=True),
                "a" + params.path,
                "b" + params.path,
            )
        )
        self.console.print(
            Panel(
                Syntax(diff or "(no change)", "diff", theme="ansi_dark"),
                title=f"editor: review of {os.path.basename(params.path)}",
                subtitle="accepted and saved by the user",
                expand=False,
            )
        )
        response = await super().write_text_file(params)
        _save(params.path, params.content)  # the user saved the buffer
        return response

    async def create_terminal(self, params):
        self._end_inline()
        response = await super().create_terminal(params)
        args = params.args or []
        # The agent wraps the command in a small script (it keeps the directory a `cd`
        # leaves); its first line is the command itself.
        shown = args[1].splitlines()[0] if args[:1] == ["-c"] and len(args) > 1 else " ".join(args)
        self.console.print(
            f"[magenta]editor terminal[/] {response.terminal_id}: {escape(shown[:120])}"
        )
        return response

    async def release_terminal(self, params):
        term = self.terminals.get(params.terminal_id)
        if term is not None:
            self.outputs[params.terminal_id] = term["out"].decode(errors="replace")
        return await super().release_terminal(params)

    def _end_inline(self) -> None:
        if self._inline is not None:
            self.console.print()
            self._inline = None

    async def session_update(self, params: schema.SessionNotification) -> None:
        update = params.update
        name = type(update).__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        if isinstance(update, (schema.AgentMessageChunk, schema.AgentThoughtChunk)):
            kind = "message" if isinstance(update, schema.AgentMessageChunk) else "thought"
            text = getattr(update.content, "text", "")
            if self._inline != kind:
                self._end_inline()
                label = "[bold green]agent[/] " if kind == "message" else "[dim]thinking[/] "
                self.console.print(label, end="")
                self._inline = kind
            self.console.print(
                text,
                end="",
                style="dim italic" if kind == "thought" else None,
                markup=False,
                highlight=False,
            )
            return
        self._end_inline()
        if isinstance(update, schema.ToolCallStart):
            self.console.print(
                f"[bold cyan]tool[/] {escape('[' + (update.kind or 'other') + ']')} {escape(update.title)}"
                f"  [dim]({update.status or 'pending'})[/]"
            )
        elif isinstance(update, schema.ToolCallProgress):
            if update.status:
                style = {"completed": "green", "failed": "red"}.get(update.status, "yellow")
                title = f" {escape(update.title)}" if update.title else ""
                self.console.print(
                    f"  [dim]{update.tool_call_id[:12]}[/] [{style}]{update.status}[/]{title}"
                )
            for content in update.content or []:
                self._show_tool_content(content)
        elif isinstance(update, schema.AgentPlanUpdate):
            table = Table(title="plan", show_header=True)
            table.add_column("status")
            table.add_column("task")
            for entry in update.entries:
                table.add_row(entry.status, entry.content)
            self.console.print(table)
        elif isinstance(update, schema.UsageUpdate):
            self.console.print(f"[dim]usage: {update.used}/{update.size} tokens[/]")

    def _show_tool_content(self, content) -> None:
        wire = schema.to_wire(content)
        if wire.get("type") == "diff":
            old = (wire.get("oldText") or "").splitlines(keepends=True)
            new = (wire.get("newText") or "").splitlines(keepends=True)
            diff = "".join(difflib.unified_diff(old, new, "a" + wire["path"], "b" + wire["path"]))
            self.console.print(Syntax(diff or "(no change)", "diff", theme="ansi_dark"))
        elif wire.get("type") == "terminal":
            tid = wire["terminalId"]
            output = self.outputs.get(tid)
            if output is not None and output.strip():
                self.console.print(
                    Panel(output.rstrip()[:2000], title=f"terminal {tid}", expand=False)
                )
        elif wire.get("type") == "content":
            text = (wire.get("content") or {}).get("text", "")
            if text.strip():
                self.console.print(Panel(text.rstrip()[:2000], title="output", expand=False))

    async def request_permission(
        self, params: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse:
        self._end_inline()
        option = next((o for o in params.options if o.kind == "allow_once"), params.options[0])
        self.console.print(f"[yellow]permission asked[/]: answering {option.name!r}")
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id=option.option_id)
        )


async def demo_main(keep: bool = False) -> int:
    console = Console(highlight=False)
    workspace = tempfile.mkdtemp(prefix="trio-acp-demo-")
    home = tempfile.mkdtemp(prefix="trio-acp-demo-home-")
    try:
        with ScriptedLLM() as llm:
            env = dict(os.environ)
            env.update(scripted_env(llm.base_url))
            env.update(
                OPENHANDS_PERSISTENCE_DIR=home,
                LLM_NUM_RETRIES="1",
                LLM_TIMEOUT="30",
                LLM_MAX_INPUT_TOKENS="128000",
            )
            # The demo's model and home are gone when it ends: a warm server it started
            # would only outlive it (README "Warm start"); the user's own setting wins.
            env.setdefault("TRIO_ACP_WARM", "0")
            client = DemoClient(console)
            console.rule("trio-acp demo")
            console.print(f"model: scripted OpenAI-compatible server at {llm.base_url}")
            console.print(f"workspace: {workspace}")
            started = time.perf_counter()
            notes = os.path.join(workspace, "notes.txt")
            _save(notes, "status = 'draft'\n")
            # An unsaved change in the editor: the agent sees it, not the disk's text.
            client.buffers[notes] = "status = 'draft'  # edited in the editor, not saved\n"
            async with (
                trio.open_nursery() as nursery,
                spawn_agent([sys.executable, "-m", "trio_acp"], client, env=env) as proc,
            ):
                client._nursery = nursery
                agent = proc.agent
                init = await agent.initialize(
                    protocol_version=1,
                    client_capabilities=client.capabilities(),
                    client_info=schema.Implementation(name="trio-acp-demo", version="0"),
                )
                t_init = time.perf_counter() - started
                info = init.agent_info
                console.print(
                    f"initialize: {info.title or info.name} {info.version}, protocol v{init.protocol_version} "
                    f"[dim]({t_init * 1000:.0f} ms after spawn)[/]"
                )
                session = await agent.new_session(cwd=workspace, mcp_servers=[])
                t_new = time.perf_counter() - started
                console.print(
                    f"session/new: {session.session_id} [dim]({t_new:.1f} s after spawn, SDK import included)[/]"
                )
                demo_file = os.path.join(workspace, DEMO_FILE_NAME)
                prompts = [
                    scenario_prompt(
                        "demo", "Show me what you can do in this workspace.", path=demo_file
                    ),
                    scenario_prompt("remember", "What did I ask you first?"),
                    scenario_prompt(
                        "review", "Mark the notes as done.", path=notes, old="draft", new="done"
                    ),
                ]
                for text in prompts:
                    console.rule(f"[bold]prompt[/] {escape(text)}")
                    response = await agent.prompt(
                        session_id=session.session_id, prompt=[schema.TextContent(text=text)]
                    )
                    client._end_inline()
                    console.print(f"[bold]stop reason:[/] {response.stop_reason}")
                nursery.cancel_scope.cancel()
            console.rule("done")
            files = sorted(os.listdir(workspace))
            console.print(f"workspace now holds: {files}")
            counts = ", ".join(f"{k}×{v}" for k, v in sorted(client.counts.items()))
            console.print(f"updates received: {counts}")
            asked = ", ".join(f"{m}×{n}" for m, n in sorted(_tally(client.methods()).items()))
            console.print(f"editor requests: {asked}")
        return 0
    finally:
        shutil.rmtree(home, ignore_errors=True)
        if keep:
            console.print(f"kept {workspace}")
        else:
            shutil.rmtree(workspace, ignore_errors=True)


def _tally(methods: list[str]) -> dict[str, int]:
    return dict(Counter(methods))


# Small files of the demo's own workspace: read and written in place.
def _read_or_none(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _save(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
