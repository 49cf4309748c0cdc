"""session/new and session ids."""

from __future__ import annotations

import uuid

from ..context import Context
from ..harness import RequestTimeout
from ..model import Failed, Level, NotTested, check
from ..scenarios import echo_prompt

AREA = "sessions"


@check(
    "ACP-SESSION-001",
    "session/new returns a new, unique sessionId",
    rule="session/new MUST return a unique sessionId (session-setup.mdx; acp-tck ACP-SESSION-002).",
    level=Level.MANDATORY,
    area=AREA,
)
async def unique_ids(ctx: Context) -> str:
    try:
        first, _ = await ctx.new_session()
        second, _ = await ctx.new_session()
    except NotTested as exc:
        raise Failed(str(exc)) from None
    if first == second:
        raise Failed(f"two session/new calls returned the same id {first!r}")
    return "two distinct ids"


@check(
    "ACP-SESSION-002",
    "a prompt for an unknown session is an error",
    rule="Operations on unknown session ids MUST yield an explicit error (acpx profile; the code "
    "is not specified in v1, -32002 resource_not_found is usual).",
    level=Level.MANDATORY,
    area=AREA,
)
async def unknown_session(ctx: Context) -> str:
    agent = await ctx.main()
    await ctx.shared_session()  # the agent is up and has sessions
    bogus = str(uuid.uuid4())
    try:
        reply = await agent.request(
            "session/prompt",
            {"sessionId": bogus, "prompt": ctx.text_blocks(echo_prompt("nobody home"))},
            timeout=30,
        )
    except RequestTimeout:
        raise Failed("no response to a prompt for an unknown session") from None
    if reply.ok:
        raise Failed(f"a prompt for unknown session {bogus} got {reply.describe()}")
    return f"error {reply.code}"
