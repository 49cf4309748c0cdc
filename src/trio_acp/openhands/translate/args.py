"""A tool call's arguments: parsed once, here, for everyone who needs them.

* `ArgScanner` reads arguments while they stream (a JSON object arriving in fragments);
* `tool_arguments` reads them from a finished SDK `ActionEvent` (or a JSON string).

The translator (titles, rawInput), the permission request (`confirm.py`: preview, rawInput)
and the "always" rules (`permissions.py`: rule scope) all use `tool_arguments`, so they
never disagree about what a tool call asked for. Pure: no trio, no SDK import.
"""

from __future__ import annotations

import json
import re

from trio_acp.openhands.translate.shapes import JsonValue, SdkObject, ToolArgs

__all__ = ["ArgScanner", "tool_arguments"]


def tool_arguments(source: SdkObject) -> ToolArgs:
    """The arguments of a tool call as a dict.

    `source` is an SDK `ActionEvent` (duck-typed: the normalized JSON of its `tool_call`,
    else the dump of its `action`), or the JSON text of the arguments. Never raises:
    arguments that are not a JSON object come back as `{"arguments": text}`, none as {}.
    """
    if isinstance(source, str):
        arguments: JsonValue = source
        action = None
    else:
        arguments = getattr(getattr(source, "tool_call", None), "arguments", None)
        action = getattr(source, "action", None)
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
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


# --------------------------------------------------------------------------------------
# incremental scanner for streamed tool-call arguments

_S_START, _S_KEY_OR_END, _S_KEY, _S_COLON, _S_VALUE, _S_STRING = range(6)
_S_NESTED, _S_SCALAR, _S_AFTER, _S_DONE, _S_INVALID = range(6, 11)
_STR_SPECIAL = re.compile(r'["\\]')
_NESTED_SPECIAL = re.compile(r'["\\{}\[\]]')
_SCALAR_END = re.compile(r"[,}\s]")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"'}
_WS = " \t\r\n"


class ArgScanner:
    """Scans a JSON object arriving in fragments, in time linear in its length.

    `fields` holds every top-level member received completely; while a top-level string
    value is arriving, its decoded text is reported piece by piece (`feed` returns the new
    pieces), so a long `message` can be streamed and a long `file_text` costs nothing extra.
    Anything that is not a JSON object makes the scanner give up quietly.
    """

    def __init__(self) -> None:
        self.fields: ToolArgs = {}
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

    def _scan_string(
        self, text: str, i: int, completed: list[str], pieces: dict[str, list[str]]
    ) -> int:
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
