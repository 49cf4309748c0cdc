"""_meta and extension methods."""

from __future__ import annotations

from ..context import Context
from ..harness import RequestTimeout
from ..model import Failed, Level, check
from ..scenarios import echo_prompt
from ._util import require_result, require_stop_reason

AREA = "extensibility"

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
EXT_METHOD = "_acp_conformance/ping"


@check(
    "ACP-META-001",
    "_meta is accepted on requests and content",
    rule="Every type has an optional _meta object; the root keys traceparent/tracestate/baggage "
    "are reserved for W3C trace context (extensibility.mdx; acp-tck ACP-META-001).",
    level=Level.MANDATORY,
    area=AREA,
)
async def meta_accepted(ctx: Context) -> str:
    agent = await ctx.main()
    meta = {"traceparent": TRACEPARENT, "acp-conformance/probe": {"n": 1}}
    reply = await agent.request(
        "session/new", ctx.new_session_params(_meta=meta), timeout=ctx.config.session_timeout
    )
    result = require_result(reply, "session/new with _meta")
    sid = result.get("sessionId") if isinstance(result, dict) else None
    if not isinstance(sid, str):
        raise Failed(f"session/new with _meta: {reply.describe()}")
    ctx.sessions[sid] = result
    blocks = [
        {"type": "text", "text": echo_prompt("meta"), "_meta": {"acp-conformance/block": True}}
    ]
    turn = await ctx.turn(sid, blocks, extra={"_meta": meta})
    return f"session/new and session/prompt with _meta: {require_stop_reason(turn)}"


@check(
    "ACP-EXT-001",
    "an extension request is answered",
    rule='"Upon receiving a custom request, implementations MUST respond" (extensibility.mdx); '
    f"sent: {EXT_METHOD}.",
    level=Level.MANDATORY,
    area=AREA,
)
async def ext_answered(ctx: Context) -> str:
    agent = await ctx.main()
    try:
        reply = await agent.request(EXT_METHOD, {"hello": "agent"}, timeout=10)
    except RequestTimeout:
        raise Failed(f"no response to {EXT_METHOD} within 10 s") from None
    return reply.describe()


@check(
    "ACP-EXT-002",
    "an unknown extension method gets -32601",
    rule='Unknown methods SHOULD be answered {"code": -32601, "message": "Method not found"} '
    "(extensibility.mdx).",
    level=Level.ADVISORY,
    area=AREA,
)
async def ext_unknown(ctx: Context) -> str:
    agent = await ctx.main()
    try:
        reply = await agent.request(EXT_METHOD, {"hello": "agent"}, timeout=10)
    except RequestTimeout:
        raise Failed(f"no response to {EXT_METHOD}") from None
    if reply.ok:
        raise Failed(f"{EXT_METHOD} (which no agent implements) got {reply.describe()}")
    if reply.code != -32601:
        raise Failed(f"{EXT_METHOD}: {reply.describe()} (wanted -32601)")
    return "-32601"
