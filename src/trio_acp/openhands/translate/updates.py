"""Post-processing of a list of session updates: fold a replayed tool call's updates into
its `tool_call`, and merge runs of message / thought chunks into one chunk each.

Pure: no trio, no `openhands.*`.
"""

from __future__ import annotations

import logging
from typing import TypeGuard, cast

import attrs

from trio_acp import schema
from trio_acp.schema import SessionUpdate

log = logging.getLogger(__name__)

__all__ = ["Coalescer", "coalesce", "fold_tool_calls"]

_TOOL_FIELDS = ("title", "kind", "status", "content", "locations", "raw_input", "raw_output")


def fold_tool_calls(updates: list[SessionUpdate]) -> list[SessionUpdate]:
    """Fold every tool_call_update into the tool_call announcing it (replay: one tool_call
    per call, with its final state, at the position it was announced). Updates for calls
    never announced are dropped."""
    out: list[SessionUpdate] = []
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


#: A message or thought chunk: what `coalesce` merges (its content plain text).
_TextChunk = schema.AgentMessageChunk | schema.AgentThoughtChunk


def coalesce(updates: list[SessionUpdate]) -> list[SessionUpdate]:
    """Merge runs of AgentMessageChunk (and of AgentThoughtChunk) with the same message_id
    and plain text content into one chunk each, preserving order; the rest is untouched."""
    merger = Coalescer()
    return merger.feed(updates) + merger.finish()


class Coalescer:
    """`coalesce` over a sequence of updates that arrives in parts: `feed` returns what is
    final so far (all but a run that the next part may continue), `finish` the rest."""

    def __init__(self) -> None:
        self._run: list[_TextChunk] = []

    def feed(self, updates: list[SessionUpdate]) -> list[SessionUpdate]:
        out: list[SessionUpdate] = []
        run = self._run
        for update in updates:
            if _mergeable(update):
                if run and not _same_message(run[-1], update):
                    out.append(_merged(run))
                    run.clear()
                run.append(update)
                continue
            if run:
                out.append(_merged(run))
                run.clear()
            out.append(update)
        return out

    def finish(self) -> list[SessionUpdate]:
        if not self._run:
            return []
        out = [_merged(self._run)]
        self._run.clear()
        return out


def _merged(run: list[_TextChunk]) -> SessionUpdate:
    if len(run) == 1:
        return run[0]
    first = run[0]
    # `_mergeable` let in plain text content only.
    text = "".join(cast(schema.TextContent, u.content).text for u in run)
    return attrs.evolve(
        first, content=attrs.evolve(cast(schema.TextContent, first.content), text=text)
    )


def _mergeable(update: SessionUpdate) -> TypeGuard[_TextChunk]:
    if type(update) not in (schema.AgentMessageChunk, schema.AgentThoughtChunk):
        return False
    content = cast(_TextChunk, update).content
    return (
        type(content) is schema.TextContent
        and getattr(update, "meta", None) is None
        and getattr(content, "annotations", None) is None
        and getattr(content, "meta", None) is None
    )


def _same_message(a: _TextChunk, b: _TextChunk) -> bool:
    return type(a) is type(b) and a.message_id == b.message_id
