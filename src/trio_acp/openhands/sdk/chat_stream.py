"""An OpenAI chat-completions event stream, read: SSE bytes → token chunks → one compact stream.

Pure (no SDK, no litellm, no I/O): `sdk/fast_stream.py` feeds it the bytes of the HTTP
response and hands its chunks to the SDK's token callback. docs/ARCHITECTURE.md,
"Streaming fast path", says why it exists.

Two products:

- **token chunks** (`Chunk`), one per event with choices: the shape of litellm's
  `ModelResponseStream` that the token callbacks read (`id`, `choices[i].index`,
  `.delta.content` / `.reasoning_content` / `.tool_calls[j].index/.id/.function.name/
  .arguments`, `.finish_reason`), as plain slotted objects. Building litellm's pydantic
  chunk costs more than everything else done per token together (bench/README.md);
- **the compact stream** (`compacted()`): the same reply as a handful of chunk payloads
  (the whole text and reasoning in one, each tool call whole in one, then the finish and
  usage chunks as they came), which litellm turns into the final message with its own
  code, as it would the 20,000 originals. A reply with anything this module does not
  merge (another choice, log-probabilities, a delta field other than role / content /
  reasoning / tool calls) is not compacted: every payload is kept and replayed
  (`raw`), which is slower but the same.

The SSE rules are the ones the `openai` client applies (`openai/_streaming.py`): events
split on blank lines (``\\n``, ``\\r\\n`` or ``\\r``), ``data:`` lines joined with ``\\n``,
comments skipped, ``[DONE]`` ends the stream, a payload with an ``error`` member is an
error (`StreamError`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

from trio_acp.openhands.translate.shapes import JsonObject, JsonValue

__all__ = ["Chunk", "ChatStreamReader", "ChoiceDelta", "StreamChoice", "StreamError"]

#: The delta members merged when compacting; any other makes a reply replayed whole.
_MERGED = frozenset({"role", "content", "reasoning_content", "reasoning", "tool_calls"})
#: Choice members understood (None-valued `logprobs` is what servers send).
_CHOICE_KEYS = frozenset({"index", "delta", "finish_reason", "logprobs"})


class StreamError(Exception):
    """An event of the stream carried an ``error`` member (what the ``openai`` client raises
    as `openai.APIError`): `message` as it words it, `body` the error member."""

    def __init__(self, message: str, body: object) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


class FunctionDelta:
    __slots__ = ("arguments", "name")

    def __init__(self, name: str | None, arguments: str | None) -> None:
        self.name = name
        self.arguments = arguments


class ToolCallDelta:
    __slots__ = ("function", "id", "index", "type")

    def __init__(
        self, index: int, id: str | None, type: str | None, function: FunctionDelta | None
    ) -> None:
        self.index = index
        self.id = id
        self.type = type
        self.function = function


class ChoiceDelta:
    """A choice's delta: `content`, `reasoning_content`, `role`, `tool_calls`."""

    __slots__ = ("content", "reasoning_content", "role", "tool_calls")

    def __init__(
        self,
        content: str | None,
        reasoning_content: str | None,
        role: str | None,
        tool_calls: list[ToolCallDelta] | None,
    ) -> None:
        self.content = content
        self.reasoning_content = reasoning_content
        self.role = role
        self.tool_calls = tool_calls

    @property
    def model_fields_set(self) -> set[str]:
        """The members this delta carries, as pydantic names them (the SDK's stream
        progress reads `reasoning_content` only when it is set)."""
        return {name for name in self.__slots__ if getattr(self, name) is not None}


class StreamChoice:
    __slots__ = ("delta", "finish_reason", "index", "logprobs")

    def __init__(self, index: int, delta: ChoiceDelta, finish_reason: str | None) -> None:
        self.index = index
        self.delta = delta
        self.finish_reason = finish_reason
        self.logprobs = None


class Chunk:
    """One streamed event with choices, as the token callbacks read it."""

    __slots__ = ("choices", "created", "id", "model", "object", "system_fingerprint")

    def __init__(self, payload: Mapping[str, JsonValue], choices: list[StreamChoice]) -> None:
        self.id = payload.get("id")
        self.created = payload.get("created")
        self.model = payload.get("model")
        self.object = payload.get("object")
        self.system_fingerprint = payload.get("system_fingerprint")
        self.choices = choices


class _ToolCall:
    __slots__ = ("arguments", "header", "id", "name", "type")

    def __init__(self, header: Mapping[str, JsonValue]) -> None:
        self.header = header
        self.id: str | None = None
        self.type: str | None = None
        self.name: str | None = None
        self.arguments: list[str] = []


class ChatStreamReader:
    """Reads one streamed chat completion: `feed(bytes)` → token chunks."""

    def __init__(self) -> None:
        self._buffer = b""
        self._cr = False  # the last read ended with \r
        self.done = False  # `[DONE]` or a failed event was read: nothing after it counts
        self.error: Exception | None = None
        #: Every payload, in order (for a reply that cannot be compacted).
        self.raw: list[JsonObject] = []
        #: Whether `compacted()` gives the same reply as `raw`.
        self.mergeable = True
        self.finish_reason: str | None = None
        self.sent_choices = False  # a chunk with choices was read
        #: Consecutive chunks with the same content longer than 2 characters (litellm's
        #: check for a model caught in a loop counts these).
        self.repeats = 1
        self._last_content: str | None = None
        self._role: str | None = None
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._tools: dict[int, _ToolCall] = {}
        self._first: Mapping[str, JsonValue] | None = None
        self._tail: list[JsonObject] = []  # the finish and usage payloads, as they came

    # ---------------------------------------------------------------- reading

    def feed(self, data: bytes) -> list[Chunk]:
        """The token chunks completed by `data`. An event that fails (`StreamError` for an
        error event, `json.JSONDecodeError` for a payload that is not JSON) ends the
        stream: it is kept in `error`, to raise once the chunks before it are handled."""
        if self.done:
            return []
        if self._cr and data.startswith(b"\n"):
            data = data[1:]  # the second half of a \r\n read as a line end already
        buffer = self._buffer + data if self._buffer else data
        self._cr = buffer.endswith(b"\r")
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events = buffer.split(b"\n\n")
        self._buffer = events.pop()
        out: list[Chunk] = []
        for event in events:
            text: str | None
            if event.startswith(b"data: ") and b"\n" not in event:
                text = event[6:].decode()  # the usual event: one `data: ` line
            else:
                text = _event_data(event)
            if text is None:
                continue
            if text.startswith("[DONE]"):
                self.done = True
                self._buffer = b""
                break
            try:
                chunk = self._payload(json.loads(text))
            except Exception as exc:
                # The chunks before it were read: they are delivered first, as the
                # `openai` client's stream does, one event at a time.
                self.error = exc
                self.done = True
                self._buffer = b""
                break
            if chunk is not None:
                out.append(chunk)
        return out

    def _payload(self, payload: JsonValue) -> Chunk | None:
        if not isinstance(payload, dict):
            self.mergeable = False
            self.raw.append({"value": payload})
            return None
        error = payload.get("error")
        if error:
            message = error.get("message") if isinstance(error, Mapping) else None
            if not message or not isinstance(message, str):
                message = "An error occurred during streaming"
            raise StreamError(message, error)
        self.raw.append(payload)
        if self._first is None:
            self._first = payload
        choices = payload.get("choices")
        if not choices:
            self._tail.append(payload)
            return None
        read: list[StreamChoice] = []
        tail = False
        for choice in choices:
            index = choice.get("index") or 0
            if (
                index != 0
                or choice.get("logprobs") is not None
                or not _CHOICE_KEYS.issuperset(choice)
            ):
                self.mergeable = False
            delta = choice.get("delta") or {}
            finish = choice.get("finish_reason")
            if finish is not None:
                self.finish_reason = finish
                tail = True
            read.append(StreamChoice(index, self._delta(delta), finish))
        if tail or "usage" in payload and payload["usage"] is not None:
            self._tail.append(payload)
        self.sent_choices = True
        return Chunk(payload, read)

    def _delta(self, delta: Mapping[str, JsonValue]) -> ChoiceDelta:
        if not _MERGED.issuperset(delta):
            for key, value in delta.items():
                if key not in _MERGED and value is not None and key != "refusal":
                    self.mergeable = False
        role = delta.get("role")
        if role is not None and self._role is None:
            self._role = role
        content = delta.get("content")
        if isinstance(content, str):
            if content:
                self._content.append(content)
            if len(content) > 2 and content == self._last_content:
                self.repeats += 1
            else:
                self.repeats = 1
            self._last_content = content
        else:
            self.repeats = 1
            self._last_content = None
            if content is not None:
                self.mergeable = False
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")  # litellm reads this name as the same
        if isinstance(reasoning, str):
            if reasoning:
                self._reasoning.append(reasoning)
        elif reasoning is not None:
            self.mergeable = False
        calls = delta.get("tool_calls")
        tool_calls = self._tool_calls(calls) if calls else None
        return ChoiceDelta(content, reasoning, role, tool_calls)

    def _tool_calls(self, calls: JsonValue) -> list[ToolCallDelta]:
        out: list[ToolCallDelta] = []
        if not isinstance(calls, list):
            self.mergeable = False
            return out
        for pos, call in enumerate(calls):
            if not isinstance(call, Mapping):
                self.mergeable = False
                continue
            index = call.get("index")
            if not isinstance(index, int):
                index = pos
            if not {"index", "id", "type", "function"}.issuperset(call):
                self.mergeable = False
            function = call.get("function")
            name = arguments = None
            if isinstance(function, Mapping):
                name, arguments = function.get("name"), function.get("arguments")
                if not {"name", "arguments"}.issuperset(function):
                    self.mergeable = False
            elif function is not None:
                self.mergeable = False
            merged = self._tools.get(index)
            if merged is None:
                merged = self._tools[index] = _ToolCall(call)
            if call.get("id"):
                if merged.id is not None and merged.id != call["id"]:
                    self.mergeable = False  # two calls at one index: litellm's to sort out
                merged.id = call["id"]
            if call.get("type"):
                merged.type = call["type"]
            if name:
                if merged.name is not None and merged.name != name:
                    self.mergeable = False
                merged.name = name
            if isinstance(arguments, str):
                if arguments:
                    merged.arguments.append(arguments)
            elif arguments is not None:
                self.mergeable = False
            out.append(
                ToolCallDelta(
                    index,
                    call.get("id"),
                    call.get("type"),
                    FunctionDelta(name, arguments) if function is not None else None,
                )
            )
        return out

    # ---------------------------------------------------------------- after the stream

    def text_so_far(self) -> str:
        """The reply's text read so far (what a cut stream's error carries)."""
        return "".join(self._content)

    def compacted(self) -> list[JsonObject]:
        """The reply as few payloads (see the module's docstring); `raw` when it cannot be."""
        if not self.mergeable or self._first is None:
            return self.raw
        return list(self._compacted())

    def _compacted(self) -> Iterator[JsonObject]:
        first = self._first
        assert first is not None
        header = {k: v for k, v in first.items() if k not in ("choices", "usage")}
        delta: JsonObject = {"role": self._role or "assistant"}
        if self._reasoning:
            delta["reasoning_content"] = "".join(self._reasoning)
        delta["content"] = "".join(self._content) if self._content else None
        if self._reasoning or self._content or not self._tools:
            yield _chunk(header, delta)
            delta = {}
        for index in sorted(self._tools):
            call = self._tools[index]
            function: JsonObject = {"arguments": "".join(call.arguments)}
            if call.name is not None:
                function["name"] = call.name
            tool: JsonObject = {"index": index, "function": function}
            if call.id is not None:
                tool["id"] = call.id
            if call.type is not None:
                tool["type"] = call.type
            yield _chunk(header, {**delta, "tool_calls": [tool]})
            delta = {}
        for payload in self._tail:
            choices = payload.get("choices")
            if choices:
                # Its delta's text, if any, is already in the chunks above.
                yield {
                    **payload,
                    "choices": [
                        {
                            **c,
                            "delta": {
                                k: v for k, v in (c.get("delta") or {}).items() if k not in _MERGED
                            },
                        }
                        for c in choices
                    ],
                }
            else:
                yield payload


def _chunk(header: Mapping[str, JsonValue], delta: JsonObject) -> JsonObject:
    return {
        **header,
        "choices": [{"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}],
    }


def _event_data(event: bytes) -> str | None:
    """The data of an SSE event in any of its forms; None for an event with nothing
    (comments only), as the `openai` client skips it."""
    data: list[str] = []
    named = False
    for raw_line in event.split(b"\n"):
        line = raw_line.decode()
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name in ("event", "id", "retry"):
            named = True
    if not data and not named:
        return None
    return "\n".join(data)
