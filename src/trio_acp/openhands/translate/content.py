"""ACP content blocks and the SDK objects they come from.

Reading (duck-typed, no SDK import): the class names along an object's MRO, the text of an
observation or message, the reasoning of an action or message, `data:` URLs. Building:
every ACP content block, tool call content item and location the translator sends is made
here. Pure: no trio, no `openhands.*`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from trio_acp import schema
from trio_acp.openhands.translate.shapes import SdkObject

__all__ = [
    "class_names",
    "content_item",
    "data_url",
    "diff_item",
    "image_block",
    "is_a",
    "location",
    "reasoning_of",
    "text_block",
    "text_item",
    "text_of",
    "tool_locations",
]


def class_names(obj: SdkObject) -> tuple[str, ...]:
    """The class names along `obj`'s MRO (SDK objects are recognized by name)."""
    cls = type(obj)
    names = _MRO_NAMES.get(cls)
    if names is None:
        # A stored event's view (sdk/stored_events.py) bears its SDK class's names.
        names = getattr(cls, "sdk_class_names", None) or tuple(c.__name__ for c in cls.__mro__)
        if len(_MRO_NAMES) >= _MRO_NAMES_KEPT:
            _MRO_NAMES.clear()  # the SDK makes classes at run time (an MCP tool's action)
        _MRO_NAMES[cls] = names
    return names


# Per class: replaying a long history asks about twice per event.
_MRO_NAMES: dict[type, tuple[str, ...]] = {}
_MRO_NAMES_KEPT = 512


def is_a(obj: SdkObject, name: str) -> bool:
    return name in class_names(obj)


def text_of(obj: SdkObject) -> str:
    """The text of an SDK Observation / Message-like content list."""
    text = getattr(obj, "text", None)
    if isinstance(text, str):
        return text
    return "".join(
        c.text
        for c in (getattr(obj, "content", None) or [])
        if isinstance(getattr(c, "text", None), str)
    )


def reasoning_of(obj: SdkObject) -> str:
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


def data_url(url: str) -> tuple[str, str] | None:
    """(mime type, base64 data) of a base64 `data:` URL."""
    m = re.match(r"data:([^;,]*)((?:;[^;,]*)*);base64,(.*)\Z", url, re.DOTALL)
    if not m:
        return None
    return (m.group(1) or "application/octet-stream"), m.group(3)


# --------------------------------------------------------------------------------------
# content blocks, tool call content and locations


def text_block(text: str) -> schema.TextContent:
    return schema.TextContent(text=text)


def image_block(url: str) -> schema.ImageContent | schema.ResourceLink:
    parsed = data_url(url)
    if parsed is not None:
        mime, data = parsed
        return schema.ImageContent(data=data, mime_type=mime)
    name = url.rstrip("/").rsplit("/", 1)[-1] or url
    return schema.ResourceLink(uri=url, name=name)


def content_item(block: schema.ContentBlock) -> schema.Content:
    return schema.Content(content=block)


def text_item(text: str) -> schema.Content:
    return content_item(text_block(text))


def diff_item(path: str, old: str | None, new: str) -> schema.Diff:
    return schema.Diff(path=path, old_text=old, new_text=new)


def location(path: str, line: int | None = None) -> schema.ToolCallLocation:
    return schema.ToolCallLocation(path=path, line=line)


# --------------------------------------------------------------------------------------


def tool_locations(
    locations: Iterable[tuple[str, int | None]],
) -> list[schema.ToolCallLocation] | None:
    """ACP `ToolCallLocation`s of (path, line) pairs (None when there are none)."""
    return [location(p, line) for p, line in locations] or None
