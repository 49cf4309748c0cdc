"""A session reopened after its process stopped mid-turn: say what is known, keep what
the user saw.

A process killed mid-turn (kill -9, a crash) leaves its conversation with:

* tool calls without a result. The SDK would run them again on the next run (it executes
  every action without an observation), and a replay would show them forever unfinished.
  Each gets a result now, saying what is known (translate/interruptions.py): one the user
  approved, or that ran without asking, may have run — `TOOL_STOPPED`, an error result;
  one still waiting for the user's approval (the conversation was waiting for confirmation
  and the journal has no approval for it) did not — `NOT_APPROVED`, a rejection.
* text the user read as it streamed, which the SDK saves only once the model call is over:
  the turn journal (journal.py) has it. What no saved event holds is appended as the
  assistant message it was, ending with `STOPPED_TEXT`, so the user sees it again after
  `session/load` and the model knows what it had said.

This module decides; `local_conversation.LocalConversation.recover` appends the events under the
SDK's lock. No `openhands.*` import (events are duck-typed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from trio_acp import schema
from trio_acp.openhands.sessions.journal import JournalRecord
from trio_acp.openhands.translate import Translator
from trio_acp.openhands.translate.interruptions import NOT_APPROVED, STOPPED_TEXT, TOOL_STOPPED

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import ActionEvent, Event

__all__ = ["Ending", "Recovery", "plan_recovery", "turn_tail", "unsaved_text"]


@attrs.frozen
class Ending:
    """The result a tool call left without one gets: an error (`rejected` False) or a
    rejection, with `reason`."""

    action: ActionEvent
    rejected: bool
    reason: str


@attrs.frozen
class Recovery:
    endings: tuple[Ending, ...] = ()
    # The assistant message to append (text ends with STOPPED_TEXT), or None.
    text: str | None = None
    thought: str | None = None

    def __bool__(self) -> bool:
        return bool(self.endings) or self.text is not None


def turn_tail(events: Sequence[Event]) -> list[Event]:
    """The events of the last turn: from the last user message on (the whole history has
    no other unfinished tool call or unsaved text: every turn before it was recovered, or
    ended normally). Reads from the end only: a long history is not walked."""
    start = len(events)
    while start > 0:
        event = events[start - 1]
        start -= 1
        message = getattr(event, "llm_message", None)
        if type(event).__name__ == "MessageEvent" and getattr(message, "role", None) == "user":
            break
    return [events[i] for i in range(start, len(events))]


def plan_recovery(
    tail: list[Event],
    unmatched: list[ActionEvent],
    *,
    waiting_for_confirmation: bool,
    journal: JournalRecord,
    cwd: str,
) -> Recovery:
    """What to append to a conversation reopened after its process stopped.

    `tail`: the last turn's events (`turn_tail`); `unmatched`: the actions without a
    result (the SDK's `get_unmatched_actions`); `waiting_for_confirmation`: the stored
    status; `journal`: what the turn journal held.
    """
    endings = []
    for action in unmatched:
        call_id = str(getattr(action, "tool_call_id", "") or "")
        if waiting_for_confirmation and call_id not in journal.approved:
            endings.append(Ending(action, True, NOT_APPROVED))
        else:
            endings.append(Ending(action, False, TOOL_STOPPED))
    text, thought = unsaved_text(tail, journal, cwd)
    if text is None and thought is None:
        return Recovery(tuple(endings))
    body = f"{text}\n\n{STOPPED_TEXT}" if text else STOPPED_TEXT
    return Recovery(tuple(endings), body, thought)


def unsaved_text(
    tail: Sequence[Event], journal: JournalRecord, cwd: str
) -> tuple[str | None, str | None]:
    """(text, thought) shown to the user that no saved event of the turn holds: the
    journal's messages whose message id (streams.py: the same live and in a replay) the
    replay of the turn's events `tail` does not produce. Also for a live turn cut short
    (a cancel, a failed model call), whose streamed reply the SDK never saves."""
    if not journal.shown:
        return None, None
    saved = {
        update.message_id
        for update in Translator(cwd).replay(tail)
        if isinstance(update, (schema.AgentMessageChunk, schema.AgentThoughtChunk))
    }
    lost = [s for s in journal.shown if s.message_id not in saved and s.text.strip()]
    text = "\n\n".join(s.text for s in lost if s.part == "message")
    thought = "\n\n".join(s.text for s in lost if s.part == "thought")
    return text or None, thought or None
