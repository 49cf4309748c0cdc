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

A client that advertises the unstable `subagents` capability gets the sub-agent as a child
session as well (`SubagentSessions`, the connection's `ClientProxy.update_hook`): the
delegating call's start announces it with a `subagent_update` on the parent session
(title, the prompt as its description, state `running`); the sub-agent's tool calls go
out on the child's session id instead of the parent's; the delegating call's end is
followed by a `subagent_update` with state `idle` and its stop reason (`end_turn`,
`cancelled` after a `session/cancel`, `error`). Every other client sees exactly what
is described above.

Pure: no trio, no `openhands.*`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import attrs

from trio_acp import schema
from trio_acp.openhands.translate.content import text_item
from trio_acp.openhands.translate.plans import spell_for_client
from trio_acp.openhands.translate.shapes import SdkObject, ToolArgs
from trio_acp.openhands.translate.text import one_line
from trio_acp.schema import UnknownVariant, unstable

__all__ = [
    "META_KEY",
    "SubagentBegan",
    "SubagentEnded",
    "SubagentEvent",
    "SubagentSessions",
    "SubagentViews",
    "child_session_id",
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
    event: SdkObject


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


class DelegationTranslator(Protocol):
    """What a delegation's translator does here (the caller's `Translator`: this module
    cannot import it without a cycle)."""

    action_status: str

    def event(self, event: SdkObject) -> list[schema.SessionUpdate]: ...

    def fail_open_tool_calls(self, reason: str = ...) -> list[schema.SessionUpdate]: ...


@attrs.define
class _Delegation:
    parent: str
    label: str
    translator: DelegationTranslator
    steps: dict[str, list[str]] = attrs.Factory(dict)  # nested id -> [title, status]


class SubagentViews:
    """The sub-agents of one session, as the client sees them; owned by its `Translator`.

    `new_translator()` makes the translator of one delegation (the caller's class: this
    module cannot import it without a cycle); `finished(id)` says whether the client saw
    that tool call end: what its sub-agent still posts then (winding down after a cancel)
    is dropped, never an update after the end.
    """

    def __init__(
        self, new_translator: Callable[[], DelegationTranslator], finished: Callable[[str], bool]
    ) -> None:
        self._new = new_translator
        self._open: dict[str, _Delegation] = {}
        self._finished = finished
        # Delegating calls whose sub-agent's thread still runs, and their results held
        # back until it is done (see the module's docstring).
        self._running: set[str] = set()
        self._held: dict[str, list[SdkObject]] = {}

    def began(self, parent: str) -> None:
        self._running.add(parent)

    def hold(self, event: SdkObject, class_name: str) -> bool:
        """Keep `event` for later if it is the result of a call whose sub-agent still runs."""
        if not self._running or class_name not in _RESULTS:
            return False  # every event asks (a replay: 10,000 of them), almost none is held
        call_id = str(getattr(event, "tool_call_id", "") or "")
        if call_id not in self._running:
            return False
        self._held.setdefault(call_id, []).append(event)
        return True

    def ended(self, parent: str) -> list[SdkObject]:
        """The sub-agent is done: the results held for its delegating call, to translate now."""
        self._running.discard(parent)
        return self._held.pop(parent, [])

    def release_all(self) -> list[SdkObject]:
        """The turn is over: every held result, to translate now (in the order they came)."""
        self._running.clear()
        held = [event for events in self._held.values() for event in events]
        self._held.clear()
        return held

    def event(self, wrapped: SubagentEvent, action_status: str) -> list[schema.SessionUpdate]:
        parent = wrapped.parent_tool_call_id
        if self._finished(parent):
            return []
        d = self._open.get(parent)
        if d is None:
            d = self._open[parent] = _Delegation(parent, wrapped.label, self._new())
        d.translator.action_status = action_status
        return self._nest(d, d.translator.event(wrapped.event))

    def close(self, parent: str, reason: str) -> list[schema.SessionUpdate]:
        """The delegating call finished: close the sub-agent's calls that did not."""
        d = self._open.pop(parent, None)
        if d is None:
            return []
        return self._nest(d, d.translator.fail_open_tool_calls(reason), log=False)

    def fail_open(self, reason: str) -> list[schema.SessionUpdate]:
        """Close every unfinished call of every sub-agent (the turn was cut short)."""
        out: list[schema.SessionUpdate] = []
        for parent in list(self._open):
            out += self.close(parent, reason)
        return out

    def _nest(
        self, d: _Delegation, updates: list[schema.SessionUpdate], *, log: bool = True
    ) -> list[schema.SessionUpdate]:
        out: list[schema.SessionUpdate] = []
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
    def _step_log(d: _Delegation) -> schema.ToolCallProgress:
        steps = list(d.steps.values())[-_MAX_STEPS:]
        lines = [f"{_MARK.get(status, '·')} {title}" for title, status in steps if title]
        text = f"Sub-agent {d.label}:\n" + "\n".join(f"- {line}" for line in lines)
        return schema.ToolCallProgress(tool_call_id=d.parent, content=[text_item(text)])


# ------------------------------------------------------------------ the `subagents` client

#: The title prefix of a delegating `task` call (translate/tools.py, `_delegate_present`).
_DELEGATING_TITLE = "Sub-agent "
# A failed delegating call's text, as the child's error (bounded).
_MAX_ERROR = 500


def child_session_id(session_id: str, parent_tool_call_id: str) -> str:
    """The child session id of the sub-agent a delegating call started (opaque to the
    client; unique per connection, as tool call ids are per session)."""
    return f"{session_id}/{parent_tool_call_id}"


def _subagent_update(
    child: str,
    *,
    title: str | None = None,
    description: str | None = None,
    state: unstable.SubagentState | None = None,
) -> UnknownVariant:
    # The unstable variant is not in the generated union (schema/types.py): it goes out
    # as an UnknownVariant, which encodes exactly as given (schema/_variants.py).
    update = unstable.SubagentUpdate(
        session_id=child, title=title, description=description, state=state
    )
    return UnknownVariant(
        tag="subagent_update", data={"sessionUpdate": "subagent_update", **schema.to_wire(update)}
    )


def _nesting(update: schema.ToolCallStart | schema.ToolCallProgress) -> tuple[str, str] | None:
    """(delegating call id, label) of a sub-agent's tool call update; None for others."""
    ours = (update.meta or {}).get(META_KEY)
    if not isinstance(ours, dict):
        return None
    parent, label = ours.get("parentToolCallId"), ours.get("subagent")
    if not isinstance(parent, str) or not isinstance(label, str):
        return None
    return parent, label


def _text_of(update: schema.ToolCallProgress) -> str | None:
    for item in update.content or []:
        text = getattr(getattr(item, "content", None), "text", None)
        if isinstance(text, str) and text.strip():
            return one_line(text, _MAX_ERROR)
    return None


class SubagentSessions:
    """The connection's `update_hook` (connection/_agent_side.py): the plan spelled as the
    client takes it (plans.py), and, for a client with the unstable `subagents`
    capability, sub-agents as child sessions (the module's docstring).

    One per connection; it sees every update the connection sends, in order, on the Trio
    thread. It keeps the delegations it announced (until their end) and the sessions whose
    turn a `session/cancel` cut (`cancel_requested`, until the next prompt).
    """

    def __init__(self) -> None:
        # (session id, delegating call id) -> child session id, while the child runs.
        self._running: dict[tuple[str, str], str] = {}
        self._cancelled: set[str] = set()
        # The arguments of delegating calls not yet running (they stream in).
        self._args: dict[tuple[str, str], ToolArgs] = {}

    def cancel_requested(self, session_id: str) -> None:
        """`session/cancel` for the session: its sub-agents' ends are `cancelled`."""
        self._cancelled.add(session_id)

    def prompt_received(self, session_id: str) -> None:
        """A new prompt: what fails from now on is no cancel's doing."""
        self._cancelled.discard(session_id)

    def spell(
        self, caps: schema.ClientCapabilities, notification: schema.SessionNotification
    ) -> list[schema.SessionNotification]:
        notification = spell_for_client(caps, notification)
        if getattr(caps, "subagents", None) is None:
            return [notification]
        sid, update = notification.session_id, notification.update
        if not isinstance(update, (schema.ToolCallStart, schema.ToolCallProgress)):
            return [notification]
        nesting = _nesting(update)
        if nesting is not None:  # the sub-agent's own tool call: on its child session
            parent, label = nesting
            out = self._announce(sid, parent, title=label)
            if update.title and update.title.startswith(f"{label}: "):
                update = attrs.evolve(update, title=update.title[len(label) + 2 :])
            child = self._running.get((sid, parent), child_session_id(sid, parent))
            return [*out, attrs.evolve(notification, session_id=child, update=update)]
        parent = update.tool_call_id.split("/", 1)[0]
        if parent != update.tool_call_id and (sid, parent) in self._running:
            # Its call's status from the permission flow (confirm.py), which carries no
            # `_meta`: by its nested id (`nested_id`), on the child's session too.
            child = self._running[(sid, parent)]
            return [attrs.evolve(notification, session_id=child)]
        key = (sid, update.tool_call_id)
        if _is_delegating(update):
            # Its arguments stream in (a start without them, then an update with them);
            # the sub-agent runs once the call does (after its permission, if asked).
            args = self._args.setdefault(key, {})
            if isinstance(update.raw_input, dict) and update.raw_input:
                args.update(update.raw_input)
            if update.status == "in_progress":
                title, prompt = args.get("description"), args.get("prompt")
                out = self._announce(
                    sid,
                    update.tool_call_id,
                    title=title if isinstance(title, str) and title.strip() else update.title,
                    description=one_line(prompt, 200) if isinstance(prompt, str) else None,
                )
                return [notification, *out]
        if update.status in ("completed", "failed"):
            self._args.pop(key, None)
            ended = self._running.pop(key) if key in self._running else None
            if ended is not None:
                return [notification, self._ended(sid, ended, update)]
        return [notification]

    def _announce(
        self, sid: str, parent: str, *, title: str | None, description: str | None = None
    ) -> list[schema.SessionNotification]:
        if (sid, parent) in self._running:
            return []
        child = self._running[(sid, parent)] = child_session_id(sid, parent)
        update = _subagent_update(
            child,
            title=title,
            description=description,
            state=unstable.SubagentState(state="running"),
        )
        return [schema.SessionNotification(session_id=sid, update=update)]

    def _ended(
        self, sid: str, child: str, update: schema.ToolCallStart | schema.ToolCallProgress
    ) -> schema.SessionNotification:
        if update.status == "completed":
            state = unstable.SubagentState(state="idle", stop_reason="end_turn")
        elif sid in self._cancelled:
            state = unstable.SubagentState(state="idle", stop_reason="cancelled")
        else:
            text = _text_of(update) if isinstance(update, schema.ToolCallProgress) else None
            error = schema.Error(code=-32603, message=text) if text else None
            state = unstable.SubagentState(state="idle", stop_reason="error", error=error)
        return schema.SessionNotification(
            session_id=sid, update=_subagent_update(child, state=state)
        )


def _is_delegating(update: schema.ToolCallStart | schema.ToolCallProgress) -> bool:
    """A `task` call (translate/tools.py presents it so: kind think, "Sub-agent ...")."""
    return update.kind == "think" and (update.title or "").startswith(_DELEGATING_TITLE)
