"""Audio prompts: which models take audio input, and the SDK content part that carries it.

- `supports_audio_input(model)`, `audio_refusal(...)`: which models take audio
  (`setup/audio_models.py`, light: read to answer `initialize`).
- `audio_content(...)`: the SDK's `Message` takes only `TextContent | ImageContent`; an
  audio clip goes in as a `TextContent` subclass whose model form is the OpenAI
  `input_audio` part. Its text (what is stored with the conversation, what a reloaded
  history shows) is a short label: the clip's bytes stay in memory, not on disk, so after
  a reload the model sees the label.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

# Where they were before `initialize` needed them light (tests/openhands/test_audio.py).
from trio_acp.openhands.setup.audio_models import audio_refusal as audio_refusal
from trio_acp.openhands.setup.audio_models import supports_audio_input as supports_audio_input

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import TextContent


@functools.cache
def _audio_class() -> type:
    from openhands.sdk.llm import TextContent
    from pydantic import PrivateAttr

    class AudioContent(TextContent):
        """An audio clip: stored as its label, sent as an `input_audio` part."""

        _data: str = PrivateAttr(default="")
        _format: str = PrivateAttr(default="wav")

        def to_llm_dict(self) -> list[dict[str, str | dict[str, str]]]:
            if not self._data:  # a copy that lost its clip: the label, as stored
                return super().to_llm_dict()
            return [
                {"type": "input_audio", "input_audio": {"data": self._data, "format": self._format}}
            ]

    return AudioContent


def audio_content(data: str, audio_format: str, label: str) -> TextContent:
    """The SDK content part for a base64 clip in `audio_format` (wav, mp3)."""
    part = _audio_class()(text=label)
    part._data = data
    part._format = audio_format
    return part
