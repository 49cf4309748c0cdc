"""session/request_permission flows: allow, reject, cancelled."""

from __future__ import annotations

from typing import Any

import trio

from ..context import Context
from ..harness import Frame, choose
from ..model import Failed, Level, check
from ._util import require_stop_reason

AREA = "permissions"

ALLOW = ("allow_once", "allow_always")
REJECT = ("reject_once", "reject_always")


async def _allow(params: dict[str, Any], frame: Frame) -> dict[str, Any]:
    return choose(params, ALLOW)


async def allowed_turn(ctx: Context):
    if "perm-allow" not in ctx.memo:
        ctx.memo["perm-allow"] = await ctx.permission_turn(_allow)
    return ctx.memo["perm-allow"]


@check(
    "ACP-PERM-001",
    "permission requests are well formed",
    rule="session/request_permission carries the sessionId, a toolCall with its toolCallId and "
    "options with unique optionIds (tool-calls.mdx; schema RequestPermissionRequest).",
    level=Level.MANDATORY,
    area=AREA,
)
async def well_formed(ctx: Context) -> str:
    turn, _marker, sid = await allowed_turn(ctx)
    for frame in turn.permission_requests():
        params = frame.params if isinstance(frame.params, dict) else {}
        if params.get("sessionId") != sid:
            raise Failed(f"sessionId {params.get('sessionId')!r}, prompted {sid!r}")
        tool_call = params.get("toolCall")
        if (
            not isinstance(tool_call, dict)
            or not isinstance(tool_call.get("toolCallId"), str)
            or not tool_call.get("toolCallId")
        ):
            raise Failed(f"no toolCall.toolCallId: {frame.short()}")
        options = params.get("options")
        if not isinstance(options, list) or not options:
            raise Failed("no options")
        ids = [o.get("optionId") for o in options if isinstance(o, dict)]
        if len(set(map(str, ids))) != len(ids):
            raise Failed(f"duplicate optionIds: {ids!r}")
    kinds = sorted(
        {o.get("kind") for f in turn.permission_requests() for o in f.params.get("options", [])}
    )
    return (
        f"{len(turn.permission_requests())} request(s); option kinds {', '.join(map(str, kinds))}"
    )


@check(
    "ACP-PERM-002",
    "an allowed tool call runs",
    rule="The client's selected allow option lets the tool run; the turn then ends normally "
    "(tool-calls.mdx §Requesting Permission). The tool creates a marker file.",
    level=Level.MANDATORY,
    area=AREA,
)
async def allow_runs(ctx: Context) -> str:
    turn, marker, _sid = await allowed_turn(ctx)
    reason = require_stop_reason(turn)
    if not marker.exists():
        raise Failed(f"allowed, but the command did not run (stopReason {reason})")
    return f"ran; stopReason {reason}"


@check(
    "ACP-PERM-003",
    "a rejected tool call does not run",
    rule="A reject option means the tool MUST NOT run; the turn goes on or ends, with a result "
    "(tool-calls.mdx: fail closed).",
    level=Level.MANDATORY,
    area=AREA,
)
async def reject_blocks(ctx: Context) -> str:
    async def reject(params: dict[str, Any], frame: Frame) -> dict[str, Any]:
        return choose(params, REJECT)

    turn, marker, _sid = await ctx.permission_turn(reject)
    reason = require_stop_reason(turn)
    if marker.exists():
        raise Failed("rejected, but the command ran")
    return f"did not run; stopReason {reason}"


@check(
    "ACP-PERM-004",
    "cancelling during a permission request: outcome cancelled, no tool, stopReason cancelled",
    rule="On session/cancel the Client MUST answer pending session/request_permission with "
    '{"outcome": "cancelled"}; the agent then must not run the tool and ends the turn with '
    "stopReason cancelled (prompt-turn.mdx §Cancellation).",
    level=Level.MANDATORY,
    area=AREA,
)
async def cancelled_outcome(ctx: Context) -> str:
    agent = await ctx.main()

    async def cancel_then_answer(params: dict[str, Any], frame: Frame) -> dict[str, Any]:
        await agent.notify("session/cancel", {"sessionId": params.get("sessionId")})
        await trio.sleep(0.2)
        return {"outcome": "cancelled"}

    turn, marker, _sid = await ctx.permission_turn(cancel_then_answer, grace=1.0)
    reason = require_stop_reason(turn)
    if marker.exists():
        raise Failed(f"the command ran after a cancelled permission outcome (stopReason {reason})")
    if reason != "cancelled":
        raise Failed(f"stopReason {reason!r} after session/cancel and a cancelled outcome")
    return "no tool; cancelled"


@check(
    "ACP-PERM-005",
    "a permission request can be shown: the tool call has a title and a kind",
    rule="session/request_permission's toolCall is a ToolCallUpdate ('Details about the tool call "
    "requiring permission'; schema RequestPermissionRequest), so only toolCallId is required: "
    "title and kind may come from a tool_call sent before it for that toolCallId "
    "(tool-calls.mdx §Requesting Permission). Clients ask the user from what they know of the "
    "call: with neither, they show a nameless 'Allow tool [other]?' and cannot auto-approve "
    "reads. Checked: the request's own fields over the earlier tool_call / tool_call_update "
    "updates for its toolCallId give a non-empty title and a kind.",
    level=Level.ADVISORY,
    area=AREA,
)
async def renderable(ctx: Context) -> str:
    turn, _marker, _sid = await allowed_turn(ctx)
    requests = turn.permission_requests()
    own = 0
    for frame in requests:
        params = frame.params if isinstance(frame.params, dict) else {}
        call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
        call_id = call.get("toolCallId")
        known: dict[str, Any] = {}
        for update in turn.tool_calls():
            u = update.params["update"]
            if update.seq < frame.seq and u.get("toolCallId") == call_id:
                known.update({k: u[k] for k in ("title", "kind") if u.get(k) is not None})
        if isinstance(call.get("title"), str) and call["title"] and call.get("kind") is not None:
            own += 1
        known.update({k: call[k] for k in ("title", "kind") if call.get(k) is not None})
        missing = [k for k in ("title", "kind") if not (isinstance(known.get(k), str) and known[k])]
        if missing:
            raise Failed(
                f"toolCall {call_id!r}: no {' and no '.join(missing)} in the request nor in a "
                f"tool_call sent before it: {frame.short()}"
            )
    return f"{len(requests)} request(s), {own} with title and kind in the request itself"
