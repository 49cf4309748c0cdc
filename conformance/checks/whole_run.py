"""Checks that judge the whole run: framing, encoding, schema, ordering, errors, and
finally exit on stdin EOF.  Each first makes sure the run has some traffic to judge."""

from __future__ import annotations

import uuid
from typing import Any

from ..context import Context
from ..harness import AgentProcess, Frame, _id_key
from ..model import Failed, Level, NotTested, check
from ..scenarios import echo_prompt
from ..schema_source import type_names
from ._util import late_turn_updates, require_stop_reason

AREA = "whole run"


@check(
    "ACP-JSONRPC-008",
    "notifications are never answered",
    rule="Notifications never get responses, neither success nor error (JSON-RPC 2.0; PROTOCOL "
    "§2). Sent: session/cancel for an unknown and an idle session, $/cancel_request for an "
    "unknown id, an unknown notification and an unknown _ notification; then the whole run "
    "is checked for responses to ids the suite never used.",
    level=Level.MANDATORY,
    area="json-rpc",
)
async def notifications_unanswered(ctx: Context) -> str:
    agent = await ctx.main()
    sid = await ctx.shared_session()
    nulls = len(agent.null_id_errors)
    await agent.notify("session/cancel", {"sessionId": str(uuid.uuid4())})
    await agent.notify("session/cancel", {"sessionId": sid})
    await agent.notify("$/cancel_request", {"requestId": 987654})
    await agent.notify("acp_conformance/notice", {"n": 1})
    await agent.notify("_acp_conformance/notice", {"n": 2})
    await agent.quiet(1.5)
    if len(agent.null_id_errors) > nulls:
        raise Failed(f"a notification was answered: {agent.null_id_errors[nulls].short()}")
    stray = [a for p in ctx.agents for a in p.anomalies]
    if stray:
        raise Failed(stray[0])
    turn = await ctx.turn(sid, echo_prompt("after notifications"))
    return f"none answered; the session still works ({require_stop_reason(turn)})"


@check(
    "ACP-PROMPT-009",
    "no turn update follows the turn's response",
    rule="All updates of a turn come before its session/prompt response (prompt-turn.mdx: the "
    "response ends the turn; clients truncate or flag late updates: claude-agent-acp#824, "
    "opencode#17505). Judged over "
    "every turn of the run; session-level updates (commands, mode, config, info, usage) excepted.",
    level=Level.ADVISORY,
    area="prompt",
)
async def no_late_updates(ctx: Context) -> str:
    await ctx.basic_traffic()
    late = [(t, f) for t in ctx.turns for f in late_turn_updates(t.late)]
    if late:
        turn, frame = late[0]
        raise Failed(f"{len(late)} late update(s); first: {frame.short()}")
    return f"{len(ctx.turns)} turn(s), nothing late"


@check(
    "ACP-SESSION-003",
    "no session/update for a session before session/new returned it",
    rule="Session-level updates (e.g. available_commands_update) go after the session/new "
    "response: before it the client cannot know the session (session-setup.mdx).",
    level=Level.ADVISORY,
    area="sessions",
)
async def no_update_before_new(ctx: Context) -> str:
    await ctx.basic_traffic()
    count = 0
    for agent in ctx.agents:
        first_update: dict[Any, Frame] = {}
        for f in agent.frames:
            if (
                f.direction == "in"
                and f.method == "session/update"
                and f.session_id not in first_update
            ):
                first_update[f.session_id] = f
        for f in agent.frames:
            if (
                f.direction != "in"
                or not f.is_response
                or not isinstance(f.msg.get("result"), dict)
            ):
                continue
            sid = f.msg["result"].get("sessionId")
            if sid is None or not isinstance(sid, str):
                continue
            count += 1
            early = first_update.get(sid)
            if early is not None and early.seq < f.seq:
                raise Failed(f"session {sid}: {early.short()} came before session/new's response")
    return f"{count} session(s) checked"


@check(
    "ACP-TRANSPORT-001",
    "every line on stdout is one JSON-RPC 2.0 message",
    rule="Messages are newline-delimited and MUST NOT contain embedded newlines; the agent MUST NOT "
    "write anything to stdout that is not a valid ACP message (transports.mdx). Every line of "
    "every agent process of the run.",
    level=Level.MANDATORY,
    area="transport",
)
async def stdout_lines(ctx: Context) -> str:
    await ctx.basic_traffic()
    frames = ctx.all_inbound()
    bad = [(a, f) for a, f in frames if f.problem]
    if bad:
        agent, frame = bad[0]
        raise Failed(
            f"{len(bad)} bad line(s); first ({agent.name}, {frame.problem}): {frame.short(100)!r}"
        )
    return f"{len(frames)} line(s)"


NON_ASCII = "héllo wörld — ✓ 日本語 🚀"


@check(
    "ACP-TRANSPORT-002",
    "stdout is UTF-8 and non-ASCII text survives",
    rule="JSON-RPC messages are UTF-8 (transports.mdx). A prompt with non-ASCII text is echoed "
    "back by the scripted model; the echo must arrive intact, and every line of the run must "
    "be valid UTF-8.",
    level=Level.MANDATORY,
    area="transport",
)
async def utf8(ctx: Context) -> str:
    sid = await ctx.shared_session()
    turn = await ctx.turn(sid, echo_prompt(NON_ASCII))
    require_stop_reason(turn)
    bad = [(a, f) for a, f in ctx.all_inbound() if f.problem and f.problem.startswith("not UTF-8")]
    if bad:
        agent, frame = bad[0]
        raise Failed(f"{len(bad)} line(s) not UTF-8; first ({agent.name}): {frame.problem}")
    text = turn.text()
    if "Echo:" in text and NON_ASCII not in text:
        raise Failed(f"the echo came back altered: {text[:120]!r}")
    if NON_ASCII not in text:
        return "all lines UTF-8 (the reply was not relayed, so the round trip is unchecked)"
    return "all lines UTF-8; non-ASCII text round-tripped"


def _outbound_methods(agent: AgentProcess) -> dict[Any, str]:
    out = {}
    for f in agent.frames:
        if f.direction == "out" and f.is_request:
            key = _id_key(f.msg.get("id"))
            if key is not None:
                out[key] = f.method
    return out


def _message_type(agent_methods: dict[Any, str], frame: Frame) -> tuple[str | None, Any, str]:
    """(schema type, value, label) for one inbound message."""
    msg = frame.msg
    if frame.is_request or frame.is_notification:
        method = frame.method or ""
        if method == "$/cancel_request":
            return "CancelRequestNotification", frame.params, method
        params_t, _ = type_names(method, side="client")
        return params_t, frame.params, method
    if "error" in msg:
        return "Error", msg["error"], "error response"
    method = agent_methods.get(_id_key(msg.get("id")))
    if method is None:
        return None, None, "response"
    _, result_t = type_names(method, side="agent")
    return result_t, msg.get("result"), f"{method} result"


def _spec_messages(ctx: Context):
    """(frame, schema type name or None, value, label) for every well-formed, non-extension
    message the agents sent in the whole run."""
    for agent in ctx.agents:
        methods = _outbound_methods(agent)
        for f in agent.frames:
            if f.direction != "in" or f.problem or not isinstance(f.msg, dict):
                continue
            if (f.method or "").startswith("_"):
                continue
            yield (f, *_message_type(methods, f))


def _schema(ctx: Context):
    if ctx.validator is None:
        raise NotTested(f"the official schema is not available: {ctx.schema_problem}")
    return ctx.validator


@check(
    "ACP-SCHEMA-001",
    "every message the agent sends validates against the official v1 schema",
    rule="Requests, notifications and results follow the ACP v1 JSON Schema (schema/v1/schema.json "
    "of the npm package @agentclientprotocol/sdk). Every message of the whole run; extension (_) "
    "methods are not checked.",
    level=Level.MANDATORY,
    area="schema",
)
async def schema_valid(ctx: Context) -> str:
    validator = _schema(ctx)
    await ctx.basic_traffic()
    checked, errors, unknown = 0, [], []
    for f, type_name, value, label in _spec_messages(ctx):
        if type_name is None:
            if f.is_request or f.is_notification:
                unknown.append(f.method)
            continue
        checked += 1
        for e in validator.errors(type_name, value):
            errors.append(f"{label}: {e}")
    if unknown:
        errors.insert(0, f"method(s) not in ACP v1: {sorted(set(map(str, unknown)))}")
    if errors:
        raise Failed(f"{len(errors)} error(s); " + " | ".join(errors[:3]))
    return f"{checked} message(s) valid ({validator.path.name} of {ctx.schema_version})"


@check(
    "ACP-SCHEMA-002",
    "no custom fields at the root of spec types",
    rule='"Implementations MUST NOT add any custom fields at the root of a type" — custom data goes '
    "in _meta (extensibility.mdx; acp-tck ACP-SCHEMA-002). Checked: results, request params and "
    "session/update payloads.",
    level=Level.ADVISORY,
    area="schema",
)
async def no_custom_fields(ctx: Context) -> str:
    validator = _schema(ctx)
    await ctx.basic_traffic()
    problems = []
    for f, type_name, value, label in _spec_messages(ctx):
        if type_name is None or not isinstance(value, dict):
            continue
        extra = set(value) - validator.known_properties(type_name)
        if extra:
            problems.append(f"{label}: {sorted(extra)}")
        if f.method == "session/update" and isinstance(value.get("update"), dict):
            extra = set(value["update"]) - validator.known_properties("SessionUpdate")
            if extra:
                problems.append(f"{value['update'].get('sessionUpdate')} update: {sorted(extra)}")
    if problems:
        raise Failed(f"{len(problems)} message(s); " + " | ".join(sorted(set(problems))[:3]))
    return "none"


@check(
    "ACP-ERROR-001",
    "error messages are non-empty single lines",
    rule="An error is {code: integer, message: string}; message is a short non-empty description "
    "without newlines (JSON-RPC 2.0; acp-tck ACP-ERROR-001).",
    level=Level.ADVISORY,
    area="json-rpc",
)
async def error_messages(ctx: Context) -> str:
    agent = await ctx.main()
    await agent.request("acp_conformance/no_such_method", {}, timeout=10)
    errors = [f for _a, f in ctx.all_inbound() if f.is_response and "error" in f.msg]
    for f in errors:
        e = f.msg.get("error")
        message = e.get("message") if isinstance(e, dict) else None
        if not isinstance(message, str) or not message.strip():
            raise Failed(f"empty message: {f.short()}")
        if "\n" in message:
            raise Failed(f"a multi-line message: {message[:100]!r}")
    return f"{len(errors)} error(s)"


@check(
    "ACP-TRANSPORT-004",
    "the agent exits when its stdin closes",
    rule="The client ends the session by closing stdin (transports.mdx); the agent should exit "
    "promptly rather than wait to be killed (acp-tck: advisory). Waited 10 s.",
    level=Level.ADVISORY,
    area="transport",
    timeout=40,
)
async def exit_on_eof(ctx: Context) -> str:
    agent = await ctx.main()
    await agent.close_stdin()
    closed = agent.frames[-1].time if agent.frames else 0.0
    import time

    start = time.monotonic()
    await agent.wait_for(lambda: agent.exited.is_set(), timeout=10)
    if not agent.exited.is_set():
        raise Failed("still running 10 s after stdin EOF")
    del closed
    return f"exited ({agent.returncode}) after {agent.exit_time - start:.2f} s"
