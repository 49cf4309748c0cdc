"""A sub-agent's work as the client sees it: nested under the tool call that delegated it.

The `task` tool (the OpenHands CLI's delegation) runs a sub-agent in a conversation of its
own; its events reach the session wrapped in a `SubagentEvent` naming the delegating tool
call (`openhands/setup/subagents.py`). ACP v1 has no update for sub-agents (the schema has no
`subagent_update`), so they are shown with what every client renders:

* each tool call of the sub-agent is a tool call of its own, with the id
  `<delegating id>/<its own id>` (unique in the session: the sub-agent's model numbers its
  calls on its own), its title prefixed with the sub-agent's label, and
  `_meta.trio_acp.parentToolCallId` naming the delegating call, for a client that nests
  tool calls. A client that does not still sees every step, and the permission requests
  for them refer to a tool call it knows;
* while the sub-agent works, the delegating call's content lists its steps; its result
  replaces that list when the sub-agent is done;
* the sub-agent's own text (thoughts, its final message) is not repeated: its final
  message is the delegating call's result.

The sub-agent's events come from its own thread, the delegating call's result from the
parent's, so they can overtake each other: a cancel makes the parent close the delegating
call at once (its run is interrupted, the call fails), while the sub-agent's thread is
still delivering its last events (the action it was about to run, the command the cancel
killed). The sub-agent's thread marks its start and its end in the same stream
(`SubagentBegan`, `SubagentEnded`); in between, the delegating call's result is held back
and shown right after the sub-agent's last event, so those are shown rather than dropped.
The end of a turn releases what is still held (`release_all`).

Each delegation gets a translator of its own (its tool call ids are its own namespace).
Pure: no trio, no `openhands.*`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from trio_acp import schema
from trio_acp.openhands.translate.content import text_item
from trio_acp.openhands.translate.text import one_line

__all__ = [
    "META_KEY",
    "SubagentBegan",
    "SubagentEnded",
    "SubagentEvent",
    "SubagentViews",
    "nested_id",
]

#: The `_meta` key of what trio-acp adds to a sub-agent's tool calls.
META_KEY = "trio_acp"
# Steps listed in the delegating call's content (the newest, when there are more).
_MAX_STEPS = 50
_MARK = {"completed": "✓", "failed": "✗", "in_progress": "…", "pending": "?"}


@attrs.frozen
class SubagentEvent:
    """An event of a sub-agent's conversation, and the tool call that delegated to it."""

    parent_tool_call_id: str
    label: str
    event: Any


@attrs.frozen
class SubagentBegan:
    """The sub-agent of the delegating call started (its thread's first post)."""

    parent_tool_call_id: str


@attrs.frozen
class SubagentEnded:
    """The sub-agent of the delegating call is done (its thread's last post)."""

    parent_tool_call_id: str


# The events that end a tool call (the delegating call's result).
_RESULTS = frozenset({"ObservationEvent", "AgentErrorEvent", "UserRejectObservation"})


def nested_id(parent_tool_call_id: str, tool_call_id: str) -> str:
    """The client's id of a sub-agent's tool call."""
    return f"{parent_tool_call_id}/{tool_call_id}"


@attrs.define
class _Delegation:
    parent: str
    label: str
    translator: Any
    steps: dict[str, list[str]] = attrs.Factory(dict)  # nested id -> [title, status]


class SubagentViews:
    """The sub-agents of one session, as the client sees them; owned by its `Translator`.

    `new_translator()` makes the translator of one delegation (the caller's class: this
    module cannot import it without a cycle); `finished(id)` says whether the client saw
    that tool call end: what its sub-agent still posts then (winding down after a cancel)
    is dropped, never an update after the end.
    """

    def __init__(self, new_translator: Callable[[], Any], finished: Callable[[str], bool]) -> None:
        self._new = new_translator
        self._open: dict[str, _Delegation] = {}
        self._finished = finished
        # Delegating calls whose sub-agent's thread still runs, and their results held
        # back until it is done (see the module's docstring).
        self._running: set[str] = set()
        self._held: dict[str, list[Any]] = {}

    def began(self, parent: str) -> None:
        self._running.add(parent)

    def hold(self, event: Any, class_name: str) -> bool:
        """Keep `event` for later if it is the result of a call whose sub-agent still runs."""
        if not self._running or class_name not in _RESULTS:
            return False  # every event asks (a replay: 10,000 of them), almost none is held
        call_id = str(getattr(event, "tool_call_id", "") or "")
        if call_id not in self._running:
            return False
        self._held.setdefault(call_id, []).append(event)
        return True

    def ended(self, parent: str) -> list[Any]:
        """The sub-agent is done: the results held for its delegating call, to translate now."""
        self._running.discard(parent)
        return self._held.pop(parent, [])

    def release_all(self) -> list[Any]:
        """The turn is over: every held result, to translate now (in the order they came)."""
        self._running.clear()
        held = [event for events in self._held.values() for event in events]
        self._held.clear()
        return held

    def event(self, wrapped: SubagentEvent, action_status: str) -> list[Any]:
        parent = wrapped.parent_tool_call_id
        if self._finished(parent):
            return []
        d = self._open.get(parent)
        if d is None:
            d = self._open[parent] = _Delegation(parent, wrapped.label, self._new())
        d.translator.action_status = action_status
        return self._nest(d, d.translator.event(wrapped.event))

    def close(self, parent: str, reason: str) -> list[Any]:
        """The delegating call finished: close the sub-agent's calls that did not."""
        d = self._open.pop(parent, None)
        if d is None:
            return []
        return self._nest(d, d.translator.fail_open_tool_calls(reason), log=False)

    def fail_open(self, reason: str) -> list[Any]:
        """Close every unfinished call of every sub-agent (the turn was cut short)."""
        out: list[Any] = []
        for parent in list(self._open):
            out += self.close(parent, reason)
        return out

    def _nest(self, d: _Delegation, updates: list[Any], *, log: bool = True) -> list[Any]:
        out: list[Any] = []
        changed = False
        for update in updates:
            if not isinstance(update, (schema.ToolCallStart, schema.ToolCallProgress)):
                continue  # the sub-agent's text: its final message is the call's result
            nid = nested_id(d.parent, update.tool_call_id)
            meta = {
                **(update.meta or {}),
                META_KEY: {"parentToolCallId": d.parent, "subagent": d.label},
            }
            nested = attrs.evolve(update, tool_call_id=nid, meta=meta)
            if update.title:
                nested.title = f"{d.label}: {update.title}"
            out.append(nested)
            step = d.steps.setdefault(nid, ["", "pending"])
            if update.title:
                step[0] = one_line(update.title, 200)
                changed = True
            if update.status:
                step[1] = update.status
                changed = True
        if changed and log:
            out.append(self._step_log(d))
        return out

    @staticmethod
    def _step_log(d: _Delegation) -> Any:
        steps = list(d.steps.values())[-_MAX_STEPS:]
        lines = [f"{_MARK.get(status, '·')} {title}" for title, status in steps if title]
        text = f"Sub-agent {d.label}:\n" + "\n".join(f"- {line}" for line in lines)
        return schema.ToolCallProgress(tool_call_id=d.parent, content=[text_item(text)])
