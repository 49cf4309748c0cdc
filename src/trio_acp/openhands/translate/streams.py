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
  durable events and `replay` derive the same ids from a response id seen once.
* A response id is not always unique: some providers send the same `id` for every call, and
  a retried call may repeat it. A message is still one message: the first response with a
  given id keys its ids by that id; a later one (the same id, after its first response was
  claimed by its durable event or cut off by a failed attempt) gets a key of its own, the
  response id and a random suffix live, and the response id and the durable event's id in
  a history (`event_key`), so its text never joins an earlier message.
* A model call that fails after it streamed and is retried (`cut`): ACP cannot take text
  back, so the text it streamed stays, marked as cut off at its end (`CUT_OFF`), and the
  retried attempt's text is a new message, even under the same response id.
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
from collections.abc import Iterator

import attrs

from trio_acp import schema
from trio_acp.openhands.translate.content import text_block
from trio_acp.schema import SessionUpdate

log = logging.getLogger(__name__)

__all__ = [
    "CUT_OFF",
    "MAX_STREAMS",
    "Stream",
    "Streams",
    "message_id",
    "remainder",
    "response_text",
    "text_chunk",
]


# Fixed namespace for every message id the translate layer derives (uuid5).
_ID_NAMESPACE = uuid.UUID("5d0c8f64-8a1e-4c1b-9a57-3b0a2f6de1a4")
_ID_NAMESPACE_BYTES = _ID_NAMESPACE.bytes
#: How many LLM responses' streamed text is remembered.
MAX_STREAMS = 32
#: How many response ids are remembered as used: a repeated one gets a key of its own.
MAX_USED_IDS = 4096
#: What ends the text of a model call that failed mid-stream and is retried (`Streams.cut`).
CUT_OFF = " […cut off: the model call failed and is retried; its reply starts over]"


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
    key: str  # what its message ids derive from: `rid`, unless that id was used before
    text: list[str] = attrs.Factory(list)
    thought: list[str] = attrs.Factory(list)
    claimed: bool = False
    cut: bool = False  # its model call failed and is retried: a closed message

    def streamed(self, part: str) -> str:
        return "".join(self.text if part == "message" else self.thought)


class Streams:
    """The text streamed for the latest LLM responses of one session, by response id."""

    def __init__(self) -> None:
        # The latest stream of each response id (a repeated id's earlier ones are done).
        self._streams: OrderedDict[str, Stream] = OrderedDict()
        # Response ids that keyed a message already (a bounded LRU): a repeat needs a new key.
        self._used: OrderedDict[str, None] = OrderedDict()

    def _first_use(self, rid: str) -> bool:
        """Whether `rid` keys no message yet; from now on it does."""
        if rid in self._used:
            self._used.move_to_end(rid)
            return False
        self._used[rid] = None
        while len(self._used) > MAX_USED_IDS:
            self._used.popitem(last=False)
        return True

    def delta(self, rid: str, text: str, part: str) -> list[SessionUpdate]:
        """The chunk for one streamed `part` ("message", "thought") delta, remembered."""
        stream = self._streams.get(rid)
        if stream is None or stream.claimed or stream.cut:
            # A new response (or a new attempt) under an id that may have been used.
            key = rid if self._first_use(rid) else f"{rid}\x1f{uuid.uuid4().hex}"
            stream = self._streams[rid] = Stream(rid, key)
            self._streams.move_to_end(rid)
            while len(self._streams) > MAX_STREAMS:
                self._streams.popitem(last=False)
        (stream.text if part == "message" else stream.thought).append(text)
        return [text_chunk(part, text, message_id(stream.key, part))]

    def event_key(self, rid: str | None, event_id: str) -> str:
        """The key of the ids of a response's text that was not streamed (a history, or a
        call that did not stream): its response id the first time, else with the event's id."""
        if not rid:
            return event_id
        return rid if self._first_use(rid) else f"{rid}/{event_id}"

    def adopt(self, other: Streams) -> None:
        """Know the response ids `other` used (a replayed history) as used."""
        for rid in other._used:
            self._first_use(rid)

    def cut(self) -> list[SessionUpdate]:
        """The model call in flight failed and is retried: close the text it streamed
        (the responses no durable event claimed) with `CUT_OFF`; more text under the same
        response id is a new message."""
        out: list[SessionUpdate] = []
        for stream in self._open():
            stream.cut = True
            for part in ("thought", "message"):
                if stream.streamed(part).strip():
                    out.append(text_chunk(part, CUT_OFF, message_id(stream.key, part)))
        return out

    def _open(self) -> Iterator[Stream]:
        return (s for s in list(self._streams.values()) if not (s.claimed or s.cut))

    def claim(self, rid: str | None, text: str, thought: str) -> Stream | None:
        """The stream of the response whose durable event says `text` / `thought`, if any;
        each stream is claimed by one event at most."""
        stream = self._streams.get(rid) if rid else None
        if stream is not None and stream.cut:
            return None  # its attempt failed; the one that succeeded did not stream
        if stream is None:
            # Not streamed under this id (e.g. Responses API item ids): match by content.
            for candidate in reversed(self._streams.values()):
                if candidate.claimed or candidate.cut:
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
    mid_key = stream.key if stream is not None else key
    out: list[SessionUpdate] = []
    for part, final in (("thought", thought), ("message", text)):
        streamed = stream.streamed(part) if stream is not None else ""
        out += remainder(part, final, streamed, message_id(mid_key, part))
    return out
