"""Text for the client: size caps, ANSI stripping, Markdown fences, one-line summaries.

Pure string functions (no schema objects): every translated text goes through `cap_text`
so one update never carries more than `MAX_TEXT_BYTES`, and every one-line message (a
notice, an error detail, a resource description) through `one_line`.
"""

from __future__ import annotations

import re

from trio_acp.openhands.translate.shapes import JsonValue

__all__ = [
    "MAX_RAW_STRING_BYTES",
    "MAX_TEXT_BYTES",
    "cap_json",
    "cap_text",
    "clean_title",
    "fence",
    "one_line",
    "strip_ansi",
    "utf8_len",
]

#: Cap on the text of one content block sent in one update (UTF-8 bytes).
MAX_TEXT_BYTES = 256 * 1024
#: Cap on one string inside rawInput / rawOutput (UTF-8 bytes).
MAX_RAW_STRING_BYTES = 16 * 1024


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


#: The longest session title shown, in characters: one line of a session list.
MAX_TITLE_CHARS = 200

# What a title never shows: control characters (C0, DEL, C1), the bidirectional controls
# that reorder what follows them on screen, and lone surrogates (which are not UTF-8: a
# frame carrying one cannot be encoded at all).
_UNSHOWN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def clean_title(text: str, limit: int = MAX_TITLE_CHARS) -> str | None:
    """`text` fit to be one line of a session list: terminal escapes and control
    characters gone, whitespace folded, at most `limit` characters (cut with "…");
    None if nothing is left. Titles come from files anyone may have written
    (store.py): a hand-edited index, another client's conversation."""
    # What could be shown is in the head: a 5 MB title of escape codes costs no more.
    text = text[: limit * 16]
    text = _UNSHOWN.sub(" ", strip_ansi(text)) if not text.isprintable() else text
    folded = " ".join(text.split())
    if len(folded) > limit:
        folded = folded[: limit - 1].rstrip() + "…"
    return folded or None


def utf8_len(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def cap_text(text: str, limit: int = MAX_TEXT_BYTES, *, where: str | None = None) -> str:
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


def cap_json(value: JsonValue, limit: int = MAX_RAW_STRING_BYTES) -> JsonValue:
    """Copy of a JSON-like value with every long string capped (rawInput / rawOutput)."""
    if isinstance(value, str):
        # Most strings are far below the cap, and a character is at most 4 bytes: only
        # a long non-ASCII one needs encoding to be measured (replaying a long history
        # measured every file an editor call wrote: a third of the replay's time).
        if len(value) * 4 <= limit:
            return value
        return cap_text(value, limit)
    if isinstance(value, dict):
        return {str(k): cap_json(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [cap_json(v, limit) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def fence(text: str, info: str = "") -> str:
    """`text` in a Markdown code fence longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`{3,}", text)), default=0)
    fence = "`" * max(3, longest + 1)
    if not text.endswith("\n"):
        text += "\n"
    return f"{fence}{info}\n{text}{fence}"


def one_line(text: object, limit: int | None = None) -> str:
    """`text` with every run of whitespace (newlines too) folded to one space, at most
    `limit` characters long (no limit when None)."""
    folded = " ".join(str(text).split())
    return folded if limit is None else folded[:limit]


def title_from_prompt(text: str) -> str | None:
    """A session's title from its first prompt's text (None: nothing to name it by)."""
    # Scenario tags and the like are noise in a title; the first real words are not.
    words = " ".join(re.sub(r"\[[^\]\n]*\]", " ", text).split())
    if not words:
        return None
    return words if len(words) <= 80 else words[:79].rstrip() + "…"
