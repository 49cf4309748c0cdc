"""What trio-acp writes into a conversation about turns that did not end normally, and how
a replay shows it: never as words the user typed.

* A cancelled turn: locally the session appends an assistant note (`CANCEL_SENDER`,
  `CANCEL_TEXT`: sdk.interruption_event); on an agent-server, which takes only user
  messages, the next user message opens with `CANCEL_NOTE` (remote.py). Either is for the
  model; `session/load` shows both the same way: an agent message marked
  `_meta.trioAcp.interrupted = "cancelled"`, and the user's own words without the note.
* A turn cut short because trio-acp lost its agent-server (down, restarted, silent): the
  next user message opens with `LOST_NOTE` (remote.py); `session/load` shows it as an
  agent message `LOST_TEXT` marked `_meta.trioAcp.interrupted = "stopped"`.
* A process that stopped mid-turn (kill -9, a crash): when the session is reopened, what
  the user had been shown of the unfinished reply is appended as an assistant message
  (`STOPPED_SENDER`, ending with `STOPPED_TEXT`; replayed with
  `_meta.trioAcp.interrupted = "stopped"`), and every tool call left without a result gets
  one saying what is known (`TOOL_STOPPED`, or `NOT_APPROVED` when it was still waiting for
  the user's approval): recovery.py.
* A turn cut short while its reply streamed (a cancel, a failed model call): the SDK saves
  no event for that reply, so what the user was shown of it is kept the same way, before
  the turn answers: in the cancel's note (before `CANCEL_TEXT`), or, for a failed call, as
  a `STOPPED_SENDER` message ending with `FAILED_TEXT`.

Pure: no trio, no `openhands.*`.
"""

from __future__ import annotations

from trio_acp.openhands.translate.shapes import JsonObject

__all__ = [
    "CANCEL_NOTE",
    "CANCEL_SENDER",
    "CANCEL_TEXT",
    "FAILED_TEXT",
    "LOST_NOTE",
    "LOST_TEXT",
    "NOT_APPROVED",
    "STOPPED_SENDER",
    "STOPPED_TEXT",
    "REMOTE_NOTES",
    "TOOL_STOPPED",
    "interrupted_meta",
]

# The note a cancelled turn leaves in a local conversation (an assistant message).
CANCEL_SENDER = "trio-acp:interrupted"
CANCEL_TEXT = "[Interrupted: the user stopped this turn before it was finished.]"
# The same on an agent-server: the first text block of the next user message.
CANCEL_NOTE = (
    "[The user interrupted the previous request before it was finished. "
    "Answer only the message that follows.]"
)

# The same when trio-acp lost the agent-server during the turn, and how a replay shows it.
LOST_NOTE = (
    "[The previous request was cut short: the agent-server running it stopped answering "
    "before it was finished. Answer only the message that follows.]"
)
LOST_TEXT = "[Interrupted: trio-acp lost the agent-server before this turn was finished.]"
# The notes an agent-server session's user message may open with: (note, shown as, how).
REMOTE_NOTES = ((CANCEL_NOTE, CANCEL_TEXT, "cancelled"), (LOST_NOTE, LOST_TEXT, "stopped"))

# What a reopened session says of a turn its process did not finish.
STOPPED_SENDER = "trio-acp:stopped"
STOPPED_TEXT = "[Interrupted: trio-acp stopped while this reply was being written.]"
TOOL_STOPPED = "interrupted: trio-acp stopped while this ran; it may have finished."
NOT_APPROVED = "Not approved before the session was reopened; nothing was run."
# What a kept reply of a turn whose model call failed ends with.
FAILED_TEXT = "[Interrupted: the model call failed before this reply was finished.]"


def interrupted_meta(how: str) -> JsonObject:
    """`_meta` of a replayed interruption: `how` is "cancelled" or "stopped"."""
    return {"trioAcp": {"interrupted": how}}
