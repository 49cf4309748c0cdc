"""OpenHands SDK events and LLM stream chunks -> ACP `session/update` payloads.

Pure: no trio, no `openhands.*`, no litellm. SDK events and litellm `ModelResponseStream`
chunks are duck-typed (dispatch on `type(obj).__name__` along the MRO, then attributes), so
this module can be imported and tested without the 10 s SDK import.

One `Translator` per ACP session. It remembers what was streamed (per LLM response) and
which tool calls the client has been told about, so the durable SDK events that follow a
stream never repeat text and never update a tool call the client has not seen.

Decisions (see also the report in the commit that added this module):

* Message ids (`messageId`): the ACP schema only says "unique identifier for a message within a
  session" (the message-id RFD suggests UUIDs), so every id is a UUID5 in a fixed namespace.
  Derived from the LLM response id: the visible text of one response is one message
  (`<rid>/message`), its reasoning another (`<rid>/thought`): a thought and a reply are
  different messages, so they never share an id. The `finish` tool's message and the `think`
  tool's thought are messages of their own, keyed by tool call id. Live streaming, the
  durable events and `replay` all derive the same ids.
* Streaming: text/reasoning deltas go out as they come. A tool call is announced
  (`tool_call`, status pending) once its id and name are known; afterwards an update is sent
  only when a title-relevant argument (`command`, `path`, `view_range`, ...) has been
  completely received and changes title/kind/locations: never one update per fragment.
  Arguments are scanned incrementally (linear in their length). `finish` and `think` are not
  tool calls for the client: their `message`/`thought` argument is streamed as message /
  thought text as it arrives.
* The durable events then only add what was not streamed (the remainder when the streamed
  text is a prefix of the final one; nothing when they disagree, to never duplicate).
  An event is matched to its stream by `llm_response_id` (== chunk id on the Chat Completions
  path) and, failing that, by equal text with the latest unmatched stream.
* Quiet: PauseEvent / InterruptEvent (the client asked for it and gets stopReason
  `cancelled`), ConversationErrorEvent (the session turns it into a JSON-RPC error, see
  `conversation_error`), SystemPromptEvent, SecurityAnalysisEvent, TokenEvent,
  LLMCompletionLogEvent, HookExecutionEvent, state/streaming-delta events, and anything
  unknown (logged at debug). Condensation -> one short thought line.
* Compactions, for a client that advertised `session.compaction` (`compaction=True`): a
  CondensationRequest opens one (`compaction_update` in_progress, id = the request's event
  id); the Condensation completes it with the summary (a Condensation nobody requested, i.e.
  an automatic one, is one completed update under its own id); a ConversationErrorEvent
  fails it and an InterruptEvent cancels it. Replay sends completed compactions only.
* Large payloads: the text of one content block is capped at `MAX_TEXT_BYTES` (UTF-8), keeping
  head and tail around an explicit note saying how much was cut (and, for the terminal, the
  directory where the SDK keeps full outputs). Strings inside rawInput/rawOutput are capped at
  `MAX_RAW_STRING_BYTES`. A diff larger than the cap is replaced by a note.
* Terminal output and file views are sent as text content inside a Markdown code fence
  (clients render text content as Markdown), with ANSI escape sequences stripped.
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote, urlparse

import attrs

from .. import schema

log = logging.getLogger(__name__)

__all__ = [
    "MAX_RAW_STRING_BYTES",
    "MAX_TEXT_BYTES",
    "Translator",
    "coalesce",
    "conversation_error",
    "message_id",
    "present",
    "strip_ansi",
    "tool_family",
    "tool_locations",
]

SessionUpdate = Any

#: Cap on the text of one content block sent in one update (UTF-8 bytes).
MAX_TEXT_BYTES = 256 * 1024
#: Cap on one string inside rawInput / rawOutput (UTF-8 bytes).
MAX_RAW_STRING_BYTES = 16 * 1024

# Fixed namespace for every message id this module derives (uuid5).
_ID_NAMESPACE = uuid.UUID("5d0c8f64-8a1e-4c1b-9a57-3b0a2f6de1a4")


def message_id(key: str, part: str) -> str:
    """A stable UUID-formatted ACP messageId for `part` ("message", "thought", ...) of `key`."""
    return str(uuid.uuid5(_ID_NAMESPACE, f"{part}\x1f{key}"))


def conversation_error(event: Any) -> tuple[str, str] | None:
    """(code, detail) of a ConversationErrorEvent, None for any other event."""
    if not _is_a(event, "ConversationErrorEvent"):
        return None
    return str(getattr(event, "code", "") or ""), str(getattr(event, "detail", "") or "")


# --------------------------------------------------------------------------------------
# small helpers


def _names(obj: Any) -> list[str]:
    return [cls.__name__ for cls in type(obj).__mro__]


def _is_a(obj: Any, name: str) -> bool:
    return name in _names(obj)


_ANSI_RE = re.compile(
    r"""
      \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?     # OSC ... BEL/ST
    | \x1b[P^_X][^\x1b]*(?:\x1b\\)?          # DCS / PM / APC / SOS ... ST
    | \x1b\[[0-?]*[ -/]*[@-~]                # CSI
    | \x1b[ -/]*[0-~]                        # two-character and nF escapes
    | \x1b                                   # a stray ESC
    """,
    re.VERBOSE,
)


def strip_ansi(text: str) -> str:
    """Remove terminal escape sequences (colors, bracketed paste `ESC[?2004l`, titles)."""
    if "\x1b" in text:
        text = _ANSI_RE.sub("", text)
    return text.replace("\r\n", "\n")


def _utf8_len(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _cap_text(text: str, limit: int = MAX_TEXT_BYTES, *, where: str | None = None) -> str:
    """`text` if it fits in `limit` UTF-8 bytes, else head + explicit note + tail."""
    if len(text) * 4 <= limit:
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    budget = max(limit - 400, limit // 2)
    head_n = budget // 3
    tail_n = budget - head_n
    head = data[:head_n].decode("utf-8", "ignore")
    tail = data[len(data) - tail_n :].decode("utf-8", "ignore")
    cut = data[head_n : len(data) - tail_n]
    note = (
        f"\n\n[... output truncated: {len(cut)} of {len(data)} bytes "
        f"({cut.count(b'\n')} lines) omitted here"
    )
    if where:
        note += f"; the full output is saved under {where}"
    note += " ...]\n\n"
    return head + note + tail


def _cap_json(value: Any, limit: int = MAX_RAW_STRING_BYTES) -> Any:
    """Copy of a JSON-like value with every long string capped (rawInput / rawOutput)."""
    if isinstance(value, str):
        if _utf8_len(value) <= limit:
            return value
        return _cap_text(value, limit)
    if isinstance(value, dict):
        return {str(k): _cap_json(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cap_json(v, limit) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def _fence(text: str, info: str = "") -> str:
    """`text` in a Markdown code fence longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=0)
    fence = "`" * max(3, longest + 1)
    if not text.endswith("\n"):
        text += "\n"
    return f"{fence}{info}\n{text}{fence}"


def _text_of(obj: Any) -> str:
    """The text of an SDK Observation / Message-like content list."""
    text = getattr(obj, "text", None)
    if isinstance(text, str):
        return text
    return "".join(
        c.text
        for c in (getattr(obj, "content", None) or [])
        if isinstance(getattr(c, "text", None), str)
    )


def _reasoning_of(obj: Any) -> str:
    """Reasoning text of an ActionEvent or an LLM Message (reasoning_content, thinking blocks,
    or a Responses reasoning summary)."""
    text = getattr(obj, "reasoning_content", None)
    if isinstance(text, str) and text:
        return text
    blocks = getattr(obj, "thinking_blocks", None) or []
    thinking = "".join(b.thinking for b in blocks if isinstance(getattr(b, "thinking", None), str))
    if thinking:
        return thinking
    item = getattr(obj, "responses_reasoning_item", None)
    summary = getattr(item, "summary", None) if item is not None else None
    if summary:
        return "\n\n".join(s for s in summary if isinstance(s, str))
    return ""


def _data_url(url: str) -> tuple[str, str] | None:
    """(mime type, base64 data) of a base64 `data:` URL."""
    m = re.match(r"data:([^;,]*)((?:;[^;,]*)*);base64,(.*)\Z", url, re.DOTALL)
    if not m:
        return None
    return (m.group(1) or "application/octet-stream"), m.group(3)


# --------------------------------------------------------------------------------------
# schema constructors (all ACP objects are built here)


def _text(text: str) -> Any:
    return schema.TextContent(text=text)


def _image_block(url: str) -> Any:
    parsed = _data_url(url)
    if parsed is not None:
        mime, data = parsed
        return schema.ImageContent(data=data, mime_type=mime)
    name = url.rstrip("/").rsplit("/", 1)[-1] or url
    return schema.ResourceLink(uri=url, name=name)


def _content_item(block: Any) -> Any:
    return schema.Content(content=block)


def _text_item(text: str) -> Any:
    return _content_item(_text(text))


def _diff_item(path: str, old: str | None, new: str) -> Any:
    return schema.Diff(path=path, old_text=old, new_text=new)


def _location(path: str, line: int | None = None) -> Any:
    return schema.ToolCallLocation(path=path, line=line)


# --------------------------------------------------------------------------------------
# incremental scanner for streamed tool-call arguments

_S_START, _S_KEY_OR_END, _S_KEY, _S_COLON, _S_VALUE, _S_STRING = range(6)
_S_NESTED, _S_SCALAR, _S_AFTER, _S_DONE, _S_INVALID = range(6, 11)
_STR_SPECIAL = re.compile(r'["\\]')
_NESTED_SPECIAL = re.compile(r'["\\{}\[\]]')
_SCALAR_END = re.compile(r"[,}\s]")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"'}
_WS = " \t\r\n"


class _ArgScanner:
    """Scans a JSON object arriving in fragments, in time linear in its length.

    `fields` holds every top-level member received completely; while a top-level string
    value is arriving, its decoded text is reported piece by piece (`feed` returns the new
    pieces), so a long `message` can be streamed and a long `file_text` costs nothing extra.
    Anything that is not a JSON object makes the scanner give up quietly.
    """

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self._state = _S_START
        self._key_raw: list[str] = []
        self._key: str = ""
        self._pieces: list[str] = []  # decoded pieces of the string value being read
        self._raw: list[str] = []  # raw text of the nested/scalar value being read
        self._esc = False  # just saw a backslash
        self._uni: str | None = None  # \u digits collected so far
        self._high: int | None = None  # pending high surrogate
        self._depth = 0
        self._in_str = False  # nested value: inside a string

    def value_so_far(self, key: str) -> str | None:
        if key in self.fields:
            value = self.fields[key]
            return value if isinstance(value, str) else None
        if self._state == _S_STRING and self._key == key:
            return "".join(self._pieces)
        return None

    def feed(self, text: str) -> tuple[list[str], dict[str, str]]:
        """Consume a fragment: (keys completed by it, {key: newly decoded string text})."""
        completed: list[str] = []
        pieces: dict[str, list[str]] = {}
        i, n = 0, len(text)
        while i < n:
            state = self._state
            if state in (_S_DONE, _S_INVALID):
                break
            c = text[i]
            if state == _S_STRING:
                i = self._scan_string(text, i, completed, pieces)
            elif state == _S_NESTED:
                i = self._scan_nested(text, i, completed)
            elif state == _S_KEY:
                i = self._scan_key(text, i)
            elif c in _WS:
                if state == _S_SCALAR:
                    self._end_scalar(completed)
                i += 1
            elif state == _S_START:
                self._state = _S_KEY_OR_END if c == "{" else _S_INVALID
                i += 1
            elif state == _S_KEY_OR_END:
                if c == '"':
                    self._key_raw = []
                    self._state = _S_KEY
                elif c == "}":
                    self._state = _S_DONE
                elif c != ",":
                    self._state = _S_INVALID
                i += 1
            elif state == _S_COLON:
                self._state = _S_VALUE if c == ":" else _S_INVALID
                i += 1
            elif state == _S_VALUE:
                if c == '"':
                    self._pieces = []
                    self._state = _S_STRING
                elif c in "{[":
                    self._raw = [c]
                    self._depth = 1
                    self._in_str = False
                    self._state = _S_NESTED
                else:
                    self._raw = [c]
                    self._state = _S_SCALAR
                i += 1
            elif state == _S_SCALAR:
                m = _SCALAR_END.search(text, i)
                j = n if m is None else m.start()
                self._raw.append(text[i:j])
                i = j
                if m is not None:
                    self._end_scalar(completed)
            elif state == _S_AFTER:
                if c == ",":
                    self._state = _S_KEY_OR_END
                elif c == "}":
                    self._state = _S_DONE
                else:
                    self._state = _S_INVALID
                i += 1
        joined = {k: "".join(v) for k, v in pieces.items()}
        return completed, {k: v for k, v in joined.items() if v}

    # -- states ---------------------------------------------------------------------

    def _scan_key(self, text: str, i: int) -> int:
        n = len(text)
        while i < n:
            if self._esc:
                self._key_raw.append(text[i])
                self._esc = False
                i += 1
                continue
            m = _STR_SPECIAL.search(text, i)
            if m is None:
                self._key_raw.append(text[i:])
                return n
            j = m.start()
            self._key_raw.append(text[i:j])
            if text[j] == "\\":
                self._key_raw.append("\\")
                self._esc = True
                i = j + 1
                continue
            try:
                self._key = json.loads('"' + "".join(self._key_raw) + '"')
            except ValueError:
                self._state = _S_INVALID
                return n
            self._state = _S_COLON
            return j + 1
        return i

    def _emit(self, piece: str, pieces: dict[str, list[str]]) -> None:
        if self._high is not None:
            piece = "\ufffd" + piece
            self._high = None
        self._pieces.append(piece)
        pieces.setdefault(self._key, []).append(piece)

    def _scan_string(self, text: str, i: int, completed: list[str], pieces: dict) -> int:
        n = len(text)
        while i < n:
            if self._uni is not None:
                need = 4 - len(self._uni)
                got = text[i : i + need]
                self._uni += got
                i += len(got)
                if len(self._uni) < 4:
                    return i
                try:
                    code = int(self._uni, 16)
                except ValueError:
                    code = 0xFFFD
                self._uni = None
                if 0xD800 <= code < 0xDC00:
                    if self._high is not None:
                        self._emit("", pieces)
                    self._high = code
                elif 0xDC00 <= code < 0xE000 and self._high is not None:
                    combined = 0x10000 + ((self._high - 0xD800) << 10) + (code - 0xDC00)
                    self._high = None
                    self._emit(chr(combined), pieces)
                else:
                    self._emit(chr(code) if not 0xD800 <= code < 0xE000 else "\ufffd", pieces)
                continue
            if self._esc:
                self._esc = False
                c = text[i]
                i += 1
                if c == "u":
                    self._uni = ""
                else:
                    self._emit(_ESCAPES.get(c, c), pieces)
                continue
            m = _STR_SPECIAL.search(text, i)
            if m is None:
                self._emit(text[i:], pieces)
                return n
            j = m.start()
            if j > i:
                self._emit(text[i:j], pieces)
            if text[j] == "\\":
                self._esc = True
                i = j + 1
                continue
            # closing quote
            if self._high is not None:
                self._emit("", pieces)
            self.fields[self._key] = "".join(self._pieces)
            self._pieces = []
            completed.append(self._key)
            self._state = _S_AFTER
            return j + 1
        return i

    def _scan_nested(self, text: str, i: int, completed: list[str]) -> int:
        n = len(text)
        start = i
        while i < n:
            if self._esc:
                self._esc = False
                i += 1
                continue
            m = _NESTED_SPECIAL.search(text, i)
            if m is None:
                i = n
                break
            j = m.start()
            c = text[j]
            i = j + 1
            if c == "\\":
                if self._in_str:
                    self._esc = True
            elif c == '"':
                self._in_str = not self._in_str
            elif self._in_str:
                pass
            elif c in "{[":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 0:
                    self._raw.append(text[start:i])
                    self._finish_raw(completed)
                    return i
        self._raw.append(text[start:i])
        return i

    def _end_scalar(self, completed: list[str]) -> None:
        self._finish_raw(completed)

    def _finish_raw(self, completed: list[str]) -> None:
        raw = "".join(self._raw)
        self._raw = []
        try:
            self.fields[self._key] = json.loads(raw)
        except ValueError:
            self.fields[self._key] = raw
        completed.append(self._key)
        self._state = _S_AFTER


# --------------------------------------------------------------------------------------
# translator state


@attrs.define
class _Stream:
    """What was streamed for one LLM response."""

    rid: str
    text: list[str] = attrs.Factory(list)
    thought: list[str] = attrs.Factory(list)
    claimed: bool = False

    def streamed(self, part: str) -> str:
        return "".join(self.text if part == "message" else self.thought)


@attrs.define
class _PendingCall:
    """A tool call whose arguments are being streamed, keyed by (response id, index)."""

    rid: str
    index: int
    id: str | None = None
    name: str | None = None
    scanner: _ArgScanner = attrs.Factory(_ArgScanner)
    opened: bool = False


@attrs.define
class _Call:
    """A tool call as the client knows it, keyed by tool call id."""

    tool_call_id: str
    tool_name: str
    announced: bool = False
    finished: bool = False
    special: str | None = None  # "finish" / "think": shown as text, not as a tool call
    special_text: list[str] = attrs.Factory(list)  # finish/think text already streamed
    presentation: tuple[str, str, tuple[tuple[str, int | None], ...]] | None = None
    args: dict[str, Any] | None = None  # kept until the call finishes


# The `finish` and `think` tools are not tool calls for the client.
_SPECIAL_ARG = {"finish": "message", "think": "thought"}
_TERMINAL_TOOLS = {"terminal", "bash", "execute_bash"}
_EDITOR_TOOLS = {"file_editor", "str_replace_editor"}
_TASK_TOOLS = {"task_tracker"}
_TITLE_KEYS = {"command", "path", "view_range", "insert_line", "is_input", "reset"}
_EDITOR_VERBS = {
    "view": "Read",
    "create": "Create",
    "str_replace": "Edit",
    "insert": "Edit",
    "undo_edit": "Undo edit of",
}
_KIND_BY_TOOL = {"think": "think", "task": "other", "task_tool_set": "other"}
_PLAN_STATUS = {
    "todo": "pending",
    "pending": "pending",
    "in_progress": "in_progress",
    "done": "completed",
    "completed": "completed",
}
# Events that produce nothing, without a debug line each.
_QUIET_EVENTS = {
    "SystemPromptEvent",
    "SecurityAnalysisEvent",
    "TokenEvent",
    "LLMCompletionLogEvent",
    "HookExecutionEvent",
    "PauseEvent",
    "ConversationStateUpdateEvent",
    "StreamingDeltaEvent",
}
_MAX_STREAMS = 32


class Translator:
    """One per ACP session; stateful (what was streamed, which tool calls were announced).

    `token(chunk)` for each litellm stream chunk, `event(event)` for each SDK event, in the
    order the SDK produced them; `replay(events)` for a whole history (session/load).
    Each returns a list of schema session updates (possibly empty). Never raises on input
    it does not understand.
    """

    def __init__(
        self, cwd: str, *, is_dir: Callable[[str], bool] | None = None, compaction: bool = False
    ) -> None:
        self.cwd = cwd
        # Condensations as `compaction_update`s (the client advertised session.compaction)
        # rather than thought notes.
        self.compaction = compaction
        self._open_compaction: str | None = None
        # The status an action gets when the SDK produces it: "in_progress" when it runs
        # at once; "pending" when it may wait for the user's permission first (the session
        # then marks it in_progress once allowed).
        self.action_status = "in_progress"
        self._is_dir = is_dir if is_dir is not None else os.path.isdir
        self._replaying = False
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self._pending: dict[tuple[str, int], _PendingCall] = {}
        self._calls: dict[str, _Call] = {}

    # ---------------------------------------------------------------- streaming

    def token(self, chunk: Any) -> list[SessionUpdate]:
        """Updates for one litellm `ModelResponseStream` chunk (or a bare text delta)."""
        if isinstance(chunk, str):
            return self._text_delta("bare-text-stream", chunk, "message") if chunk else []
        rid = getattr(chunk, "id", None) or "unidentified-response"
        out: list[SessionUpdate] = []
        for choice in getattr(chunk, "choices", None) or []:
            if (getattr(choice, "index", 0) or 0) != 0:
                continue  # the SDK only uses the first choice
            delta = getattr(choice, "delta", None)
            if delta is None:
                continue
            reasoning = getattr(delta, "reasoning_content", None)
            if isinstance(reasoning, str) and reasoning:
                out += self._text_delta(rid, reasoning, "thought")
            content = getattr(delta, "content", None)
            if isinstance(content, str) and content:
                out += self._text_delta(rid, content, "message")
            for pos, tool_call in enumerate(getattr(delta, "tool_calls", None) or []):
                out += self._tool_call_delta(rid, pos, tool_call)
        return out

    def _stream(self, rid: str) -> _Stream:
        stream = self._streams.get(rid)
        if stream is None:
            stream = self._streams[rid] = _Stream(rid)
            while len(self._streams) > _MAX_STREAMS:
                self._streams.popitem(last=False)
        return stream

    def _text_delta(self, rid: str, text: str, part: str) -> list[SessionUpdate]:
        stream = self._stream(rid)
        (stream.text if part == "message" else stream.thought).append(text)
        return [self._chunk(part, text, message_id(rid, part))]

    @staticmethod
    def _chunk(part: str, text: str, mid: str) -> SessionUpdate:
        cls = schema.AgentMessageChunk if part == "message" else schema.AgentThoughtChunk
        return cls(content=_text(text), message_id=mid)

    def _tool_call_delta(self, rid: str, pos: int, tool_call: Any) -> list[SessionUpdate]:
        index = getattr(tool_call, "index", None)
        if not isinstance(index, int):
            index = pos
        key = (rid, index)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = _PendingCall(rid, index)
        call_id = getattr(tool_call, "id", None)
        if call_id and pending.id is None:
            pending.id = str(call_id)
        function = getattr(tool_call, "function", None)
        name = getattr(function, "name", None) if function is not None else None
        if name and pending.name is None:
            pending.name = str(name)
        args = getattr(function, "arguments", None) if function is not None else None
        completed: list[str] = []
        pieces: dict[str, str] = {}
        if isinstance(args, str) and args:
            completed, pieces = pending.scanner.feed(args)

        if not pending.opened:
            if pending.id is None or pending.name is None:
                return []
            pending.opened = True
            return self._open_streamed_call(pending)
        call = self._calls.get(pending.id or "")
        if call is None or call.finished:
            return []
        if call.special is not None:
            text = pieces.get(_SPECIAL_ARG[call.special])
            return self._special_text(call, text) if text else []
        if call.announced and any(k in _TITLE_KEYS for k in completed):
            presentation = self._present(call.tool_name, pending.scanner.fields, None)
            if presentation != call.presentation:
                return [self._presentation_update(call, presentation)]
        return []

    def _open_streamed_call(self, pending: _PendingCall) -> list[SessionUpdate]:
        assert pending.id is not None and pending.name is not None
        call = self._calls.get(pending.id)
        if call is not None:  # already known (a repeated id): leave it alone
            return []
        call = self._calls[pending.id] = _Call(pending.id, pending.name)
        if pending.name in _SPECIAL_ARG:
            call.special = pending.name
            text = pending.scanner.value_so_far(_SPECIAL_ARG[pending.name])
            return self._special_text(call, text) if text else []
        fields = pending.scanner.fields
        presentation = self._present(pending.name, fields, None)
        call.announced = True
        call.presentation = presentation
        title, kind, locations = presentation
        return [
            schema.ToolCallStart(
                tool_call_id=pending.id,
                title=title,
                kind=kind,
                name=pending.name,
                status="pending",
                locations=[_location(p, line) for p, line in locations] or None,
                raw_input=_cap_json(dict(fields)),
            )
        ]

    def _special_text(self, call: _Call, text: str) -> list[SessionUpdate]:
        call.special_text.append(text)
        part = "message" if call.special == "finish" else "thought"
        return [self._chunk(part, text, message_id(call.tool_call_id, call.special or ""))]

    def _presentation_update(self, call: _Call, presentation: tuple) -> SessionUpdate:
        title, kind, locations = presentation
        had_locations = bool(call.presentation and call.presentation[2])
        call.presentation = presentation
        return schema.ToolCallProgress(
            tool_call_id=call.tool_call_id,
            title=title,
            kind=kind,
            locations=[_location(p, line) for p, line in locations]
            if (locations or had_locations)
            else None,
        )

    # ---------------------------------------------------------------- events

    def event(self, event: Any) -> list[SessionUpdate]:
        """Updates for one SDK event (live: text already streamed is not repeated)."""
        for name in _names(event):
            handler = _HANDLERS.get(name)
            if handler is not None:
                return handler(self, event)
            if name in _QUIET_EVENTS:
                return []
        log.debug("no ACP update for SDK event %s", type(event).__name__)
        return []

    def replay(self, events: Iterable[Any]) -> list[SessionUpdate]:
        """The whole history for session/load: user messages as user_message_chunk, the rest
        as live but without streaming state; one `tool_call` per tool call carrying its final
        state (pending if it never ran). Afterwards this translator knows the replayed tool
        calls, so live events about them become updates."""
        fresh = Translator(self.cwd, is_dir=self._is_dir, compaction=self.compaction)
        fresh._replaying = True
        out: list[SessionUpdate] = []
        for event in events:
            try:
                out += fresh.event(event)
            except Exception:
                log.exception("replaying SDK event %s failed", type(event).__name__)
        for call_id, call in fresh._calls.items():
            self._calls.setdefault(call_id, call)
        return _fold_tool_calls(out)

    def fail_open_tool_calls(self, reason: str = "Interrupted.") -> list[SessionUpdate]:
        """`failed` updates for every announced tool call that never finished (e.g. after a
        cancelled turn whose stream was cut before the SDK produced the action); forgets
        half-streamed calls."""
        out: list[SessionUpdate] = []
        for call in self._calls.values():
            if call.announced and not call.finished:
                call.finished = True
                call.args = None
                out.append(
                    schema.ToolCallProgress(
                        tool_call_id=call.tool_call_id,
                        status="failed",
                        content=[_text_item(reason)] if reason else None,
                    )
                )
        self._pending.clear()
        out += self.end_compaction("failed", reason or None)
        return out

    def end_compaction(self, status: str, error: str | None = None) -> list[SessionUpdate]:
        """Close the compaction in progress, if any, with `status` ("failed", "cancelled")."""
        cid, self._open_compaction = self._open_compaction, None
        if cid is None or not self.compaction or self._replaying:
            return []
        return [schema.CompactionUpdate(compaction_id=cid, status=status, error=error)]

    # -- text of events --------------------------------------------------------------

    def _claim_stream(self, rid: str | None, text: str, thought: str) -> _Stream | None:
        if self._replaying:
            return None
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

    def _final_text(
        self, stream: _Stream | None, key: str, final: str, part: str
    ) -> list[SessionUpdate]:
        """What is left to send of the final `part` text of a response."""
        if not final:
            return []
        streamed = stream.streamed(part) if stream is not None else ""
        mid = message_id(stream.rid if stream is not None else key, part)
        if not streamed:
            return [self._chunk(part, final, mid)]
        if final == streamed:
            return []
        if final.startswith(streamed):
            return [self._chunk(part, final[len(streamed) :], mid)]
        log.debug("streamed %s differs from the final one; not repeating it", part)
        return []

    def _response_text(self, rid: str | None, key: str, text: str, thought: str) -> list:
        stream = self._claim_stream(rid, text, thought)
        return self._final_text(stream, key, thought, "thought") + self._final_text(
            stream, key, text, "message"
        )

    # -- handlers ----------------------------------------------------------------------

    def _on_message(self, event: Any) -> list[SessionUpdate]:
        message = getattr(event, "llm_message", None)
        role = getattr(message, "role", None)
        source = getattr(event, "source", None)
        contents = list(getattr(message, "content", None) or [])
        if role == "user" or source == "user":
            if not self._replaying:
                return []  # the client sent it
            return self._user_chunks(event, contents)
        if role != "assistant" and source != "agent":
            return []
        rid = getattr(event, "llm_response_id", None)
        key = rid or str(getattr(event, "id", ""))
        text = "".join(c.text for c in contents if isinstance(getattr(c, "text", None), str))
        out = self._response_text(rid, key, text, _reasoning_of(message))
        for c in contents:
            for url in getattr(c, "image_urls", None) or []:
                out.append(
                    schema.AgentMessageChunk(
                        content=_image_block(url), message_id=message_id(key, "message")
                    )
                )
        return out

    def _user_chunks(self, event: Any, contents: list) -> list[SessionUpdate]:
        event_id = str(getattr(event, "id", ""))
        try:
            mid = str(uuid.UUID(event_id))
        except ValueError:
            mid = message_id(event_id, "user")
        out: list[SessionUpdate] = []
        for c in contents:
            text = getattr(c, "text", None)
            if isinstance(text, str):
                if text:
                    out.append(schema.UserMessageChunk(content=_text(text), message_id=mid))
                continue
            for url in getattr(c, "image_urls", None) or []:
                out.append(schema.UserMessageChunk(content=_image_block(url), message_id=mid))
        return out

    def _on_action(self, event: Any) -> list[SessionUpdate]:
        rid = getattr(event, "llm_response_id", None)
        key = rid or str(getattr(event, "id", ""))
        thought = "".join(
            t.text
            for t in (getattr(event, "thought", None) or [])
            if isinstance(getattr(t, "text", None), str)
        )
        out = self._response_text(rid, key, thought, _reasoning_of(event))

        call_id = str(getattr(event, "tool_call_id", "") or "")
        tool = str(getattr(event, "tool_name", "") or "")
        action = getattr(event, "action", None)
        # The response is complete once its actions arrive: forget its streamed calls.
        for k in [k for k, p in self._pending.items() if p.id == call_id or p.rid == rid]:
            del self._pending[k]
        call = self._calls.get(call_id)

        special = None
        if tool in _SPECIAL_ARG or (action is not None and _is_a(action, "FinishAction")):
            special = "finish" if tool == "finish" or _is_a(action, "FinishAction") else "think"
        elif action is not None and _is_a(action, "ThinkAction"):
            special = "think"
        if special is not None and action is not None:
            final = getattr(action, _SPECIAL_ARG[special], None)
            final = final if isinstance(final, str) else ""
            if call is None:
                call = self._calls[call_id] = _Call(call_id, tool)
            part = "message" if special == "finish" else "thought"
            streamed = "".join(call.special_text)
            mid = message_id(call_id, special)
            if not streamed and final:
                out.append(self._chunk(part, final, mid))
            elif final != streamed and final.startswith(streamed):
                out.append(self._chunk(part, final[len(streamed) :], mid))
            if call.announced and not call.finished:  # streamed under another name
                out.append(schema.ToolCallProgress(tool_call_id=call_id, status="completed"))
            call.special = special
            call.finished = True
            return out

        args = _arguments_of(event)
        presentation = self._present(tool, args, getattr(event, "summary", None))
        title, kind, locations = presentation
        status = "pending" if self._replaying else self.action_status
        if call is not None and call.announced and not call.finished:
            had_locations = bool(call.presentation and call.presentation[2])
            out.append(
                schema.ToolCallProgress(
                    tool_call_id=call_id,
                    title=title,
                    kind=kind,
                    name=tool if tool != call.tool_name else None,
                    status=status,
                    locations=[_location(p, line) for p, line in locations]
                    if (locations or had_locations)
                    else None,
                    raw_input=_cap_json(args),
                )
            )
            call.tool_name = tool
        else:
            call = self._calls[call_id] = _Call(call_id, tool, announced=True)
            out.append(
                schema.ToolCallStart(
                    tool_call_id=call_id,
                    title=title,
                    kind=kind,
                    name=tool or None,
                    status=status,
                    locations=[_location(p, line) for p, line in locations] or None,
                    raw_input=_cap_json(args),
                )
            )
        call.presentation = presentation
        call.args = args
        return out

    def _on_observation(self, event: Any) -> list[SessionUpdate]:
        call_id = str(getattr(event, "tool_call_id", "") or "")
        tool = str(getattr(event, "tool_name", "") or "")
        observation = getattr(event, "observation", None)
        call = self._calls.get(call_id)
        if observation is None or tool in _SPECIAL_ARG:
            return []
        if call is not None and call.special is not None:
            return []
        if _is_a(observation, "FinishObservation") or _is_a(observation, "ThinkObservation"):
            return []
        failed = bool(getattr(observation, "is_error", False))
        args = (call.args if call is not None else None) or {}
        names = _names(observation)
        extra: list[SessionUpdate] = []
        locations = None
        if "TerminalObservation" in names or tool in _TERMINAL_TOOLS:
            content, raw_output = self._terminal_payload(observation)
        elif "FileEditorObservation" in names or tool in _EDITOR_TOOLS:
            content, raw_output, locations = self._editor_payload(observation, args)
        elif "TaskTrackerObservation" in names or tool in _TASK_TOOLS:
            content, raw_output = self._generic_payload(observation)
            extra = self._plan(observation)
        else:
            content, raw_output = self._generic_payload(observation)
        status = "failed" if failed else "completed"
        return [self._complete(call_id, tool, call, status, content, raw_output, locations)] + extra

    def _on_agent_error(self, event: Any) -> list[SessionUpdate]:
        error = str(getattr(event, "error", "") or "The tool call failed.")
        call_id = str(getattr(event, "tool_call_id", "") or "")
        tool = str(getattr(event, "tool_name", "") or "")
        call = self._calls.get(call_id)
        if call is not None and call.special is not None and not call.announced:
            # A finish/think call that failed (bad arguments): it is a tool call after all.
            call.special = None
        content = [_text_item(_cap_text(error))]
        return [self._complete(call_id, tool, call, "failed", content, None, None)]

    def _on_reject(self, event: Any) -> list[SessionUpdate]:
        reason = str(getattr(event, "rejection_reason", "") or "Rejected.")
        source = getattr(event, "rejection_source", "user")
        text = f"Blocked by a hook: {reason}" if source == "hook" else f"Rejected: {reason}"
        call_id = str(getattr(event, "tool_call_id", "") or "")
        tool = str(getattr(event, "tool_name", "") or "")
        call = self._calls.get(call_id)
        if call is not None and call.special is not None and not call.announced:
            call.special = None
        return [self._complete(call_id, tool, call, "failed", [_text_item(text)], None, None)]

    def _on_condensation_request(self, event: Any) -> list[SessionUpdate]:
        if not self.compaction:
            return []
        cid = self._open_compaction = str(getattr(event, "id", "") or uuid.uuid4())
        if self._replaying:
            return []  # only its outcome is history
        return [schema.CompactionUpdate(compaction_id=cid, status="in_progress")]

    def _on_conversation_error(self, event: Any) -> list[SessionUpdate]:
        # The turn's error itself goes out as the prompt's JSON-RPC error (see session.py).
        detail = str(getattr(event, "detail", "") or getattr(event, "code", "") or "")
        return self.end_compaction("failed", _cap_text(detail, MAX_RAW_STRING_BYTES) or None)

    def _on_interrupt(self, event: Any) -> list[SessionUpdate]:
        return self.end_compaction("cancelled")

    def _on_condensation(self, event: Any) -> list[SessionUpdate]:
        if self.compaction:
            cid, self._open_compaction = self._open_compaction, None
            summary = getattr(event, "summary", None)
            text = _cap_text(summary) if isinstance(summary, str) and summary else None
            return [
                schema.CompactionUpdate(
                    compaction_id=cid or str(getattr(event, "id", "") or uuid.uuid4()),
                    status="completed",
                    summary=[_text(text)] if text else None,
                )
            ]
        forgotten = getattr(event, "forgotten_event_ids", None)
        if _is_a(event, "Condensation") and forgotten is not None:
            text = f"(conversation condensed: {len(forgotten)} events summarized)"
        else:
            text = "(conversation condensed)"
        mid = message_id(str(getattr(event, "id", "")), "condensation")
        return [self._chunk("thought", text, mid)]

    # -- tool call completion -------------------------------------------------------------

    def _complete(
        self,
        call_id: str,
        tool: str,
        call: _Call | None,
        status: str,
        content: list | None,
        raw_output: Any,
        locations: list[tuple[str, int | None]] | None,
    ) -> SessionUpdate:
        loc_objs = [_location(p, line) for p, line in locations] if locations else None
        if call is not None and call.announced:
            call.finished = True
            call.args = None
            return schema.ToolCallProgress(
                tool_call_id=call_id,
                status=status,
                content=content,
                locations=loc_objs,
                raw_output=raw_output,
            )
        # Never announced (history starting mid-way, or a call the SDK rejected before
        # making an action): one tool_call carrying the final state.
        args = call.args if call is not None and call.args else {}
        title, kind, presented = self._present(tool or "tool", args, None)
        if call is None:
            call = self._calls[call_id] = _Call(call_id, tool)
        call.announced = True
        call.finished = True
        call.args = None
        return schema.ToolCallStart(
            tool_call_id=call_id,
            title=title,
            kind=kind,
            name=tool or None,
            status=status,
            content=content,
            locations=loc_objs or [_location(p, line) for p, line in presented] or None,
            raw_input=_cap_json(args) if args else None,
            raw_output=raw_output,
        )

    def _terminal_payload(self, observation: Any) -> tuple[list | None, Any]:
        text = strip_ansi(_text_of(observation))
        metadata = getattr(observation, "metadata", None)
        exit_code = getattr(observation, "exit_code", None)
        if exit_code is None:
            exit_code = getattr(metadata, "exit_code", None)
        timed_out = bool(getattr(observation, "timeout", False))
        if exit_code == -1 or timed_out:
            note = "[the command is still running; no exit code yet]"
        elif isinstance(exit_code, int) and exit_code != 0:
            note = f"[exit code {exit_code}]"
        else:
            note = ""
        save_dir = getattr(observation, "full_output_save_dir", None)
        content = None
        if text.strip():
            where = save_dir if isinstance(save_dir, str) else None
            text = _cap_text(text, MAX_TEXT_BYTES - 64, where=where)
            content = [_text_item(_fence(text, "console") + (f"\n\n{note}" if note else ""))]
        elif note:
            content = [_text_item(note)]
        raw_output: dict[str, Any] = {"exit_code": exit_code}
        if timed_out:
            raw_output["timed_out"] = True
        working_dir = getattr(metadata, "working_dir", None)
        if isinstance(working_dir, str) and working_dir:
            raw_output["working_dir"] = working_dir
        return content, raw_output

    def _editor_payload(
        self, observation: Any, args: dict[str, Any]
    ) -> tuple[list | None, Any, list[tuple[str, int | None]] | None]:
        command = getattr(observation, "command", None) or args.get("command")
        raw_path = getattr(observation, "path", None) or args.get("path")
        path = self._abs(raw_path)
        new = getattr(observation, "new_content", None)
        old = getattr(observation, "old_content", None)
        failed = bool(getattr(observation, "is_error", False))
        if not failed and command != "view" and path and isinstance(new, str):
            existed = getattr(observation, "prev_exist", True)
            old_text = old if isinstance(old, str) and existed else None
            line = _edit_line(command, args, new)
            locations = [(path, line)]
            size = _utf8_len(new) + (_utf8_len(old_text) if old_text else 0)
            if size > MAX_TEXT_BYTES:
                note = (
                    f"(diff of {path} not shown: {size} bytes is over the "
                    f"{MAX_TEXT_BYTES}-byte limit of one update)\n\n{_text_of(observation)}"
                )
                return [_text_item(_cap_text(note))], None, locations
            return [_diff_item(path, old_text, new)], None, locations
        text = strip_ansi(_text_of(observation))
        if not text.strip():
            return None, None, None
        if command == "view" and not failed:
            return [_text_item(_fence(_cap_text(text, MAX_TEXT_BYTES - 64)))], None, None
        return [_text_item(_cap_text(text))], None, None

    def _generic_payload(self, observation: Any) -> tuple[list | None, Any]:
        items: list = []
        texts: list[str] = []
        for c in getattr(observation, "content", None) or []:
            text = getattr(c, "text", None)
            if isinstance(text, str):
                texts.append(text)
                continue
            for url in getattr(c, "image_urls", None) or []:
                items.append(_content_item(_image_block(url)))
        text = "".join(texts)
        if text.strip():
            items.insert(0, _text_item(_cap_text(text)))
        return items or None, None

    def _plan(self, observation: Any) -> list[SessionUpdate]:
        tasks = getattr(observation, "task_list", None)
        command = getattr(observation, "command", None)
        if tasks is None or getattr(observation, "is_error", False):
            return []
        if not tasks and command != "plan":
            return []
        entries = [
            schema.PlanEntry(
                content=str(getattr(t, "title", "") or ""),
                priority="medium",
                status=_PLAN_STATUS.get(str(getattr(t, "status", "todo")), "pending"),
            )
            for t in tasks
        ]
        return [schema.AgentPlanUpdate(entries=entries)]

    # -- presentation -----------------------------------------------------------------------

    def _abs(self, path: Any) -> str | None:
        return _abs_path(self.cwd, path)

    def _present(
        self, tool: str, args: dict[str, Any], summary: str | None
    ) -> tuple[str, str, tuple[tuple[str, int | None], ...]]:
        return present(tool, args, summary, cwd=self.cwd, is_dir=self._is_dir)


def present(
    tool: str,
    args: dict[str, Any],
    summary: str | None = None,
    *,
    cwd: str,
    is_dir: Callable[[str], bool] = os.path.isdir,
) -> tuple[str, str, tuple[tuple[str, int | None], ...]]:
    """(title, kind, locations) of a tool call with (possibly partial) arguments.

    The one place that says how a tool call looks to the client: the `tool_call` updates
    and the `session/request_permission` preview (`confirm.py`) both use it, so a request
    for permission shows the same title, kind and locations as the tool call it is about.
    `locations` are (absolute path, 1-based line or None) pairs.
    """
    if tool in _TERMINAL_TOOLS:
        command = args.get("command")
        if args.get("reset") is True:
            title = "Reset the terminal"
        elif args.get("is_input") is True:
            title = f"Send input to the running process: {command}" if command else "Send input"
        elif isinstance(command, str) and command.strip():
            title = command
        elif command == "":
            title = "Read more terminal output"
        else:
            title = "Run a terminal command"
        return title, "execute", ()
    if tool in _EDITOR_TOOLS:
        command = args.get("command")
        path = _abs_path(cwd, args.get("path"))
        verb = _EDITOR_VERBS.get(command) if isinstance(command, str) else None
        if command == "view":
            kind = "read"
        elif verb is not None:
            kind = "edit"
        else:
            kind = "other"
        if path is None:
            return (f"{verb} a file" if verb else "File editor"), kind, ()
        title = f"{verb or 'File editor:'} {path}"
        line = None
        view_range = args.get("view_range")
        if command == "view" and isinstance(view_range, list) and view_range:
            start = view_range[0]
            end = view_range[1] if len(view_range) > 1 else None
            if isinstance(start, int) and start >= 1:
                line = start
                if isinstance(end, int) and end >= start:
                    title += f" (lines {start}-{end})"
                else:
                    title += f" (from line {start})"
        insert_line = args.get("insert_line")
        if command == "insert" and isinstance(insert_line, int) and insert_line >= 0:
            line = insert_line + 1
        if command == "view" and (path.endswith(os.sep) or _is_dir_safe(is_dir, path)):
            return f"List {path}", kind, ()
        return title, kind, ((path, line),)
    if tool in _TASK_TOOLS:
        command = args.get("command")
        if command == "plan":
            tasks = args.get("task_list")
            n = len(tasks) if isinstance(tasks, list) else None
            title = f"Update the plan ({n} tasks)" if n is not None else "Update the plan"
            return title, "think", ()
        return ("View the plan" if command == "view" else "Plan"), "think", ()
    kind = _KIND_BY_TOOL.get(tool)
    if kind is None:
        kind = "fetch" if tool.startswith("browser") else "other"
    if isinstance(summary, str) and summary.strip() and not summary.startswith(f"{tool}:"):
        return summary.strip(), kind, ()
    return tool or "tool", kind, ()


def tool_family(tool: str) -> str | None:
    """"terminal", "file_editor" or "task_tracker" for those tools under any of their names
    (the legacy `bash`, `execute_bash`, `str_replace_editor` too), else None."""
    if tool in _TERMINAL_TOOLS:
        return "terminal"
    if tool in _EDITOR_TOOLS:
        return "file_editor"
    if tool in _TASK_TOOLS:
        return "task_tracker"
    return None


def tool_locations(locations: Iterable[tuple[str, int | None]]) -> list[Any] | None:
    """ACP `ToolCallLocation`s of `present`'s locations (None when there are none)."""
    return [_location(p, line) for p, line in locations] or None


def _abs_path(cwd: str, path: Any) -> str | None:
    if not isinstance(path, str) or not path.strip():
        return None
    if path.startswith("file://"):
        path = file_uri_to_path(path)
    if not os.path.isabs(path):
        path = os.path.join(cwd, path)
    return os.path.normpath(path)


def _is_dir_safe(is_dir: Callable[[str], bool], path: str) -> bool:
    try:
        return bool(is_dir(path))
    except Exception:
        return False


def _arguments_of(event: Any) -> dict[str, Any]:
    """The tool call's arguments as a dict (the normalized JSON of the SDK's tool call)."""
    tool_call = getattr(event, "tool_call", None)
    arguments = getattr(tool_call, "arguments", None)
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    action = getattr(event, "action", None)
    dump = getattr(action, "model_dump", None)
    if callable(dump):
        try:
            dumped = dump(mode="json", exclude_none=True)
            if isinstance(dumped, dict):
                dumped.pop("kind", None)
                return dumped
        except Exception:
            pass
    return {"arguments": arguments} if isinstance(arguments, str) else {}


def _edit_line(command: Any, args: dict[str, Any], new: str) -> int | None:
    """1-based line where an edit landed, when the arguments tell."""
    if command == "insert":
        insert_line = args.get("insert_line")
        return insert_line + 1 if isinstance(insert_line, int) and insert_line >= 0 else None
    if command == "str_replace":
        new_str = args.get("new_str")
        if isinstance(new_str, str) and new_str:
            at = new.find(new_str)
            if at >= 0:
                return new.count("\n", 0, at) + 1
    if command == "create":
        return 1
    return None


def file_uri_to_path(uri: str) -> str:
    """Local path of a `file://` URI (percent-decoded; `/C:/x` -> `C:/x`; host -> UNC)."""
    parsed = urlparse(uri)
    path = unquote(parsed.path)
    if re.match(r"/[A-Za-z]:[/\\]", path) or re.match(r"/[A-Za-z]:\Z", path):
        path = path[1:]
    if parsed.netloc and parsed.netloc not in ("localhost",):
        path = f"//{parsed.netloc}{path}"
    return path


_HANDLERS: dict[str, Callable[[Translator, Any], list]] = {
    "MessageEvent": Translator._on_message,
    "ActionEvent": Translator._on_action,
    "ObservationEvent": Translator._on_observation,
    "AgentErrorEvent": Translator._on_agent_error,
    "UserRejectObservation": Translator._on_reject,
    "Condensation": Translator._on_condensation,
    "CondensationSummaryEvent": Translator._on_condensation,
    "CondensationRequest": Translator._on_condensation_request,
    "ConversationErrorEvent": Translator._on_conversation_error,
    "InterruptEvent": Translator._on_interrupt,
}


# --------------------------------------------------------------------------------------
# post-processing


_TOOL_FIELDS = ("title", "kind", "status", "content", "locations", "raw_input", "raw_output")


def _fold_tool_calls(updates: list) -> list:
    """Fold every tool_call_update into the tool_call announcing it (replay: one tool_call
    per call, with its final state, at the position it was announced). Updates for calls
    never announced are dropped."""
    out: list = []
    where: dict[str, int] = {}
    for update in updates:
        if isinstance(update, schema.ToolCallStart):
            where[update.tool_call_id] = len(out)
            out.append(update)
        elif isinstance(update, schema.ToolCallProgress):
            at = where.get(update.tool_call_id)
            if at is None:
                log.debug("dropping an update for unannounced tool call %s", update.tool_call_id)
                continue
            changes = {
                f: getattr(update, f) for f in _TOOL_FIELDS if getattr(update, f, None) is not None
            }
            out[at] = attrs.evolve(out[at], **changes)
        else:
            out.append(update)
    return out


def coalesce(updates: list) -> list:
    """Merge runs of AgentMessageChunk (and of AgentThoughtChunk) with the same message_id
    and plain text content into one chunk each, preserving order; the rest is untouched."""
    out: list = []
    run: list = []

    def flush() -> None:
        if not run:
            return
        if len(run) == 1:
            out.append(run[0])
        else:
            first = run[0]
            text = "".join(u.content.text for u in run)
            out.append(attrs.evolve(first, content=attrs.evolve(first.content, text=text)))
        run.clear()

    for update in updates:
        if _mergeable(update) and run and _same_message(run[-1], update):
            run.append(update)
            continue
        flush()
        if _mergeable(update):
            run.append(update)
        else:
            out.append(update)
    flush()
    return out


def _mergeable(update: Any) -> bool:
    return (
        type(update) in (schema.AgentMessageChunk, schema.AgentThoughtChunk)
        and type(update.content) is schema.TextContent
        and getattr(update, "meta", None) is None
        and getattr(update.content, "annotations", None) is None
        and getattr(update.content, "meta", None) is None
    )


def _same_message(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a.message_id == b.message_id
