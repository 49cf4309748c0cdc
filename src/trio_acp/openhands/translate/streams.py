"""Streamed text per LLM response, and what the durable events that follow still add.

Pure: no trio, no `openhands.*`, no litellm. The `Translator` (translator.py) owns one
`Streams` per session: text and reasoning deltas go out as they come and are remembered
here, per LLM response; the SDK's durable event for that response (a MessageEvent, or the
thought of an ActionEvent) then only adds what was not streamed.

* Message ids (`messageId`): the ACP schema only says "unique identifier for a message within a
  session" (the message-id RFD suggests UUIDs), so every id is a UUID5 in a fixed namespace.
  Derived from the LLM response id: the visible text of one response is one message
  (`<rid>/message`), its reasoning another (`<rid>/thought`): a thought and a reply are
  different messages, so they never share an id. The `finish` tool's message and the `think`
  tool's thought are messages of their own, keyed by tool call id. Live streaming, the
  durable events and `replay` all derive the same ids.
* The durable events only add what was not streamed: the remainder when the streamed text
  is a prefix of the final one; nothing when they disagree, to never duplicate. An event is
  matched to its stream by `llm_response_id` (== chunk id on the Chat Completions path) and,
  failing that, by equal text with the latest unmatched stream.
* Only the latest `MAX_STREAMS` responses are remembered: an event comes right after its
  response's stream, and a long session must not keep every streamed token.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import uuid
from collections import OrderedDict
from typing import Any

import attrs

from ... import schema
from .content import text_block

log = logging.getLogger(__name__)

__all__ = [
    "MAX_STREAMS",
    "Stream",
    "Streams",
    "message_id",
    "remainder",
    "response_text",
    "text_chunk",
]

SessionUpdate = Any

# Fixed namespace for every message id the translate layer derives (uuid5).
_ID_NAMESPACE = uuid.UUID("5d0c8f64-8a1e-4c1b-9a57-3b0a2f6de1a4")
_ID_NAMESPACE_BYTES = _ID_NAMESPACE.bytes
#: How many LLM responses' streamed text is remembered.
MAX_STREAMS = 32


@functools.lru_cache(maxsize=1024)  # every streamed token asks for its message's id
def message_id(key: str, part: str) -> str:
    """A stable UUID-formatted ACP messageId for `part` ("message", "thought", ...) of `key`.

    `str(uuid.uuid5(_ID_NAMESPACE, f"{part}\x1f{key}"))`, computed as `uuid.uuid5` does (the
    SHA-1 of the namespace and the name; version 5, RFC 4122 variant) without building a
    `UUID` object, a third of the cost: replaying a long history derives thousands of ids
    (tests/openhands/test_translate_speedups.py checks the two agree).
    """
    digest = bytearray(
        hashlib.sha1(
            _ID_NAMESPACE_BYTES + f"{part}\x1f{key}".encode(), usedforsecurity=False
        ).digest()[:16]
    )
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def text_chunk(part: str, text: str, mid: str) -> SessionUpdate:
    """An `agent_message_chunk` ("message") or `agent_thought_chunk` (any other part)."""
    cls = schema.AgentMessageChunk if part == "message" else schema.AgentThoughtChunk
    return cls(content=text_block(text), message_id=mid)


def remainder(part: str, final: str, streamed: str, mid: str) -> list[SessionUpdate]:
    """What is left to send of the `final` text when `streamed` went out already."""
    if not final:
        return []
    if not streamed:
        return [text_chunk(part, final, mid)]
    if final == streamed:
        return []
    if final.startswith(streamed):
        return [text_chunk(part, final[len(streamed) :], mid)]
    log.debug("streamed %s differs from the final one; not repeating it", part)
    return []


@attrs.define
class Stream:
    """What was streamed for one LLM response."""

    rid: str
    text: list[str] = attrs.Factory(list)
    thought: list[str] = attrs.Factory(list)
    claimed: bool = False

    def streamed(self, part: str) -> str:
        return "".join(self.text if part == "message" else self.thought)


class Streams:
    """The text streamed for the latest LLM responses of one session, by response id."""

    def __init__(self) -> None:
        self._streams: OrderedDict[str, Stream] = OrderedDict()

    def delta(self, rid: str, text: str, part: str) -> list[SessionUpdate]:
        """The chunk for one streamed `part` ("message", "thought") delta, remembered."""
        stream = self._streams.get(rid)
        if stream is None:
            stream = self._streams[rid] = Stream(rid)
            while len(self._streams) > MAX_STREAMS:
                self._streams.popitem(last=False)
        (stream.text if part == "message" else stream.thought).append(text)
        return [text_chunk(part, text, message_id(rid, part))]

    def claim(self, rid: str | None, text: str, thought: str) -> Stream | None:
        """The stream of the response whose durable event says `text` / `thought`, if any;
        each stream is claimed by one event at most."""
        stream = self._streams.get(rid) if rid else None
        if stream is None:
            # Not streamed under this id (e.g. Responses API item ids): match by content.
            for candidate in reversed(self._streams.values()):
                if candidate.claimed:
                    continue
                if (text and candidate.streamed("message") == text) or (
                    thought and candidate.streamed("thought") == thought
                ):
                    stream = candidate
                    break
        if stream is not None:
            stream.claimed = True
        return stream


def response_text(stream: Stream | None, key: str, text: str, thought: str) -> list[SessionUpdate]:
    """What a response's durable event adds to its `stream` (None: nothing was streamed, the
    ids derive from `key`): the thought's rest, then the message's."""
    mid_key = stream.rid if stream is not None else key
    out: list[SessionUpdate] = []
    for part, final in (("thought", thought), ("message", text)):
        streamed = stream.streamed(part) if stream is not None else ""
        out += remainder(part, final, streamed, message_id(mid_key, part))
    return out
