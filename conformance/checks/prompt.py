"""session/prompt: stop reasons, session ids, content the agent must accept."""

from __future__ import annotations

import base64
import uuid

from ..context import Context
from ..model import Failed, Level, NotTested, Skipped, check
from ..scenarios import echo_prompt, slow_prompt
from ._util import late_turn_updates, require_stop_reason

AREA = "prompt"

# 1x1 transparent PNG, and a 10 ms silent 8 kHz mono WAV.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
_WAV = (
    b"RIFF"
    + (36 + 160).to_bytes(4, "little")
    + b"WAVEfmt "
    + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little")
    + (1).to_bytes(2, "little")
    + (8000).to_bytes(4, "little")
    + (16000).to_bytes(4, "little")
    + (2).to_bytes(2, "little")
    + (16).to_bytes(2, "little")
    + b"data"
    + (160).to_bytes(4, "little")
    + bytes(160)
)
WAV_SILENCE = base64.b64encode(_WAV).decode()


@check(
    "ACP-PROMPT-001",
    "a prompt turn ends with a valid stopReason",
    rule="The Agent MUST respond to session/prompt with a StopReason: end_turn, max_tokens, "
    "max_turn_requests, refusal or cancelled (prompt-turn.mdx).",
    level=Level.MANDATORY,
    area=AREA,
)
async def valid_stop_reason(ctx: Context) -> str:
    sid = await ctx.shared_session()
    turn = await ctx.turn(sid, echo_prompt("stop reason"))
    return f"stopReason {require_stop_reason(turn)}"


@check(
    "ACP-PROMPT-002",
    "every session/update of a turn carries the prompted sessionId",
    rule="session/update notifications carry the sessionId of the session they belong to "
    "(schema SessionNotification; acp-tck ACP-PROMPT-002). Two sessions are open; one is prompted; "
    "session-level updates (commands, mode, config, info, usage) of the other are allowed.",
    level=Level.MANDATORY,
    area=AREA,
)
async def updates_carry_session(ctx: Context) -> str:
    prompted, _ = await ctx.new_session()
    idle, _ = await ctx.new_session()
    turn = await ctx.turn(prompted, echo_prompt("whose update"))
    require_stop_reason(turn)
    # Session-level updates (e.g. the idle session's available commands) may come any time.
    others = late_turn_updates(turn.others)
    if others:
        f = others[0]
        which = "the idle session" if f.session_id == idle else repr(f.session_id)
        raise Failed(f"{len(others)} turn update(s) carried {which}: {f.short()}")
    if not turn.updates:
        raise NotTested("the agent sent no session/update during the turn")
    return f"{len(turn.updates)} update(s), all for the prompted session"


@check(
    "ACP-PROMPT-003",
    "a text prompt is accepted",
    rule='"Agents MUST support text and resource_link content in session/prompt" '
    "(initialization.mdx, PromptRequest schema).",
    level=Level.MANDATORY,
    area=AREA,
)
async def text_accepted(ctx: Context) -> str:
    sid = await ctx.shared_session()
    turn = await ctx.turn(sid, echo_prompt("plain text ✓"))
    return f"stopReason {require_stop_reason(turn)}"


@check(
    "ACP-PROMPT-004",
    "a resource_link block is accepted",
    rule='"Agents MUST support text and resource_link content in session/prompt" '
    "(initialization.mdx, PromptRequest schema; content.mdx rates it lower, so acp-tck is advisory).",
    level=Level.MANDATORY,
    area=AREA,
)
async def resource_link_accepted(ctx: Context) -> str:
    sid = await ctx.shared_session()
    path = ctx.workdir / "notes.txt"
    path.write_text("conformance notes\n", encoding="utf-8")
    blocks = [
        {"type": "text", "text": echo_prompt("see the linked file")},
        {
            "type": "resource_link",
            "uri": path.as_uri(),
            "name": "notes.txt",
            "mimeType": "text/plain",
        },
    ]
    turn = await ctx.turn(sid, blocks)
    return f"stopReason {require_stop_reason(turn)}"


@check(
    "ACP-PROMPT-005",
    "the model's reply reaches the client as agent_message_chunk",
    rule="The agent reports the model's output with session/update agent_message_chunk "
    '(prompt-turn.mdx). The scripted model answers "Echo: <prompt>"; this check is also '
    "what tells whether the suite's scenarios reach this agent's model at all.",
    level=Level.ADVISORY,
    area=AREA,
)
async def reply_relayed(ctx: Context) -> str:
    sid = await ctx.shared_session()
    turn = await ctx.turn(sid, echo_prompt("relay me"))
    require_stop_reason(turn)
    text = turn.text()
    if "relay me" not in text:
        kinds = ", ".join(sorted(set(turn.kinds()))) or "none"
        raise Failed(
            f"no agent_message_chunk with the model's reply (updates: {kinds}; text {text[:80]!r})"
        )
    return "relayed"


async def _content(ctx: Context, capability: str, block: dict) -> str:
    await ctx.require("promptCapabilities", capability)
    sid = await ctx.shared_session()
    turn = await ctx.turn(
        sid, [{"type": "text", "text": echo_prompt(f"with {block['type']}")}, block]
    )
    return f"stopReason {require_stop_reason(turn)}"


@check(
    "ACP-PROMPT-006",
    "an image block is accepted when promptCapabilities.image",
    rule="Clients may send image content only if the agent advertises promptCapabilities.image; "
    "an agent that advertises it accepts it (initialization.mdx, content.mdx).",
    level=Level.CAPABILITY,
    capability="promptCapabilities.image",
    area=AREA,
)
async def image_accepted(ctx: Context) -> str:
    return await _content(ctx, "image", {"type": "image", "mimeType": "image/png", "data": PNG_1X1})


@check(
    "ACP-PROMPT-007",
    "an embedded resource block is accepted when promptCapabilities.embeddedContext",
    rule="Embedded resource content requires promptCapabilities.embeddedContext; an agent that "
    "advertises it accepts it (initialization.mdx, content.mdx).",
    level=Level.CAPABILITY,
    capability="promptCapabilities.embeddedContext",
    area=AREA,
)
async def resource_accepted(ctx: Context) -> str:
    uri = (ctx.workdir / "embedded.txt").as_uri()
    block = {
        "type": "resource",
        "resource": {"uri": uri, "text": "embedded text\n", "mimeType": "text/plain"},
    }
    return await _content(ctx, "embeddedContext", block)


@check(
    "ACP-PROMPT-008",
    "an audio block is accepted when promptCapabilities.audio",
    rule="Audio content requires promptCapabilities.audio; an agent that advertises it accepts it "
    "(initialization.mdx, content.mdx).",
    level=Level.CAPABILITY,
    capability="promptCapabilities.audio",
    area=AREA,
)
async def audio_accepted(ctx: Context) -> str:
    return await _content(
        ctx, "audio", {"type": "audio", "mimeType": "audio/wav", "data": WAV_SILENCE}
    )


def _queueing_advertised(ctx: Context) -> bool:
    # No stable capability exists for it yet; agents advertise it under `_meta`, and
    # clients read Claude Code's key (trio-acp advertises that one too).
    meta = ctx.capability("_meta")
    if not isinstance(meta, dict):
        return False
    return any(isinstance(v, dict) and v.get("promptQueueing") for v in meta.values())


@check(
    "ACP-PROMPT-010",
    "prompts sent during a turn are queued and answered in order",
    rule="An agent advertising prompt queueing (`agentCapabilities._meta.<vendor>.promptQueueing`, "
    "e.g. claudeCode) runs a session/prompt sent while a turn runs after that turn, each answered "
    "with its own response in the order sent, each turn's updates before its own response "
    "(prompt-turn.mdx: all of a turn's updates precede its response). Three prompts in one write.",
    level=Level.CAPABILITY,
    capability="_meta.*.promptQueueing",
    area=AREA,
)
async def queued_prompts(ctx: Context) -> str:
    agent = await ctx.main()
    if not _queueing_advertised(ctx):
        raise Skipped("the agent does not advertise promptQueueing under agentCapabilities._meta")
    sid, _ = await ctx.new_session()
    tags = [f"q{uuid.uuid4().hex[:8]}" for _ in range(2)]
    texts = [slow_prompt(chunks=10, delay_ms=30), echo_prompt(tags[0]), echo_prompt(tags[1])]
    mark = agent.mark()
    handles = await agent.send_together(
        [
            {
                "jsonrpc": "2.0",
                "id": agent.new_id(),
                "method": "session/prompt",
                "params": {"sessionId": sid, "prompt": ctx.text_blocks(text)},
            }
            for text in texts
        ]
    )
    replies = [await h.wait(60) for h in handles if h is not None]
    for i, reply in enumerate(replies):
        if not reply.ok:
            raise Failed(f"prompt {i + 1} of 3: {reply.describe()}")
        reason = reply.result.get("stopReason") if isinstance(reply.result, dict) else None
        if reason != "end_turn":
            raise Failed(f"prompt {i + 1} of 3: stopReason {reason!r}")
    order = [r.frame.seq for r in replies]
    if order != sorted(order):
        raise Failed("the responses came in another order than the prompts")
    frames = [f for f in agent.since(mark) if f.session_id == sid and f.method == "session/update"]

    def text_between(lo: int, hi: int) -> str:
        out = []
        for f in frames:
            if lo < f.seq < hi:
                content = f.params["update"].get("content")
                if isinstance(content, dict) and isinstance(content.get("text"), str):
                    out.append(content["text"])
        return "".join(out)

    if tags[0] in text_between(0, order[0]) or tags[1] in text_between(0, order[1]):
        raise Failed("a queued prompt's reply came before the previous turn's response")
    if tags[0] not in text_between(order[0], order[1]):
        raise Failed("the second prompt's reply is not between the first and second responses")
    if tags[1] not in text_between(order[1], order[2]):
        raise Failed("the third prompt's reply is not between the second and third responses")
    return "3 prompts, answered in order, each with its own updates"
