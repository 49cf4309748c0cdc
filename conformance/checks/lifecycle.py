"""Session lifecycle: load, resume, close, list, delete (when advertised)."""

from __future__ import annotations

import uuid
from typing import Any

import attrs

from ..context import Context, Turn
from ..harness import AgentExited, AgentProcess, Frame, RequestTimeout
from ..model import Failed, Level, NotTested, check
from ..scenarios import echo_prompt, slow_prompt
from ._util import late_turn_updates, require_result, require_stop_reason, turn_update_since

AREA = "lifecycle"


@attrs.define
class Reopened:
    session_id: str
    word: str
    reply_frame: Frame
    request_frame: Frame
    before: list[Frame]  # updates for the session between request and response
    after: list[Frame]  # updates for the session after the response (1 s)
    result: Any
    ok: bool
    describe: str


async def _history(ctx: Context) -> tuple[str, str]:
    """A session on the main agent with one finished turn; (session id, distinctive word)."""
    sid, _ = await ctx.new_session()
    word = f"zebra{uuid.uuid4().hex[:6]}"
    turn = await ctx.turn(sid, echo_prompt(f"remember {word}"))
    require_stop_reason(turn)
    return sid, word


async def _reopen(ctx: Context, method: str) -> Reopened:
    """session/load or session/resume of a session with history, in a fresh agent process."""
    key = f"reopen-{method}"
    if key in ctx.memo:
        return ctx.memo[key]
    sid, word = await _history(ctx)
    if ctx.capability("sessionCapabilities", "close") is not None:
        # Let go of it in the first process, as an editor restarting would.
        main = await ctx.main()
        await main.request("session/close", {"sessionId": sid}, timeout=30)
    agent: AgentProcess = ctx.memo.get("reopen-agent")  # type: ignore[assignment]
    if agent is None or not agent.alive:
        agent = await ctx.spawn_long("reopen")
        reply = await ctx.initialize(agent)
        require_result(reply, "initialize (second process)")
        ctx.memo["reopen-agent"] = agent
    mark = agent.mark()
    params = {"sessionId": sid, "cwd": str(ctx.workdir), "mcpServers": []}
    try:
        reply = await agent.request(method, params, timeout=ctx.config.session_timeout)
    except (RequestTimeout, AgentExited) as exc:
        raise Failed(f"{method}: {exc}") from None
    await agent.quiet(1.0)
    frames = [f for f in agent.since(mark) if f.method == "session/update" and f.session_id == sid]
    value = Reopened(
        sid,
        word,
        reply.frame,
        reply.request,
        [f for f in frames if f.seq < reply.frame.seq],
        [f for f in frames if f.seq > reply.frame.seq],
        reply.result,
        reply.ok,
        reply.describe(),
    )
    ctx.memo[key] = value
    ctx.memo[f"{key}-agent"] = agent
    return value


def _texts(frames: list[Frame], kind: str) -> str:
    out = []
    for f in frames:
        if f.update_kind == kind:
            content = f.params["update"].get("content")
            if isinstance(content, dict) and isinstance(content.get("text"), str):
                out.append(content["text"])
    return "".join(out)


@check(
    "ACP-LOAD-001",
    "session/load replays the conversation before its response",
    rule="session/load MUST replay the entire conversation as session/update notifications and "
    "respond only after all of them; the result is an object, not null (session-setup.mdx). "
    "Loaded in a second agent process.",
    level=Level.CAPABILITY,
    capability="loadSession",
    area=AREA,
)
async def load_replays(ctx: Context) -> str:
    await ctx.require("loadSession")
    r = await _reopen(ctx, "session/load")
    if not r.ok:
        raise Failed(f"session/load: {r.describe}")
    if not isinstance(r.result, dict):
        raise Failed(f"result {r.result!r} is not an object")
    if not r.before:
        raise Failed("nothing was replayed before the response")
    late = late_turn_updates(r.after)
    if late:
        raise Failed(f"{len(late)} replayed update(s) after the response: {late[0].short()}")
    return f"{len(r.before)} update(s) replayed, then the response"


@check(
    "ACP-LOAD-002",
    "the replay includes the user's messages",
    rule="The replay covers the whole conversation: user_message_chunk for the user's turns, "
    "agent_message_chunk for the agent's (session-setup.mdx; codex-acp#206, kimi-cli#1956).",
    level=Level.CAPABILITY,
    capability="loadSession",
    area=AREA,
)
async def load_user_messages(ctx: Context) -> str:
    await ctx.require("loadSession")
    r = await _reopen(ctx, "session/load")
    if not r.ok:
        raise Failed(f"session/load: {r.describe}")
    if r.word not in _texts(r.before, "user_message_chunk"):
        raise Failed("the user's prompt was not replayed as user_message_chunk")
    if r.word not in _texts(r.before, "agent_message_chunk"):
        raise Failed("the agent's reply was not replayed as agent_message_chunk")
    return "user and agent messages replayed"


@check(
    "ACP-LOAD-003",
    "session/load of an unknown session is an error",
    rule="Operations on unknown session ids MUST yield an explicit error (acpx profile; "
    "session-setup.mdx).",
    level=Level.CAPABILITY,
    capability="loadSession",
    area=AREA,
)
async def load_unknown(ctx: Context) -> str:
    await ctx.require("loadSession")
    agent = await ctx.main()
    reply = await agent.request(
        "session/load",
        {"sessionId": str(uuid.uuid4()), "cwd": str(ctx.workdir), "mcpServers": []},
        timeout=ctx.config.session_timeout,
    )
    if reply.ok:
        raise Failed(f"loading an unknown session: {reply.describe()}")
    return f"error {reply.code}"


@check(
    "ACP-RESUME-001",
    "session/resume restores a session without replaying it",
    rule="session/resume MUST NOT replay history before responding; the session can be prompted "
    "afterwards (session-setup.mdx). Resumed in a second agent process.",
    level=Level.CAPABILITY,
    capability="sessionCapabilities.resume",
    area=AREA,
)
async def resume_no_replay(ctx: Context) -> str:
    await ctx.require("sessionCapabilities", "resume", truthy=False)
    r = await _reopen(ctx, "session/resume")
    if not r.ok:
        raise Failed(f"session/resume: {r.describe}")
    if not isinstance(r.result, dict):
        raise Failed(f"result {r.result!r} is not an object")
    replayed = late_turn_updates(r.before)
    if replayed:
        raise Failed(f"{len(replayed)} update(s) before the response: {replayed[0].short()}")
    agent = ctx.memo["reopen-session/resume-agent"]
    turn = await ctx.turn(r.session_id, echo_prompt("after resume"), agent=agent)
    return f"no replay; a prompt after resume: {require_stop_reason(turn)}"


@check(
    "ACP-CLOSE-001",
    "a closed session is gone",
    rule="session/close frees the session: {} result, and later operations on it fail "
    "(session-setup.mdx; agents MAY error on unknown sessions).",
    level=Level.CAPABILITY,
    capability="sessionCapabilities.close",
    area=AREA,
)
async def close_frees(ctx: Context) -> str:
    await ctx.require("sessionCapabilities", "close", truthy=False)
    agent = await ctx.main()
    sid, _ = await ctx.new_session()
    reply = await agent.request("session/close", {"sessionId": sid})
    result = require_result(reply, "session/close")
    if not isinstance(result, dict):
        raise Failed(f"result {result!r} is not an object")
    after = await agent.request(
        "session/prompt",
        {"sessionId": sid, "prompt": ctx.text_blocks(echo_prompt("closed?"))},
        timeout=30,
    )
    if after.ok:
        raise Failed(f"a prompt on the closed session got {after.describe()}")
    return f"closed; a later prompt got error {after.code}"


@check(
    "ACP-CLOSE-002",
    "closing a session cancels its running turn",
    rule="session/close cancels ongoing work as if session/cancel had been sent: the pending "
    'prompt resolves with stopReason "cancelled" (session-setup.mdx).',
    level=Level.CAPABILITY,
    capability="sessionCapabilities.close",
    area=AREA,
)
async def close_cancels(ctx: Context) -> str:
    await ctx.require("sessionCapabilities", "close", truthy=False)
    agent = await ctx.main()
    sid, _ = await ctx.new_session()
    mark, handle = await ctx.start_turn(agent, sid, slow_prompt())
    await agent.wait_for(lambda: handle.done or turn_update_since(agent, sid, mark), timeout=3.0)
    if handle.done:
        raise NotTested("the turn ended before the close could be sent")
    close = await agent.start_request("session/close", {"sessionId": sid})
    turn: Turn = await ctx.finish_turn(agent, sid, mark, handle, timeout=20, grace=0.5)
    reason = require_stop_reason(turn)
    close_reply = await close.wait(20)
    require_result(close_reply, "session/close")
    if reason != "cancelled":
        raise Failed(f"the running turn ended with {reason!r}")
    return "cancelled, then closed"


def _ids(result: Any) -> list[Any]:
    sessions = result.get("sessions") if isinstance(result, dict) else None
    if not isinstance(sessions, list):
        raise Failed(f"no sessions list: {result!r}"[:200])
    return [s.get("sessionId") for s in sessions if isinstance(s, dict)]


@check(
    "ACP-LIST-001",
    "session/list includes the agent's sessions",
    rule="session/list returns sessions [{sessionId, cwd, ...}]; a cwd filter keeps the sessions "
    "of that directory (session-list.mdx).",
    level=Level.CAPABILITY,
    capability="sessionCapabilities.list",
    area=AREA,
)
async def list_sessions(ctx: Context) -> str:
    await ctx.require("sessionCapabilities", "list", truthy=False)
    agent = await ctx.main()
    sid, _word = await _history(ctx)
    everything = _ids(require_result(await agent.request("session/list", {}), "session/list"))
    if sid not in everything:
        raise Failed(f"a session with history ({sid}) is not listed ({len(everything)} listed)")
    filtered = _ids(
        require_result(
            await agent.request("session/list", {"cwd": str(ctx.workdir)}), "session/list with cwd"
        )
    )
    if sid not in filtered:
        raise Failed("the session is missing when filtering by its own cwd")
    return f"{len(everything)} listed"


@check(
    "ACP-DELETE-001",
    "a deleted session is gone",
    rule="session/delete removes the session ({} result); deleting an unknown id SHOULD succeed "
    "silently (session-delete.mdx).",
    level=Level.CAPABILITY,
    capability="sessionCapabilities.delete",
    area=AREA,
)
async def delete_session(ctx: Context) -> str:
    await ctx.require("sessionCapabilities", "delete", truthy=False)
    agent = await ctx.main()
    sid, _word = await _history(ctx)
    require_result(await agent.request("session/delete", {"sessionId": sid}), "session/delete")
    if ctx.capability("sessionCapabilities", "list") is not None:
        listed = _ids(require_result(await agent.request("session/list", {}), "session/list"))
        if sid in listed:
            raise Failed("the deleted session is still listed")
    after = await agent.request(
        "session/prompt",
        {"sessionId": sid, "prompt": ctx.text_blocks(echo_prompt("deleted?"))},
        timeout=30,
    )
    if after.ok:
        raise Failed(f"a prompt on the deleted session got {after.describe()}")
    again = await agent.request("session/delete", {"sessionId": sid})
    note = "" if again.ok else f" (deleting it again: {again.describe()}, SHOULD succeed)"
    return "deleted" + note
