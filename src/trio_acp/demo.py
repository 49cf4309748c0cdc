"""`trio-acp demo`: what an editor would show, on the embedded scripted model.

A terminal client of ours launches `trio-acp` as a subprocess over stdio, exactly as an
editor does, with the scripted OpenAI-compatible server on 127.0.0.1 as its model (no API
key, no network, the real litellm streaming path). It prints the streamed reply, a
terminal tool call that really runs, a file edit with its diff, the plan, and the stop
reason of each turn.
"""

from __future__ import annotations

import difflib
import os
import shutil
import sys
import tempfile
import time

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from . import schema
from .process import spawn_agent
from .testing import ScriptedLLM, scenario_prompt, scripted_env


class DemoClient:
    """Renders session updates the way an editor's agent panel would, in a terminal."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._inline: str | None = None  # "message" / "thought" while streaming text
        self.counts: dict[str, int] = {}

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
            client = DemoClient(console)
            console.rule("trio-acp demo")
            console.print(f"model: scripted OpenAI-compatible server at {llm.base_url}")
            console.print(f"workspace: {workspace}")
            started = time.perf_counter()
            async with spawn_agent([sys.executable, "-m", "trio_acp"], client, env=env) as proc:
                agent = proc.agent
                init = await agent.initialize(
                    protocol_version=1,
                    client_capabilities=schema.ClientCapabilities(),
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
                prompts = [
                    scenario_prompt("demo", "Show me what you can do in this workspace."),
                    scenario_prompt("remember", "What did I ask you first?"),
                ]
                for text in prompts:
                    console.rule(f"[bold]prompt[/] {escape(text)}")
                    response = await agent.prompt(
                        session_id=session.session_id, prompt=[schema.TextContent(text=text)]
                    )
                    client._end_inline()
                    console.print(f"[bold]stop reason:[/] {response.stop_reason}")
            console.rule("done")
            files = sorted(os.listdir(workspace))
            console.print(f"workspace now holds: {files}")
            counts = ", ".join(f"{k}×{v}" for k, v in sorted(client.counts.items()))
            console.print(f"updates received: {counts}")
        return 0
    finally:
        shutil.rmtree(home, ignore_errors=True)
        if keep:
            console.print(f"kept {workspace}")
        else:
            shutil.rmtree(workspace, ignore_errors=True)
