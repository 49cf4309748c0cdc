"""`PromptResponse.usage` (unstable): the tokens one prompt turn cost.

The SDK keeps running totals per conversation (`ConversationStats`, read as
`Conversation.usage()`); a turn's usage is the difference between the totals when its
turn starts (after the prompts queued before it have run) and when it ends. A turn that
made no model call (a slash command, a cancel before the call) reports zeros; a backend
that reports no totals leaves `usage` out.

The schema gives `usage` no client capability of its own, and a tool holding answers to
the stable schema (the conformance suite's ACP-SCHEMA-002, acp-tck's) rightly calls an
unknown root field custom: it goes only to a client that has opted into the unstable
schema it comes from, by advertising one of its client capabilities (`plan`,
`subagents`); other clients see the response as before (`for_client`).
"""

from __future__ import annotations

import attrs

from trio_acp import schema
from trio_acp.openhands.backends.conversation import Conversation
from trio_acp.schema import unstable


@attrs.frozen
class Totals:
    """A conversation's accumulated input and output tokens."""

    input_tokens: int
    output_tokens: int


def totals(conv: Conversation | None) -> Totals | None:
    """The conversation's totals now, or None when it reports none."""
    usage = conv.usage() if conv is not None else None
    if usage is None or usage.prompt_tokens is None or usage.completion_tokens is None:
        return None
    return Totals(usage.prompt_tokens, usage.completion_tokens)


def with_usage(
    response: schema.PromptResponse, start: Totals | None, conv: Conversation | None
) -> schema.PromptResponse:
    """`response` with the turn's usage (the totals since `start`), if both are known."""
    end = totals(conv)
    if start is None or end is None:
        return response
    # A fresh conversation object (a model switch, a reopen) restarts its totals.
    input_tokens = max(end.input_tokens - start.input_tokens, 0)
    output_tokens = max(end.output_tokens - start.output_tokens, 0)
    return unstable.PromptResponse(
        stop_reason=response.stop_reason,
        meta=response.meta,
        usage=unstable.Usage(
            total_tokens=input_tokens + output_tokens,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
        ),
    )


def for_client(response: schema.PromptResponse, caps: object) -> schema.PromptResponse:
    """`response` without `usage` for a client that advertised no unstable capability."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return response
    if getattr(caps, "plan", None) is not None or getattr(caps, "subagents", None) is not None:
        return response
    return schema.PromptResponse(stop_reason=response.stop_reason, meta=response.meta)
