"""What a model's streamed text costs while the client reads nothing: its text, not its chunks.

The SDK's thread posts every streamed token to the session's bridge (bridge.py) and never
waits; the pump sends them on as fast as the client reads. A client that stops reading in
the middle of a streaming turn stops the pump, and the tokens pile up in the bridge: each a
litellm `ModelResponseStream` of a few KiB for a few characters of text. So once more than
`BACKLOG` items wait, a plain text token (text or reasoning of the first choice, nothing
else: no tool call, no finish reason, no usage) is merged into the token posted before it
when that one is the same kind of text of the same response (`merge_text`): what waits is
then the text itself, in a few objects, and the client reads the same text, in fewer
updates. Pure: no Trio, no SDK import.
"""

from __future__ import annotations

from trio_acp.openhands.sessions.bridge_items import TokenChunk
from trio_acp.openhands.translate.fields import field

#: Items waiting in a session's bridge past which text tokens are merged. A turn the client
#: reads never gets near it (the pump drains each batch as it comes).
BACKLOG = 1024

# Parts joined into one string once a run holds this many (a part costs a str object).
_JOIN_AT = 256


class _Delta:
    __slots__ = ("content", "reasoning_content", "tool_calls")

    def __init__(self, content: str | None, reasoning: str | None) -> None:
        self.content = content
        self.reasoning_content = reasoning
        self.tool_calls = None


class _Choice:
    __slots__ = ("delta", "finish_reason", "index")

    def __init__(self, delta: _Delta) -> None:
        self.index = 0
        self.delta = delta
        self.finish_reason = None


class TextRun:
    """Consecutive text tokens of one response, merged: read as a stream chunk
    (`id`, `choices[0].delta.content` or `.reasoning_content`) by the translator."""

    __slots__ = ("_parts", "id", "kind")

    def __init__(self, rid: object, kind: str, text: str) -> None:
        self.id = rid  # the response's id, only compared
        self.kind = kind  # "content" or "reasoning_content"
        self._parts = [text]

    def add(self, text: str) -> None:
        self._parts.append(text)
        if len(self._parts) >= _JOIN_AT:
            self._parts = ["".join(self._parts)]

    @property
    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0]

    @property
    def choices(self) -> list[_Choice]:
        text = self.text
        if self.kind == "content":
            return [_Choice(_Delta(text, None))]
        return [_Choice(_Delta(None, text))]


def _plain_text(chunk: object) -> tuple[object, str, str] | None:
    """(response id, kind, text) of a chunk that is nothing but text; else None."""
    if isinstance(chunk, TextRun):
        return chunk.id, chunk.kind, chunk.text
    if field(chunk, "usage"):
        return None
    choices = field(chunk, "choices")
    if not isinstance(choices, list) or len(choices) != 1:
        return None
    choice = choices[0]
    if (field(choice, "index") or 0) != 0 or field(choice, "finish_reason"):
        return None
    delta = field(choice, "delta")
    if delta is None or field(delta, "tool_calls"):
        return None
    content = field(delta, "content")
    reasoning = field(delta, "reasoning_content")
    if isinstance(content, str) and content and not reasoning:
        return field(chunk, "id"), "content", content
    if isinstance(reasoning, str) and reasoning and not content:
        return field(chunk, "id"), "reasoning_content", reasoning
    return None


def merge_text(last: object, item: object) -> bool:
    """Merge `item` (a `TokenChunk`) into `last`, the item posted before it, if both are
    plain text of the same kind, response and turn: True if merged (`item` is then not
    posted). `last` is changed in place: the bridge's caller holds its lock."""
    if not (isinstance(last, TokenChunk) and isinstance(item, TokenChunk)):
        return False
    if last.seq != item.seq:
        return False
    new = _plain_text(item.chunk)
    if new is None:
        return False
    run = last.chunk
    if not isinstance(run, TextRun):
        old = _plain_text(run)
        if old is None or old[:2] != new[:2]:
            return False
        # Our own object from here on: litellm's chunk may still be the SDK's.
        run = last.chunk = TextRun(old[0], old[1], old[2])
    elif (run.id, run.kind) != new[:2]:
        return False
    run.add(new[2])
    return True
