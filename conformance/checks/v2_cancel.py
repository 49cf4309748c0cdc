"""ACP v2 (draft): cancelling one tool call or terminal, and the terminals themselves.

The official test kit's v2 registry (agentclientprotocol/acp-tck, ``src/tck/v2/
requirements.py``) has requirements for terminal updates (``ACP-PATCH-206``, ``-207``),
whose checks here carry its ids, and none yet for `tool_call/cancel` or
`terminal/cancel`: those checks are named after the methods (``v2/tool_call-cancel``,
``v2/cancel-unknown``) and cite the draft schema's own text (``CancelToolCallRequest``,
``CancelTerminalRequest``).  They run on the connection and the turns of checks/v2.py.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import trio

from ..context import Context
from ..harness import AgentProcess
from ..model import Failed, Level, Skipped, check
from .v2 import AREA, SESSION, V2Turn, _memo_shell, _session, _sessions, _shell_turn

_FINAL = ("completed", "failed", "cancelled")


def _cancellable(agent: AgentProcess, sid: str, mark: int) -> str | None:
    """The last tool call of `sid` since `mark` whose capabilities offer `cancel`."""
    offered: dict[str, bool] = {}
    for frame in agent.since(mark):
        if frame.update_kind != "tool_call_update" or frame.session_id != sid:
            continue
        update = frame.params["update"]
        call_id = update.get("toolCallId")
        if isinstance(call_id, str) and "capabilities" in update:
            caps = update["capabilities"]
            offered[call_id] = isinstance(caps, dict) and isinstance(caps.get("cancel"), dict)
    live = [call_id for call_id, yes in offered.items() if yes]
    return live[-1] if live else None


@check(
    "v2/tool_call-cancel",
    "a tool call that offers cancel is cancelled alone; the turn goes on",
    rule="tool_call/cancel of a tool call that advertises capabilities.cancel (here: one "
    "waiting for permission) is answered with a result, a tool_call_update to a final status "
    "confirms it, and the turn is not cancelled by it: its idle comes with its own stop "
    "reason (schema/v2 CancelToolCallRequest: 'Cancelling a tool call does not change the "
    "foreground state by itself'; no acp-tck requirement yet).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def tool_call_cancel(ctx: Context) -> str:
    asked: dict[str, Any] = {}
    hold = trio.Event()

    async def cancel_it(agent: AgentProcess, sid: str, mark: int) -> None:
        try:
            await agent.wait_for(
                lambda: any(f.method == "session/request_permission" for f in agent.since(mark)),
                ctx.config.prompt_timeout,
            )
            call_id = _cancellable(agent, sid, mark)
            if call_id is None:
                return
            asked["call"] = call_id
            asked["reply"] = await agent.request(
                "tool_call/cancel", {"sessionId": sid, "toolCallId": call_id}, timeout=60
            )
        finally:
            hold.set()  # the question, if the agent did not withdraw it: answered "reject"

    turn: V2Turn = await _shell_turn(ctx, hold=hold, answer=("reject_once",), meanwhile=cancel_it)
    if "call" not in asked:
        raise Skipped("no tool call offered capabilities.cancel while it waited for permission")
    reply = asked.get("reply")
    if reply is None or not reply.ok:
        raise Failed(f"tool_call/cancel: {reply.describe() if reply else 'no answer'}")
    statuses = [
        u.get("status")
        for u in turn.updates()
        if u.get("sessionUpdate") == "tool_call_update"
        and u.get("toolCallId") == asked["call"]
        and "status" in u
    ]
    if not statuses or statuses[-1] not in _FINAL:
        raise Failed(f"no final tool_call_update for the cancelled call (statuses {statuses})")
    if turn.idle is None:
        raise Failed("no idle after the cancel")
    if turn.idle.get("stopReason") == "cancelled":
        raise Failed("the whole turn was cancelled, not the one tool call")
    return f"tool call {statuses[-1]}; the turn ended {turn.idle.get('stopReason')}"


@check(
    "v2/cancel-unknown",
    "cancelling an unknown tool call or terminal is refused -32602",
    rule="The agent responds -32602 to tool_call/cancel of a tool call that is unknown, "
    "already final or not cancellable, and to terminal/cancel of such a terminal "
    "(schema/v2 CancelToolCallRequest, CancelTerminalRequest; no acp-tck requirement yet).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def cancel_unknown(ctx: Context) -> str:
    state, sid = await _session(ctx)
    codes = []
    for method, key in (("tool_call/cancel", "toolCallId"), ("terminal/cancel", "terminalId")):
        reply = await state.agent.request(
            method, {"sessionId": sid, key: "no-such-item"}, timeout=60
        )
        code = (reply.error or {}).get("code")
        if reply.ok or code != -32602:
            raise Failed(f"{method} of an unknown item: {reply.describe()}")
        codes.append(f"{method} {code}")
    return ", ".join(codes)


def _terminal_updates(frames: list[Any]) -> list[dict[str, Any]]:
    return [
        f.params["update"]
        for f in frames
        if f.update_kind in ("terminal_update", "terminal_output_chunk")
    ]


@check(
    "v2/ACP-PATCH-206",
    "a terminal's cwd is absolute and never changes",
    rule="A terminal_update's cwd, when present, is an absolute path, and one terminalId is "
    "never seen with two cwd values in a session (acp-tck v2 ACP-PATCH-206; tool-calls.mdx).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def patch_terminal_cwd(ctx: Context) -> str:
    await _memo_shell(ctx)
    state = await _sessions(ctx)
    seen: dict[tuple[Any, Any], str] = {}
    updates = [
        (f.session_id, f.params["update"])
        for f in state.agent.frames
        if f.direction == "in" and f.update_kind == "terminal_update"
    ]
    if not updates:
        raise Skipped("no terminal_update observed")
    for sid, update in updates:
        cwd = update.get("cwd")
        if cwd is None:
            continue
        if not isinstance(cwd, str) or not cwd.startswith("/"):
            raise Failed(f"cwd {cwd!r} of terminal {update.get('terminalId')!r}")
        key = (sid, update.get("terminalId"))
        if seen.setdefault(key, cwd) != cwd:
            raise Failed(f"terminal {key[1]!r}: cwd {seen[key]!r}, then {cwd!r}")
    return f"{len(updates)} terminal updates"


@check(
    "v2/ACP-PATCH-207",
    "terminal output is valid base64",
    rule="terminal_output_chunk.data and terminal_update.output.data each decode as "
    "standalone, valid base64 (acp-tck v2 ACP-PATCH-207; tool-calls.mdx).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def patch_terminal_base64(ctx: Context) -> str:
    await _memo_shell(ctx)
    state = await _sessions(ctx)
    datas = []
    for update in _terminal_updates([f for f in state.agent.frames if f.direction == "in"]):
        if update.get("sessionUpdate") == "terminal_output_chunk":
            datas.append(update.get("data"))
        elif isinstance(update.get("output"), dict):
            datas.append(update["output"].get("data"))
    if not datas:
        raise Skipped("no terminal output observed")
    for data in datas:
        try:
            if not isinstance(data, str):
                raise ValueError
            base64.b64decode(data, validate=True)
        except (ValueError, binascii.Error):
            raise Failed(f"not base64: {data!r:.80}") from None
    return f"{len(datas)} outputs"
