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


def user_chunks(event: SdkObject, contents: list[SdkObject]) -> list[SessionUpdate]:
    event_id = str(getattr(event, "id", ""))
    try:
        mid = str(uuid.UUID(event_id))
    except ValueError:
        mid = message_id(event_id, "user")
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
