"""The editor as the workspace: an agent's use of the `fs/*` and `terminal/*` a client offers.

Each check runs in an agent process of its own that the suite initializes as an editor
advertising a given capability level (`editor.py` answers the requests): `fs` read and
write plus `terminal` ("editor"), or `fs.readTextFile` alone ("read-only"). The level with
no capabilities at all is `capabilities.py`. Whether an agent uses what is offered is its
choice (advisory checks); what it must never do, and what it must do once it uses a
terminal, is mandatory.
"""

from __future__ import annotations

import json

import trio

from ..context import Context, Turn
from ..editor import EditorServices
from ..harness import AgentProcess
from ..model import Failed, Level, NotTested, check
from ..scenarios import edit_prompt, review_prompt, shell_prompt, sleep_prompt
from ._util import require_stop_reason

AREA = "editor"

EDITOR_CAPS = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
READ_ONLY_CAPS = {"fs": {"readTextFile": True, "writeTextFile": False}, "terminal": False}

ON_DISK = "greeting = 'on disk'\n"
BUFFER = "greeting = 'unsaved'\n"
EDITED = "greeting = 'edited'\n"


async def _editor(ctx: Context) -> tuple[AgentProcess, EditorServices, str]:
    return await ctx.editor_agent("editor", EDITOR_CAPS)


async def _review(ctx: Context) -> tuple[Turn, EditorServices, str]:
    """One turn viewing and editing a file whose buffer differs from the disk (shared)."""
    if "editor-review" in ctx.memo:
        result: tuple[Turn, EditorServices, str] = ctx.memo["editor-review"]
        return result
    agent, services, sid = await _editor(ctx)
    path = ctx.workdir / "editor-review.py"
    path.write_text(ON_DISK, encoding="utf-8")
    services.buffers[str(path)] = BUFFER
    turn = await ctx.turn(sid, review_prompt(str(path), "'unsaved'", "'edited'"), agent=agent)
    require_stop_reason(turn)
    ctx.memo["editor-review"] = (turn, services, str(path))
    return turn, services, str(path)


async def _shell(ctx: Context) -> tuple[Turn, EditorServices, int]:
    """One turn running `echo` with terminals offered (shared); the index of its first call."""
    if "editor-shell" in ctx.memo:
        result: tuple[Turn, EditorServices, int] = ctx.memo["editor-shell"]
        return result
    agent, services, sid = await _editor(ctx)
    first = len(services.calls)
    turn = await ctx.turn(sid, shell_prompt("echo conformance-terminal"), agent=agent)
    require_stop_reason(turn)
    ctx.memo["editor-shell"] = (turn, services, first)
    return turn, services, first


def _tool_text(turn: Turn) -> str:
    return json.dumps([f.params for f in turn.tool_calls()], ensure_ascii=False)


@check(
    "ACP-EDITOR-001",
    "no fs/write_text_file when the client advertised only readTextFile",
    rule='"If readTextFile or writeTextFile is false or not present, the Agent MUST NOT attempt to '
    'call the corresponding filesystem method" (file-system.mdx). The suite advertises '
    "fs.readTextFile alone and asks the model to create and edit a file.",
    level=Level.MANDATORY,
    area=AREA,
)
async def no_write_with_read_only(ctx: Context) -> str:
    ctx.prestart_editor_agent("editor", EDITOR_CAPS)  # for the next checks, meanwhile
    agent, services, sid = await ctx.editor_agent("read-only", READ_ONLY_CAPS)
    turn = await ctx.turn(sid, edit_prompt(str(ctx.workdir / "editor-read-only.txt")), agent=agent)
    require_stop_reason(turn)
    writes = [m for m in services.methods() if m == "fs/write_text_file"]
    terminals = [m for m in services.methods() if m.startswith("terminal/")]
    if writes or terminals:
        raise Failed(f"called {', '.join(sorted(set(writes + terminals)))} though not advertised")
    if not turn.tool_calls():
        raise NotTested("no tool call happened in the edit scenario")
    return f"reads: {services.methods().count('fs/read_text_file')}, writes: none"


@check(
    "ACP-EDITOR-002",
    "an edit goes to the editor (fs/write_text_file), not to the disk",
    rule="With fs.writeTextFile advertised, an agent's edits should reach the editor so that they "
    "show in its review UI and unsaved buffers are not overwritten behind the user's back "
    "(file-system.mdx: fs/write_text_file lets the client track edits). The file's buffer "
    "differs from the disk; the edit must arrive as fs/write_text_file and the disk stay as it was.",
    level=Level.ADVISORY,
    area=AREA,
)
async def edit_through_editor(ctx: Context) -> str:
    turn, services, path = await _review(ctx)
    with open(path, encoding="utf-8") as f:
        disk = f.read()
    writes = [c.params for c in services.calls if c.method == "fs/write_text_file"]
    if disk != ON_DISK:
        raise Failed(f"the agent wrote the disk: {disk!r}")
    if not writes:
        if not turn.tool_calls():
            raise NotTested("no tool call happened in the review scenario")
        raise Failed("the edit never arrived as fs/write_text_file")
    if writes[-1].get("path") != path or writes[-1].get("content") != EDITED:
        raise Failed(f"fs/write_text_file carried {json.dumps(writes[-1])[:200]}")
    return "the edit arrived as fs/write_text_file; the disk is untouched"


@check(
    "ACP-EDITOR-003",
    "reads see the editor's buffer, unsaved changes included",
    rule="With fs.readTextFile advertised, an agent should read through it: fs/read_text_file "
    "\"allows Agents to read text file contents from the Client's filesystem, including "
    'unsaved changes in the editor" (file-system.mdx). The view of a file whose buffer differs '
    "from the disk must show the buffer.",
    level=Level.ADVISORY,
    area=AREA,
)
async def reads_the_buffer(ctx: Context) -> str:
    turn, services, path = await _review(ctx)
    reads = [c for c in services.calls if c.method == "fs/read_text_file"]
    shown = _tool_text(turn)
    if "on disk" in shown:
        raise Failed("the view showed the disk's text, not the editor's buffer")
    if not reads:
        if not turn.tool_calls():
            raise NotTested("no tool call happened in the review scenario")
        raise Failed("the file was never read through fs/read_text_file")
    if "unsaved" not in shown:
        raise Failed("the buffer's text is not in the view's tool call")
    return f"{len(reads)} fs/read_text_file call(s); the view showed the buffer"


@check(
    "ACP-EDITOR-004",
    "every terminal the agent creates is released",
    rule="\"The Agent MUST release the terminal using terminal/release when it's no longer "
    'needed" (terminals.mdx). The suite advertises terminal and asks the model to run a command.',
    level=Level.MANDATORY,
    area=AREA,
)
async def terminals_released(ctx: Context) -> str:
    turn, services, first = await _shell(ctx)
    created = [c for c in services.calls[first:] if c.method == "terminal/create"]
    if not created:
        raise NotTested("the agent ran no command in a client terminal")
    agent, _, _ = await _editor(ctx)

    def unreleased() -> list[str]:
        released = {
            f.params.get("terminalId")
            for f in agent.inbound
            if f.is_request and f.method == "terminal/release" and isinstance(f.params, dict)
        }
        return [tid for tid in services.terminals if tid not in released]

    # A release may follow the response: give it a moment (re-checked on every frame).
    await agent.wait_for(lambda: not unreleased(), 5)
    live = unreleased()
    if live:
        raise Failed(f"never released: {', '.join(live)}")
    return f"{len(created)} terminal(s) created, all released"


@check(
    "ACP-EDITOR-005",
    "a command in a client terminal is embedded in its tool call",
    rule='Tool calls "can embed terminals" ({"type": "terminal", "terminalId"}), so the client '
    "shows the command's live output (terminals.mdx, tool-calls.mdx). Advisory: what an editor "
    "needs to show the terminal at all.",
    level=Level.ADVISORY,
    area=AREA,
)
async def terminal_embedded(ctx: Context) -> str:
    turn, services, first = await _shell(ctx)
    created = [c for c in services.calls[first:] if c.method == "terminal/create"]
    if not created:
        raise NotTested("the agent ran no command in a client terminal")
    ids = {t for t in services.terminals if t.startswith("conformance-term-")}
    embedded = [
        item.get("terminalId")
        for f in turn.tool_calls()
        for item in (f.params["update"].get("content") or [])
        if isinstance(item, dict) and item.get("type") == "terminal"
    ]
    if not any(tid in ids for tid in embedded):
        raise Failed("no tool call content of type terminal names the created terminal")
    return f"embedded: {', '.join(sorted(set(t for t in embedded if t in ids)))}"


@check(
    "ACP-EDITOR-006",
    "a cancel during a client-terminal command kills and releases it before `cancelled`",
    rule="On session/cancel the agent must stop the running tools and answer `cancelled` "
    '(prompt-turn.mdx); a terminal must be released (terminals.mdx: "MUST release"), and '
    "terminal/kill is how its command is stopped. The suite cancels `sleep 30` running in a "
    "client terminal: terminal/kill (or release) and terminal/release must come before the "
    "response, within 2 s of the cancel.",
    level=Level.ADVISORY,
    area=AREA,
)
async def cancel_kills_terminal(ctx: Context) -> str:
    agent, services, sid = await _editor(ctx)
    mark, handle = await ctx.start_turn(agent, sid, sleep_prompt(30))

    def created() -> bool:
        return any(f.is_request and f.method == "terminal/create" for f in agent.since(mark))

    await agent.wait_for(lambda: created() or handle.done, 60)
    if not created():
        await agent.notify("session/cancel", {"sessionId": sid})
        await ctx.finish_turn(agent, sid, mark, handle, must_answer=False)
        raise NotTested("the agent ran the command without a client terminal")
    await trio.sleep(0.3)  # the command runs; the agent waits on it
    sent = trio.current_time()
    await agent.notify("session/cancel", {"sessionId": sid})
    turn = await ctx.finish_turn(agent, sid, mark, handle, timeout=30)
    took = trio.current_time() - sent
    reason = require_stop_reason(turn)
    if reason != "cancelled":
        raise Failed(f"stopReason {reason!r}, not cancelled")
    before = [f.method for f in turn.requests]
    if "terminal/release" not in before:
        raise Failed(f"no terminal/release before the response (requests: {before[-6:]})")
    if took > 2.0:
        raise Failed(f"the response came {took:.1f} s after the cancel")
    killed = "terminal/kill" in before
    return f"{'kill + ' if killed else ''}release before `cancelled`, {took * 1000:.0f} ms"
