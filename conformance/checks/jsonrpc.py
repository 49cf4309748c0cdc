"""JSON-RPC 2.0 behaviour: ids, errors, robustness."""

from __future__ import annotations

import uuid

from ..context import Context
from ..harness import AgentProcess, RequestTimeout
from ..model import Failed, Level, check
from ..scenarios import echo_prompt
from ._util import exact_id, require_stop_reason, responses_with_loose_id

AREA = "json-rpc"

UNKNOWN_METHOD = "acp_conformance/no_such_method"


async def _probe_id(agent: AgentProcess, sent_id: object) -> str:
    """Send an unknown method with ``sent_id``; the response must carry it exactly."""
    mark = agent.mark()
    try:
        reply = await agent.request(UNKNOWN_METHOD, {}, id=sent_id, timeout=10)
    except RequestTimeout:
        loose = responses_with_loose_id(agent, sent_id, mark)
        if loose:
            raise Failed(f"id {sent_id!r} came back as {loose[0].msg.get('id')!r}") from None
        raise Failed(f"no response to a request with id {sent_id!r}") from None
    if not exact_id(reply.frame, sent_id):
        raise Failed(f"id {sent_id!r} came back as {reply.msg.get('id')!r}")
    return repr(sent_id)


@check(
    "ACP-JSONRPC-001",
    "integer request ids are echoed exactly",
    rule='JSON-RPC 2.0: the response "MUST be the same as the value of the id member in the '
    'Request Object"; ids may be integers (jsonrpc.org/specification §5; acp-tck '
    "ACP-JSONRPC-001). Checked on initialize (id 1) and two more requests, in a process of its "
    "own.",
    level=Level.MANDATORY,
    area=AREA,
)
async def int_ids(ctx: Context) -> str:
    async with ctx.spawn("int-ids") as agent:
        mark = agent.mark()
        try:
            reply = await ctx.initialize(agent)
        except RequestTimeout:
            loose = responses_with_loose_id(agent, 1, mark)
            if loose:
                raise Failed(f"initialize id 1 came back as {loose[0].msg.get('id')!r}") from None
            raise Failed("no response to initialize") from None
        if not exact_id(reply.frame, 1):
            raise Failed(f"initialize id 1 came back as {reply.msg.get('id')!r}")
        done = [await _probe_id(agent, 2**31 + 7), await _probe_id(agent, 0)]
    return "echoed 1 (initialize), " + ", ".join(done)


@check(
    "ACP-JSONRPC-002",
    "string request ids are echoed exactly",
    rule="JSON-RPC 2.0: ids are strings or numbers, echoed unchanged (acp-tck ACP-JSONRPC-001).",
    level=Level.MANDATORY,
    area=AREA,
)
async def string_ids(ctx: Context) -> str:
    agent = await ctx.main()
    done = [await _probe_id(agent, "acp-conformance:7"), await _probe_id(agent, "42")]
    # A successful request with a string id too, not only an error path.
    sent = f"acp-conformance-new-{uuid.uuid4().hex[:6]}"
    mark = agent.mark()
    try:
        reply = await agent.request(
            "session/new", ctx.new_session_params(), id=sent, timeout=ctx.config.session_timeout
        )
    except RequestTimeout:
        if responses_with_loose_id(agent, sent, mark):
            raise Failed(f"session/new id {sent!r} came back changed") from None
        raise Failed(f"no response to session/new with id {sent!r}") from None
    if not exact_id(reply.frame, sent):
        raise Failed(f"session/new id {sent!r} came back as {reply.msg.get('id')!r}")
    if (
        reply.ok
        and isinstance(reply.result, dict)
        and isinstance(reply.result.get("sessionId"), str)
    ):
        ctx.sessions[reply.result["sessionId"]] = reply.result
    return "echoed " + ", ".join(done) + " and a session/new id"


@check(
    "ACP-JSONRPC-003",
    "an unknown method is answered with -32601",
    rule='JSON-RPC 2.0: -32601 "Method not found"; ACP: unknown methods SHOULD get '
    '{"code": -32601} (extensibility.mdx), and every request MUST be answered.',
    level=Level.MANDATORY,
    area=AREA,
)
async def unknown_method(ctx: Context) -> str:
    agent = await ctx.main()
    try:
        reply = await agent.request(UNKNOWN_METHOD, {"x": 1}, timeout=10)
    except RequestTimeout:
        raise Failed(f"no response to {UNKNOWN_METHOD}") from None
    if reply.ok:
        raise Failed(f"{UNKNOWN_METHOD} got a result: {reply.describe()}")
    if reply.code != -32601:
        raise Failed(f"{UNKNOWN_METHOD}: {reply.describe()} (wanted -32601)")
    return "-32601"


@check(
    "ACP-JSONRPC-004",
    "invalid params are answered with -32602",
    rule='JSON-RPC 2.0: -32602 "Invalid params"; ACP clients (acpx, acpcomply) require it for '
    "schema-violating params such as a prompt that is not an array (JSON-RPC 2.0 §5.1).",
    level=Level.MANDATORY,
    area=AREA,
)
async def invalid_params(ctx: Context) -> str:
    agent = await ctx.main()
    sid = await ctx.shared_session()
    cases = [
        ("session/prompt", {"sessionId": sid, "prompt": {"type": "text", "text": "not an array"}}),
        ("session/new", {"mcpServers": []}),  # no cwd
    ]
    seen = []
    for method, params in cases:
        try:
            reply = await agent.request(method, params, timeout=30)
        except RequestTimeout:
            raise Failed(f"no response to {method} with invalid params") from None
        if reply.ok:
            raise Failed(f"{method} with invalid params {params!r} got a result")
        if reply.code != -32602:
            raise Failed(f"{method} with invalid params: {reply.describe()} (wanted -32602)")
        seen.append(method)
    return "-32602 for " + ", ".join(seen)


@check(
    "ACP-JSONRPC-005",
    "the agent keeps working after error responses",
    rule="An error answers one request; the connection stays usable (JSON-RPC 2.0; "
    "codex-acp#177: a parse failure broke the channel).",
    level=Level.MANDATORY,
    area=AREA,
)
async def usable_after_errors(ctx: Context) -> str:
    agent = await ctx.main()
    sid = await ctx.shared_session()
    await agent.request(UNKNOWN_METHOD, {}, timeout=10)
    await agent.request("session/prompt", {"sessionId": sid, "prompt": "not an array"}, timeout=30)
    await agent.request(
        "session/prompt", {"sessionId": str(uuid.uuid4()), "prompt": []}, timeout=30
    )
    turn = await ctx.turn(sid, echo_prompt("after errors"))
    return f"a prompt after three errors ended with {require_stop_reason(turn)}"


@check(
    "ACP-JSONRPC-006",
    "a line that is not JSON does not break the connection",
    rule="JSON-RPC 2.0 answers invalid JSON with a Parse error instead of failing; ACP agents "
    "must survive malformed frames (codex-acp#177, python-sdk#62).",
    level=Level.MANDATORY,
    area=AREA,
)
async def survives_garbage(ctx: Context) -> str:
    agent = await ctx.main()
    await agent.send_raw(b"this is not JSON\n")
    await agent.send_raw(b'{"jsonrpc": "2.0", "id": 990001, "method": "session/new", \n')
    await agent.send_raw(b"\n")
    try:
        reply = await agent.request(UNKNOWN_METHOD, {}, timeout=10)
    except RequestTimeout:
        raise Failed("no response to a request sent after a non-JSON line") from None
    del reply
    if not agent.alive:
        raise Failed("the agent exited")
    return "still answering"


@check(
    "ACP-JSONRPC-007",
    "a parse error, if answered, is -32700 with id null",
    rule='JSON-RPC 2.0: invalid JSON → {"code": -32700} and "id": null (the spec is silent '
    "on whether ACP agents must answer; a silent agent passes).",
    level=Level.ADVISORY,
    area=AREA,
)
async def parse_error_reply(ctx: Context) -> str:
    agent = await ctx.main()
    mark = agent.mark()
    anomalies = len(agent.anomalies)
    await agent.send_raw(b"{not json at all\n")
    await agent.request(UNKNOWN_METHOD, {}, timeout=10)  # a barrier: answered after the line
    if len(agent.anomalies) > anomalies:
        raise Failed(agent.anomalies[-1])
    replies = [f for f in agent.since(mark) if f.is_response and f.msg.get("id") is None]
    if not replies:
        return "no reply (allowed)"
    frame = replies[0]
    code = (
        (frame.msg.get("error") or {}).get("code")
        if isinstance(frame.msg.get("error"), dict)
        else None
    )
    if code != -32700:
        raise Failed(f"answered with {frame.short()}")
    return "-32700, id null"
