"""Post-processing of a list of session updates: fold a replayed tool call's updates into
its `tool_call`, and merge runs of message / thought chunks into one chunk each.

Pure: no trio, no `openhands.*`.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs

from ... import schema

log = logging.getLogger(__name__)

__all__ = ["coalesce", "fold_tool_calls"]

_TOOL_FIELDS = ("title", "kind", "status", "content", "locations", "raw_input", "raw_output")


def fold_tool_calls(updates: list[Any]) -> list[Any]:
    """Fold every tool_call_update into the tool_call announcing it (replay: one tool_call
    per call, with its final state, at the position it was announced). Updates for calls
    never announced are dropped."""
    out: list[Any] = []
    where: dict[str, int] = {}
    for update in updates:
        if isinstance(update, schema.ToolCallStart):
            where[update.tool_call_id] = len(out)
            out.append(update)
        elif isinstance(update, schema.ToolCallProgress):
            at = where.get(update.tool_call_id)
            if at is None:
                log.debug("dropping an update for unannounced tool call %s", update.tool_call_id)
                continue
            changes = {
                f: getattr(update, f) for f in _TOOL_FIELDS if getattr(update, f, None) is not None
            }
            out[at] = attrs.evolve(out[at], **changes)
        else:
            out.append(update)
    return out


def coalesce(updates: list[Any]) -> list[Any]:
    """Merge runs of AgentMessageChunk (and of AgentThoughtChunk) with the same message_id
    and plain text content into one chunk each, preserving order; the rest is untouched."""
    out: list[Any] = []
    run: list[Any] = []

    def flush() -> None:
        if not run:
            return
        if len(run) == 1:
            out.append(run[0])
        else:
            first = run[0]
            text = "".join(u.content.text for u in run)
            out.append(attrs.evolve(first, content=attrs.evolve(first.content, text=text)))
        run.clear()

    for update in updates:
        if _mergeable(update) and run and _same_message(run[-1], update):
            run.append(update)
            continue
        flush()
        if _mergeable(update):
            run.append(update)
        else:
            out.append(update)
    flush()
    return out


def _mergeable(update: Any) -> bool:
    return (
        type(update) in (schema.AgentMessageChunk, schema.AgentThoughtChunk)
        and type(update.content) is schema.TextContent
        and getattr(update, "meta", None) is None
        and getattr(update.content, "annotations", None) is None
        and getattr(update.content, "meta", None) is None
    )


def _same_message(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a.message_id == b.message_id
