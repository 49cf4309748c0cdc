"""A user's message in a replayed history, and trio-acp's record of an interrupted turn.

Pure, duck-typed on SDK events like `translator.py` (which calls these).
"""

from __future__ import annotations

import uuid

from trio_acp import schema
from trio_acp.openhands.translate.content import image_block, text_block
from trio_acp.openhands.translate.interruptions import REMOTE_NOTES, interrupted_meta
from trio_acp.openhands.translate.shapes import SdkObject
from trio_acp.openhands.translate.streams import message_id
from trio_acp.schema import SessionUpdate


def interruption(key: str, text: str, thought: str, how: str) -> list[SessionUpdate]:
    """trio-acp's record of an interrupted turn (translate/interruptions.py), replayed as
    the agent's, marked `_meta.trioAcp.interrupted = how`."""
    out: list[SessionUpdate] = []
    if thought:
        out.append(
            schema.AgentThoughtChunk(
                content=text_block(thought),
                message_id=message_id(key, "thought"),
                meta=interrupted_meta(how),
            )
        )
    if text:
        out.append(
            schema.AgentMessageChunk(
                content=text_block(text),
                message_id=message_id(key, "message"),
                meta=interrupted_meta(how),
            )
        )
    return out


#: A prompt's own message id (the one a v2 client was answered with, v2/gateway.py) is
#: kept on the SDK's user `MessageEvent` as its `sender`, prefixed so: the event's one
#: free-form field, stored with it (so it survives a resume, a fork's copy of the events,
#: a condensation, which only adds events) and read by nothing the model sees.
SENDER_PREFIX = "acp-message:"


def prompt_message_id(meta: object) -> str | None:
    """The message id a prompt's `_meta.trioAcp.messageId` gives (v2/gateway.py)."""
    ours = meta.get("trioAcp") if isinstance(meta, dict) else None
    mid = ours.get("messageId") if isinstance(ours, dict) else None
    return mid if isinstance(mid, str) and mid and len(mid) <= 200 else None


def prompt_sender(prompt_message_id: str | None) -> str | None:
    """The `sender` a user message is sent with to keep its prompt's message id."""
    return None if not prompt_message_id else SENDER_PREFIX + prompt_message_id


def user_message_id(event: SdkObject) -> str:
    """A user message's id in a replay: its prompt's, if kept (`prompt_sender`), else
    the event's own id."""
    sender = getattr(event, "sender", None)
    if (
        isinstance(sender, str)
        and sender.startswith(SENDER_PREFIX)
        and len(sender) > len(SENDER_PREFIX)
    ):
        return sender[len(SENDER_PREFIX) :]
    event_id = str(getattr(event, "id", ""))
    try:
        return str(uuid.UUID(event_id))
    except ValueError:
        return message_id(event_id, "user")


def user_chunks(event: SdkObject, contents: list[SdkObject]) -> list[SessionUpdate]:
    event_id = str(getattr(event, "id", ""))
    mid = user_message_id(event)
    out: list[SessionUpdate] = []
    first = getattr(contents[0], "text", None) if contents else None
    note = next(
        (n for n in REMOTE_NOTES if isinstance(first, str) and first.startswith(n[0])), None
    )
    if note is not None and isinstance(first, str):
        # The note an agent-server session puts before the message that follows a
        # cancelled or lost turn (remote.py) is for the model, not the user's words:
        # shown as a local session shows its own note, then what the user typed.
        out += interruption(event_id, note[1], "", note[2])
        rest = first[len(note[0]) :].lstrip()
        if rest:
            out.append(schema.UserMessageChunk(content=text_block(rest), message_id=mid))
        contents = contents[1:]
    for c in contents:
        text = getattr(c, "text", None)
        if isinstance(text, str):
            if text:
                out.append(schema.UserMessageChunk(content=text_block(text), message_id=mid))
            continue
        for url in getattr(c, "image_urls", None) or []:
            out.append(schema.UserMessageChunk(content=image_block(url), message_id=mid))
    return out
