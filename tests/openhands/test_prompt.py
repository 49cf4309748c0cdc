"""prompt_to_parts: ACP prompt content blocks -> SDK-ready text and image parts."""

from __future__ import annotations

import base64

from trio_acp import schema
from trio_acp.openhands.translate.prompt import (
    AudioPart,
    ImagePart,
    TextPart,
    has_audio,
    prompt_to_parts,
)


def test_text_blocks():
    parts = prompt_to_parts([schema.TextContent(text="hello"), schema.TextContent(text="")])
    assert parts == [TextPart("hello")]


def test_wire_dicts_are_accepted_too():
    assert prompt_to_parts([{"type": "text", "text": "hi"}]) == [TextPart("hi")]
    (part,) = prompt_to_parts([{"type": "image", "data": "AAAA", "mimeType": "image/jpeg"}])
    assert part == ImagePart("data:image/jpeg;base64,AAAA")


def test_images_become_data_urls_or_urls():
    parts = prompt_to_parts(
        [
            schema.ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
            schema.ImageContent(data="", mime_type="image/png", uri="https://example.com/a.png"),
        ]
    )
    assert parts == [
        ImagePart("data:image/png;base64,iVBORw0KGgo="),
        ImagePart("https://example.com/a.png"),
    ]


def test_resource_link_names_the_resource_and_its_local_path():
    (part,) = prompt_to_parts(
        [
            schema.ResourceLink(
                uri="file:///home/me/My%20Project/main.py",
                name="main.py",
                mime_type="text/x-python",
                size=1234,
            )
        ]
    )
    assert isinstance(part, TextPart)
    text = part.text
    assert "main.py" in text and "path: /home/me/My Project/main.py" in text
    assert "uri: file:///home/me/My%20Project/main.py" in text
    assert "text/x-python" in text and "1234 bytes" in text


def test_resource_link_windows_and_remote_uris():
    (win,) = prompt_to_parts([schema.ResourceLink(uri="file:///C:/src/a.c", name="a.c")])
    assert "path: C:/src/a.c" in win.text
    (remote,) = prompt_to_parts([schema.ResourceLink(uri="https://example.com/spec", name="spec")])
    assert "uri: https://example.com/spec" in remote.text and "path:" not in remote.text


def test_embedded_text_resource_is_wrapped_with_its_uri():
    block = schema.EmbeddedResource(
        resource=schema.TextResourceContents(
            uri="file:///p/notes.md", text='# Notes\nsome "text"', mime_type="text/markdown"
        )
    )
    (part,) = prompt_to_parts([block])
    assert part.text.startswith(
        '<resource uri="file:///p/notes.md" path="/p/notes.md" mime_type="text/markdown">\n'
    )
    assert part.text.endswith('# Notes\nsome "text"\n</resource>')


def test_embedded_blobs():
    png = base64.b64encode(b"\x89PNG fake").decode()
    parts = prompt_to_parts(
        [
            schema.EmbeddedResource(
                resource=schema.BlobResourceContents(
                    uri="file:///p/x.png", blob=png, mime_type="image/png"
                )
            )
        ]
    )
    assert parts[-1] == ImagePart(f"data:image/png;base64,{png}")
    blob = base64.b64encode(bytes(1000)).decode()
    (note,) = prompt_to_parts(
        [
            schema.EmbeddedResource(
                resource=schema.BlobResourceContents(
                    uri="file:///p/a.bin", blob=blob, mime_type="application/octet-stream"
                )
            )
        ]
    )
    assert "file:///p/a.bin" in note.text and "application/octet-stream" in note.text
    assert "1000 bytes" in note.text and blob not in note.text


def test_audio_and_unknown_blocks_become_notes():
    parts = prompt_to_parts(
        [
            # A format `input_audio` has no name for (wav and mp3 only).
            schema.AudioContent(data=base64.b64encode(b"abc").decode(), mime_type="audio/ogg"),
            schema.UnknownVariant(tag="video", data={"type": "video"}),
            {"type": "hologram"},
            42,
        ]
    )
    assert all(isinstance(p, TextPart) for p in parts) and len(parts) == 4
    assert "audio/ogg" in parts[0].text and "only wav and mp3" in parts[0].text
    assert "video" in parts[1].text
    assert "hologram" in parts[2].text


def test_wav_and_mp3_audio_become_audio_parts():
    data = base64.b64encode(b"RIFF....WAVE").decode()
    parts = prompt_to_parts(
        [
            {"type": "text", "text": "listen"},
            schema.AudioContent(data=data, mime_type="audio/wav"),
            {"type": "audio", "mimeType": "audio/mpeg", "data": data},
        ]
    )
    assert parts[0] == TextPart("listen")
    assert [(p.data, p.format) for p in parts[1:]] == [(data, "wav"), (data, "mp3")]
    assert all(isinstance(p, AudioPart) and "audio/" in p.label for p in parts[1:])
    assert has_audio([{"type": "audio"}]) and not has_audio([{"type": "text", "text": "x"}])


def test_order_is_preserved():
    parts = prompt_to_parts(
        [
            schema.TextContent(text="look:"),
            schema.ImageContent(data="AAAA", mime_type="image/png"),
            schema.TextContent(text="thanks"),
        ]
    )
    assert [type(p) for p in parts] == [TextPart, ImagePart, TextPart]


def test_adjacent_text_parts_merge_into_one_and_images_stay_in_place():
    from trio_acp.openhands.translate.prompt import merge_text

    parts = prompt_to_parts(
        [schema.TextContent(text=f"b{i}") for i in range(1000)]
        + [
            schema.ImageContent(data="AAAA", mime_type="image/png"),
            schema.TextContent(text="after"),
            schema.ResourceLink(uri="file:///p/a.c", name="a.c"),
        ]
    )
    merged = merge_text(parts)
    assert merged[0] == TextPart("\n".join(f"b{i}" for i in range(1000)))
    assert merged[1] == ImagePart("data:image/png;base64,AAAA")
    assert len(merged) == 3 and merged[2].text.startswith("after\n[Referenced resource: a.c")
    assert merge_text([]) == [] and merge_text([ImagePart("u")]) == [ImagePart("u")]


def test_the_sdk_message_gets_one_text_content_per_run_of_text():
    from types import SimpleNamespace

    from trio_acp.openhands.backends.conversation import user_message

    sdk = SimpleNamespace(
        TextContent=lambda text: ("text", text),
        ImageContent=lambda image_urls: ("image", image_urls),
        Message=lambda role, content: (role, content),
    )
    parts = [TextPart("a"), TextPart("b"), ImagePart("u"), TextPart("c")]
    assert user_message(sdk, parts) == ("user", [("text", "a\nb"), ("image", ["u"]), ("text", "c")])
