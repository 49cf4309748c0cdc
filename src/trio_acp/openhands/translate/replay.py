"""session/load's replay in windows: exactly the updates of `coalesce(Translator.replay(...))`,
in the same order, handed out as they become final instead of all at the end.

Translating a whole long history before sending any of it kept every update in memory and
the client waiting for the first one until the last event was translated. Replay folds
every update about a tool call into the `tool_call` announcing it (`fold_tool_calls`), so a
`tool_call` can only go out once nothing later can change it. Every update about a tool call
comes from an event carrying that call's id (`tool_call_id`: the action, its observation, an
agent error, a rejection), and the history is a list already in memory, so one pass over it
tells where each id is seen for the last time: past that event, the `tool_call` is final.
After each window of events, everything before the first `tool_call` still open goes out;
runs of message / thought chunks are merged as `coalesce` merges them (`Coalescer` holds
the last run until the next update shows whether it goes on).

Memory: the updates of one window and of the tool calls still open (typically the last
one or two), not the whole history's. Pure: no trio, no `openhands.*`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

import attrs

from trio_acp import schema
from trio_acp.openhands.translate.shapes import SdkObject
from trio_acp.openhands.translate.translator import Translator
from trio_acp.openhands.translate.updates import _TOOL_FIELDS, Coalescer
from trio_acp.schema import SessionUpdate

log = logging.getLogger(__name__)

__all__ = ["REPLAY_WINDOW", "replay_windows"]

# Events per window: small enough that the first updates go out at once and a window's
# translation is a short stretch on the event loop, large enough that the per-window
# bookkeeping does not count.
REPLAY_WINDOW = 200


def replay_windows(
    translator: Translator,
    events: Sequence[SdkObject],
    window: int = REPLAY_WINDOW,
    after: Callable[[SdkObject], SessionUpdate | None] | None = None,
) -> Iterator[list[SessionUpdate]]:
    """The replay of `events` (as `Translator.replay` + `coalesce`) in non-empty parts.

    `after(event)`, if given, may return one more update to show right after the event's
    own (the critic's verdict after the answer it judged); it is final as it is.

    Like `Translator.replay`, `translator` knows the replayed tool calls once the last part
    has been taken.
    """
    last_seen = {_call_id(event): i for i, event in enumerate(events)}
    fresh = translator.for_replay()
    folder = _Folder()
    merger = Coalescer()
    size = max(1, window)
    for i, event in enumerate(events):
        folder.add(fresh.replay_event(event))
        extra = after(event) if after is not None else None
        if extra is not None:
            if isinstance(extra, schema.ToolCallStart):
                last_seen[extra.tool_call_id] = i
            folder.add([extra])
        if (i + 1) % size == 0:
            ready = merger.feed(folder.release(last_seen, i))
            if ready:
                yield ready
    ready = merger.feed(folder.release(last_seen, len(events))) + merger.finish()
    translator.adopt_calls(fresh)
    if ready:
        yield ready


def _call_id(event: SdkObject) -> str:
    # The very expression the translator's handlers key tool calls by.
    return str(getattr(event, "tool_call_id", "") or "")


class _Folder:
    """`fold_tool_calls` over updates that arrive in parts."""

    def __init__(self) -> None:
        self._held: list[SessionUpdate] = []  # folded, not yet released
        self._base = 0  # the position of _held[0] in the whole folded sequence
        self._where: dict[str, int] = {}  # call id -> position of the tool_call announcing it

    def add(self, updates: list[SessionUpdate]) -> None:
        for update in updates:
            if isinstance(update, schema.ToolCallStart):
                self._where[update.tool_call_id] = self._base + len(self._held)
                self._held.append(update)
            elif isinstance(update, schema.ToolCallProgress):
                at = self._where.get(update.tool_call_id)
                if at is None or at < self._base:
                    # Never announced (as fold_tool_calls); a released tool_call cannot
                    # get here (`replay_windows` releases it only after its id's last event).
                    log.debug(
                        "dropping an update for unannounced tool call %s", update.tool_call_id
                    )
                    continue
                changes = {
                    f: getattr(update, f)
                    for f in _TOOL_FIELDS
                    if getattr(update, f, None) is not None
                }
                self._held[at - self._base] = attrs.evolve(self._held[at - self._base], **changes)
            else:
                self._held.append(update)

    def release(self, last_seen: dict[str, int], done: int) -> list[SessionUpdate]:
        """The held updates before the first `tool_call` that a later event than `done`
        (the index of the last event translated) may still change."""
        cut = self._base + len(self._held)
        for call_id, at in self._where.items():
            if at < cut and last_seen.get(call_id, done + 1) > done:
                cut = at
        out = self._held[: cut - self._base]
        del self._held[: cut - self._base]
        self._base = cut
        self._where = {k: at for k, at in self._where.items() if at >= cut}
        return out
