"""ACP prompt content blocks -> parts of an OpenHands user message.

Pure (no trio, no `openhands.*`): the session turns `TextPart` into the SDK's `TextContent`
and `ImagePart` into `ImageContent(image_urls=[url])`. Blocks may be `trio_acp.schema`
objects or their wire dicts (`{"type": "text", "text": ...}`); anything unexpected becomes a
short note for the model, never an exception.

* text -> the text;
* image -> an image part (a base64 `data:` URL, or the block's uri when it has no data);
* resource_link -> one line naming the resource (name, uri, local path for `file://`,
  mime type, size) so the model can open it with its tools; the content is not fetched;
* embedded text resource -> the text inside `<resource uri=... path=...>...</resource>`;
* embedded blob -> an image part for image mime types, else a note with uri, mime type
  and size (binary data is never pasted into the prompt);
* audio -> an audio part (wav or mp3, from the mime type), sent to the model as an
  `input_audio` part; the agent advertises audio and takes such blocks only for a model
  that takes audio (`sdk/audio.py`; `agent.py` refuses them otherwise, naming the model).
  Another audio format becomes a note;
* unknown -> a note naming the block type.

`merge_text` then joins adjacent text parts into one, separated by a newline, for the
SDK message (`conversation.user_message`). The SDK keeps the message in the history and
deep-copies every content part on every model call: a prompt of 10,000 text blocks made
every later call of the session seconds slower (bench/README.md, "Hostile input"). A newline
is what the SDK's own string serializer puts between text parts, so a model served as a
string sees exactly what it saw before; images stay where they were, between the texts.
A reloaded session replays the prompt as its merged text (blocks separated by newlines).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
from collections.abc import Iterable

import attrs

from trio_acp.openhands.translate.paths import local_path
from trio_acp.openhands.translate.text import one_line

log = logging.getLogger(__name__)

__all__ = [
    "AUDIO_FORMATS",
    "AudioPart",
    "ImagePart",
    "TextPart",
    "has_audio",
    "merge_text",
    "prompt_to_parts",
]

#: The OpenAI `input_audio` formats, by the prompt block's mime type.
AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}


@attrs.frozen
class TextPart:
    text: str


@attrs.frozen
class ImagePart:
    """An image for the model: a `data:<mime>;base64,<data>` URL or a fetchable URL."""

    url: str


@attrs.frozen
class AudioPart:
    """An audio clip for the model: base64 `data` in an `input_audio` `format`; `label` is
    what is stored and replayed in its place."""

    data: str = attrs.field(repr=False)
    format: str
    label: str


_TYPE_BY_CLASS = {
    "TextContent": "text",
    "ImageContent": "image",
    "AudioContent": "audio",
    "ResourceLink": "resource_link",
    "EmbeddedResource": "resource",
}


def has_audio(blocks: Iterable[object]) -> bool:
    """Whether the prompt carries an audio block."""
    return any(_kind(block) == "audio" for block in blocks or [])


def prompt_to_parts(blocks: Iterable[object]) -> list[TextPart | ImagePart | AudioPart]:
    """Convert ACP prompt content blocks into SDK-ready parts, in order."""
    parts: list[TextPart | ImagePart | AudioPart] = []
    for block in blocks or []:
        try:
            parts.extend(_convert(block))
        except Exception:  # a malformed block costs a note, never the prompt
            log.debug("could not convert prompt block %r", block, exc_info=True)
            note = f"[a prompt attachment of type {_kind(block)!r} could not be read]"
            parts.append(TextPart(note))
    return parts


def merge_text(
    parts: Iterable[TextPart | ImagePart | AudioPart],
) -> list[TextPart | ImagePart | AudioPart]:
    """`parts` with every run of adjacent text parts joined into one (newline-separated)."""
    merged: list[TextPart | ImagePart | AudioPart] = []
    run: list[str] = []
    for part in parts:
        if isinstance(part, TextPart):
            run.append(part.text)
            continue
        if run:
            merged.append(TextPart("\n".join(run)))
            run = []
        merged.append(part)
    if run:
        merged.append(TextPart("\n".join(run)))
    return merged


def _get(obj: object, *names: str) -> object:
    for name in names:
        if isinstance(obj, dict):
            if name in obj:
                return obj[name]
        else:
            value = getattr(obj, name, None)
            if value is not None:
                return value
    return None


def _kind(block: object) -> str:
    if isinstance(block, dict):
        return str(block.get("type", "unknown"))
    name = type(block).__name__
    if name in _TYPE_BY_CLASS:
        return _TYPE_BY_CLASS[name]
    tag = getattr(block, "tag", None) or getattr(block, "type", None)  # UnknownVariant
    return str(tag) if isinstance(tag, str) else name


def _convert(block: object) -> list[TextPart | ImagePart | AudioPart]:
    kind = _kind(block)
    if kind == "text":
        text = _get(block, "text")
        return [TextPart(text)] if isinstance(text, str) and text else []
    if kind == "image":
        return _image(block)
    if kind == "audio":
        return _audio(block)
    if kind == "resource_link":
        return [TextPart(_resource_link_line(block))]
    if kind == "resource":
        return _embedded(_get(block, "resource"))
    return [TextPart(f"[an unsupported prompt attachment of type {kind!r} was omitted]")]


def _image(block: object) -> list[TextPart | ImagePart | AudioPart]:
    data = _get(block, "data")
    mime = _get(block, "mime_type", "mimeType") or "image/png"
    uri = _get(block, "uri")
    if isinstance(data, str) and data:
        return [ImagePart(f"data:{mime};base64,{data}")]
    if isinstance(uri, str) and re.match(r"(https?|data):", uri):
        return [ImagePart(uri)]
    if isinstance(uri, str) and uri:
        return [TextPart(f"[an image attachment without data was omitted: {uri}]")]
    return [TextPart("[an empty image attachment was omitted]")]


def _resource_link_line(block: object) -> str:
    uri = str(_get(block, "uri") or "")
    name = _get(block, "name") or _get(block, "title") or uri
    details = []
    path = local_path(uri)
    if path:
        details.append(f"path: {path}")
    details.append(f"uri: {uri}")
    mime = _get(block, "mime_type", "mimeType")
    if mime:
        details.append(f"type: {mime}")
    size = _get(block, "size")
    if isinstance(size, int):
        details.append(f"size: {size} bytes")
    title = _get(block, "title")
    if title and title != name:
        details.append(f"title: {title}")
    description = _get(block, "description")
    if description:
        details.append(f"description: {one_line(str(description))}")
    if path:
        hint = "read it with your tools if you need its content"
    else:
        hint = "its content is not attached"
    return f"[Referenced resource: {name} ({'; '.join(details)}) - {hint}]"


def _embedded(resource: object) -> list[TextPart | ImagePart | AudioPart]:
    if resource is None:
        return [TextPart("[an empty embedded resource was omitted]")]
    uri = str(_get(resource, "uri") or "")
    mime = _get(resource, "mime_type", "mimeType")
    text = _get(resource, "text")
    if isinstance(text, str):
        attrs_ = [f'uri="{_attr(uri)}"']
        path = local_path(uri)
        if path:
            attrs_.append(f'path="{_attr(path)}"')
        if mime:
            attrs_.append(f'mime_type="{_attr(str(mime))}"')
        body = text if text.endswith("\n") or not text else text + "\n"
        return [TextPart(f"<resource {' '.join(attrs_)}>\n{body}</resource>")]
    blob = _get(resource, "blob")
    if isinstance(blob, str):
        if isinstance(mime, str) and mime.startswith("image/") and blob:
            return [TextPart(f"[Attached image: {uri}]"), ImagePart(f"data:{mime};base64,{blob}")]
        size = _b64_size(blob)
        path = local_path(uri)
        where = f" (path: {path})" if path else ""
        return [
            TextPart(
                f"[Attached binary resource not shown: {uri}{where}, "
                f"type {mime or 'unknown'}{_size_note(size)}]"
            )
        ]
    return [TextPart(f"[an embedded resource without content was omitted: {uri}]")]


def _audio(block: object) -> list[TextPart | ImagePart | AudioPart]:
    mime = _get(block, "mime_type", "mimeType") or "audio"
    data = _get(block, "data")
    size = _b64_size(data)
    audio_format = AUDIO_FORMATS.get(str(mime).lower())
    if audio_format is None or not isinstance(data, str) or not size:
        return [
            TextPart(
                f"[an audio attachment ({mime}{_size_note(size)}) was omitted: "
                "only wav and mp3 audio can be passed to the model]"
            )
        ]
    return [AudioPart(data.strip(), audio_format, f"[audio clip ({mime}{_size_note(size)})]")]


def _b64_size(data: object) -> int | None:
    if not isinstance(data, str):
        return None
    stripped = data.strip()
    try:
        # Exact for valid base64; cheap: the size is derived, not decoded, for long data.
        if len(stripped) <= 4096:
            return len(base64.b64decode(stripped, validate=False))
    except (binascii.Error, ValueError):
        pass
    return len(stripped) * 3 // 4 - stripped[-2:].count("=")


def _size_note(size: int | None) -> str:
    return f", {size} bytes" if size is not None else ""


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
