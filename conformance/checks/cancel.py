"""session/cancel."""

from __future__ import annotations

import attrs
import trio

from ..context import Context, Turn
from ..harness import Frame
from ..model import Failed, Level, NotTested, check
from ..scenarios import echo_prompt, sleep_prompt, slow_prompt
from ._util import late_turn_updates, require_stop_reason, turn_update_since

AREA = "cancel"


@attrs.define
class Cancelled:
    session_id: str
    turn: Turn
    cancel: Frame


async def cancelled_turn(ctx: Context) -> Cancelled:
    """One slow turn, cancelled once it is under way (shared by the cancel checks)."""
    if "cancel" in ctx.memo:
        value = ctx.memo["cancel"]
        if isinstance(value, Exception):
            raise value
        return value
    try:
        value = await _cancelled_turn(ctx)
    except NotTested as exc:
        ctx.memo["cancel"] = exc
        raise
    ctx.memo["cancel"] = value
    return value


async def _cancelled_turn(ctx: Context) -> Cancelled:
    agent = await ctx.main()
    sid, _ = await ctx.new_session()
    mark, handle = await ctx.start_turn(agent, sid, slow_prompt())

    def started() -> bool:
        return handle.done or any(
            f.method == "session/update"
            and f.session_id == sid
            and f.update_kind in ("agent_message_chunk", "agent_thought_chunk", "tool_call")
            for f in agent.since(mark)
        )

    await agent.wait_for(started, timeout=3.0)
    if handle.done:
        raise NotTested("the turn ended before a cancel could be sent")
    cancel = await agent.notify("session/cancel", {"sessionId": sid})
    turn = await ctx.finish_turn(agent, sid, mark, handle, timeout=20, grace=1.5)
    return Cancelled(sid, turn, cancel)


@check(
    "ACP-CANCEL-001",
    "a cancelled turn ends with stopReason cancelled",
    rule='"the Agent MUST respond to the original session/prompt request with the cancelled stop '
    'reason"; exceptions from aborted operations MUST be caught and turned into it '
    "(prompt-turn.mdx §Cancellation; acp-tck ACP-CANCEL-001).",
    level=Level.MANDATORY,
    area=AREA,
)
async def cancelled_result(ctx: Context) -> str:
    c = await cancelled_turn(ctx)
    reason = require_stop_reason(c.turn, "the cancelled session/prompt")
    if reason != "cancelled":
        raise Failed(f"stopReason {reason!r} after session/cancel")
    return "cancelled"


@check(
    "ACP-CANCEL-002",
    "nothing for the session follows the cancelled turn's response",
    rule="The Agent MAY send more session/update after session/cancel but MUST send them before "
    "responding to session/prompt (prompt-turn.mdx; acp-tck ACP-CANCEL-002). Watched for 1.5 s; "
    "session-level updates (commands, mode, config, info, usage) are not counted.",
    level=Level.MANDATORY,
    area=AREA,
)
async def nothing_after(ctx: Context) -> str:
    c = await cancelled_turn(ctx)
    late = late_turn_updates(c.turn.late)
    if late:
        raise Failed(f"{len(late)} update(s) after the response, first: {late[0].short()}")
    return f"{len(c.turn.updates)} update(s) before the response, none after"


@check(
    "ACP-CANCEL-003",
    "the session works after a cancel",
    rule="A cancelled turn leaves the session usable (wedged sessions after cancel "
    "in hermes-agent, opencode, nano-rlm).",
    level=Level.ADVISORY,
    area=AREA,
)
async def usable_after_cancel(ctx: Context) -> str:
    c = await cancelled_turn(ctx)
    turn = await ctx.turn(c.session_id, echo_prompt("after the cancel"), timeout=30)
    reason = require_stop_reason(turn, "the next prompt")
    if reason == "cancelled":
        raise Failed("the next prompt was also cancelled")
    return f"next prompt: {reason}"


@check(
    "ACP-CANCEL-004",
    "a cancel is answered within 2 s",
    rule="Agents SHOULD stop LLM requests and tool invocations as soon as possible after "
    "session/cancel (prompt-turn.mdx); the target here: bounded latency under 2 s.",
    level=Level.ADVISORY,
    area=AREA,
)
async def cancel_latency(ctx: Context) -> str:
    c = await cancelled_turn(ctx)
    if c.turn.reply is None:
        raise Failed("no response")
    latency = c.turn.reply.frame.time - c.cancel.time
    if latency > 2.0:
        raise Failed(f"answered {latency:.2f} s after the cancel")
    await trio.lowlevel.checkpoint()
    return f"{latency * 1000:.0f} ms"


@check(
    "ACP-CANCEL-005",
    "a cancel during a running tool call is answered within 5 s",
    rule="On session/cancel the agent SHOULD stop tool invocations as soon as possible and then "
    "answer cancelled (prompt-turn.mdx §Cancellation; a soft pause that waits for the "
    "tool is the common failure). The tool runs `sleep 20`.",
    level=Level.ADVISORY,
    area=AREA,
    timeout=90,
)
async def cancel_mid_tool(ctx: Context) -> str:
    agent = await ctx.main()
    sid, _ = await ctx.new_session()
    mark, handle = await ctx.start_turn(agent, sid, sleep_prompt(20))

    def tool_started() -> bool:
        return handle.done or any(
            f.session_id == sid and f.update_kind in ("tool_call", "tool_call_update")
            for f in agent.since(mark)
        )

    await agent.wait_for(tool_started, timeout=15.0)
    if handle.done:
        raise NotTested("the turn ended before the tool call started")
    if not tool_started():
        raise NotTested("no tool call within 15 s")
    await trio.sleep(1.0)  # let the command start
    if handle.done:
        raise NotTested("the turn ended before a cancel could be sent")
    cancel = await agent.notify("session/cancel", {"sessionId": sid})
    turn = await ctx.finish_turn(agent, sid, mark, handle, timeout=40, grace=0.5)
    reason = require_stop_reason(turn)
    latency = turn.reply.frame.time - cancel.time if turn.reply else float("inf")
    if reason != "cancelled":
        raise Failed(f"stopReason {reason!r} after {latency:.1f} s")
    if latency > 5.0:
        raise Failed(f"answered {latency:.1f} s after the cancel")
    return f"cancelled after {latency * 1000:.0f} ms"


def _prompt_msg(agent, sid: str, text: str) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": agent.new_id(),
        "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
    }


def _cancel_msg(sid: str) -> dict:
    return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}


def _stop_reason(reply, what: str) -> str:
    if not reply.ok:
        raise Failed(f"{what}: {reply.describe()}")
    result = reply.result
    return result.get("stopReason") if isinstance(result, dict) else None


@check(
    "ACP-CANCEL-006",
    "a cancel right behind its prompt (same write) cancels it",
    rule="session/cancel ends the prompt turn the client sent before it: the Agent MUST answer that "
    "session/prompt with the cancelled stop reason (prompt-turn.mdx §Cancellation) — also when the "
    "two arrive together, before the agent has started the turn (a user pressing Esc at once, a "
    "pipelining client). The prompt would stream for ~10 s otherwise.",
    level=Level.MANDATORY,
    area=AREA,
)
async def cancel_behind_prompt(ctx: Context) -> str:
    agent = await ctx.main()
    sid, _ = await ctx.new_session()
    prompt, _ = await agent.send_together(
        [_prompt_msg(agent, sid, slow_prompt()), _cancel_msg(sid)]
    )
    assert prompt is not None
    reply = await prompt.wait(30)
    reason = _stop_reason(reply, "the prompt")
    if reason != "cancelled":
        latency = reply.frame.time - prompt.frame.time
        raise Failed(f"stopReason {reason!r} after {latency:.1f} s: the cancel was lost")
    return "cancelled"


@check(
    "ACP-CANCEL-007",
    "a prompt sent right after session/cancel runs",
    rule="A cancel ends the turns sent before it, not the ones after: clients send session/cancel "
    "and the next session/prompt in the same breath, and that prompt must run once the cancelled "
    "turn has answered — not be refused as busy (hermes-agent#79196; the cancel and the next "
    "prompt are written together here, while a slow turn streams).",
    level=Level.ADVISORY,
    area=AREA,
)
async def prompt_after_cancel(ctx: Context) -> str:
    agent = await ctx.main()
    sid, _ = await ctx.new_session()
    mark, running = await ctx.start_turn(agent, sid, slow_prompt())
    await agent.wait_for(lambda: running.done or turn_update_since(agent, sid, mark), timeout=5.0)
    if running.done:
        raise NotTested("the turn ended before a cancel could be sent")
    _, following = await agent.send_together(
        [_cancel_msg(sid), _prompt_msg(agent, sid, echo_prompt("after"))]
    )
    assert following is not None
    first = _stop_reason(await running.wait(30), "the cancelled prompt")
    if first != "cancelled":
        raise NotTested(f"the running turn answered {first!r}, not cancelled (see ACP-CANCEL-001)")
    second = _stop_reason(await following.wait(30), "the prompt sent after the cancel")
    if second == "cancelled":
        raise Failed("the prompt sent after the cancel was cancelled too")
    return f"cancelled, then {second}"
