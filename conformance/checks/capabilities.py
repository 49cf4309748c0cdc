"""Client capabilities respected: no fs/*, terminal/* or elicitation unless advertised.

These run near the end: each drives the scenario that tempts the agent (a file edit, a
shell command), then judges every frame of the whole run.
"""

from __future__ import annotations

from ..context import Context
from ..model import Failed, Level, NotTested, check
from ..scenarios import edit_prompt, shell_prompt
from ._util import require_stop_reason

AREA = "capabilities"


def _advertised(params: dict | None, method: str) -> bool:
    caps = (params or {}).get("clientCapabilities") or {}
    if method == "fs/read_text_file":
        return bool((caps.get("fs") or {}).get("readTextFile"))
    if method == "fs/write_text_file":
        return bool((caps.get("fs") or {}).get("writeTextFile"))
    if method.startswith("terminal/"):
        return bool(caps.get("terminal"))
    if method == "elicitation/create":
        return bool(caps.get("elicitation"))
    return True


def _violations(ctx: Context, prefix: str) -> list[str]:
    out = []
    for agent, frame in ctx.all_inbound():
        method = frame.method
        if (
            frame.is_request
            and method
            and method.startswith(prefix)
            and not _advertised(agent.initialize_params, method)
        ):
            out.append(f"{method} in process {agent.name}")
    return out


async def _tool_turn(ctx: Context, prompt: str) -> int:
    sid = await ctx.shared_session()
    turn = await ctx.turn(sid, prompt)
    require_stop_reason(turn)
    return len([f for f in turn.updates if f.update_kind == "tool_call"])


@check(
    "ACP-CAPS-001",
    "no fs/* requests unless the client advertised them",
    rule='"If readTextFile or writeTextFile is false or not present, the Agent MUST NOT attempt to '
    'call the corresponding filesystem method" (file-system.mdx). The suite advertises none, asks '
    "the model to create and edit a file, and watches the whole run.",
    level=Level.MANDATORY,
    area=AREA,
)
async def no_fs(ctx: Context) -> str:
    tools = await _tool_turn(ctx, edit_prompt(str(ctx.workdir / "caps-edit.txt")))
    bad = _violations(ctx, "fs/")
    if bad:
        raise Failed(f"{len(bad)} call(s): {', '.join(bad[:3])}")
    if not tools:
        raise NotTested("no tool call happened in the edit scenario; none seen elsewhere either")
    return f"none in the run ({tools} tool call(s) in the edit scenario)"


@check(
    "ACP-CAPS-002",
    "no terminal/* requests unless the client advertised terminal",
    rule='"If terminal is false or not present, the Agent MUST NOT attempt to call any terminal '
    'methods" (terminals.mdx). The suite asks the model to run a shell command.',
    level=Level.MANDATORY,
    area=AREA,
)
async def no_terminal(ctx: Context) -> str:
    marker = ctx.marker()
    tools = await _tool_turn(ctx, shell_prompt(f"touch {marker}"))
    bad = _violations(ctx, "terminal/")
    if bad:
        raise Failed(f"{len(bad)} call(s): {', '.join(bad[:3])}")
    if not tools:
        raise NotTested("no tool call happened in the shell scenario")
    return f"none in the run ({tools} tool call(s) in the shell scenario)"


@check(
    "ACP-CAPS-003",
    "no elicitation unless the client advertised it",
    rule='"Agents MUST NOT request a mode the Client has not advertised" (elicitation.mdx); the '
    "suite advertises no elicitation. Judged over the whole run.",
    level=Level.MANDATORY,
    area=AREA,
)
async def no_elicitation(ctx: Context) -> str:
    await ctx.basic_traffic()
    bad = _violations(ctx, "elicitation/")
    if bad:
        raise Failed(f"{len(bad)} call(s): {', '.join(bad[:3])}")
    return f"none in {len(ctx.turns)} turn(s)"
