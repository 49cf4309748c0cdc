"""Audio prompts: which models take audio input, and the SDK content part that carries it.

- `supports_audio_input(model)`: litellm's own answer (its model map's
  `supports_audio_input`), read from the map file litellm ships rather than by importing
  litellm: `initialize` answers at once (docs/ARCHITECTURE.md#d3-an-instant-initialize)
  while the import still runs, and must advertise `promptCapabilities.audio` already.
  The lookup is litellm's for the names users configure (`provider/model` or a bare
  name); tests/openhands/test_audio.py holds it to `litellm.supports_audio_input`.
- `audio_content(...)`: the SDK's `Message` takes only `TextContent | ImageContent`; an
  audio clip goes in as a `TextContent` subclass whose model form is the OpenAI
  `input_audio` part. Its text (what is stored with the conversation, what a reloaded
  history shows) is a short label: the clip's bytes stay in memory, not on disk, so after
  a reload the model sees the label.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: The map litellm reads under LITELLM_LOCAL_MODEL_COST_MAP (set by sdk/__init__.py).
_MAP_FILE = "model_prices_and_context_window_backup.json"


@functools.cache
def _model_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")  # finds the package without importing it
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        return {}
    try:
        data = json.loads((Path(next(iter(locations))) / _MAP_FILE).read_bytes())
    except (OSError, ValueError):
        log.warning("could not read litellm's model map", exc_info=True)
        return {}
    return data if isinstance(data, dict) else {}


def supports_audio_input(model: str | None) -> bool:
    """Whether litellm lists `model` (as configured: `openai/gpt-audio`, ...) as taking
    audio input. Unknown models do not (litellm says the same)."""
    return any(entry.get("supports_audio_input") is True for entry in _entries(model))


def audio_refusal(model: str | None, api_mode: str | None = None) -> str | None:
    """Why a prompt's audio cannot reach `model` through this agent, or None if it can.

    Two reasons: litellm does not list the model as taking audio; or the SDK would send
    the request through the OpenAI Responses API (its `LLM.uses_responses_api`: the
    `api_mode` setting, else the model's listed endpoints), whose serializer turns every
    text part, so our audio part too, into `input_text`: the model would get the label.
    """
    if not supports_audio_input(model):
        return f"the model {model!r} does not take audio input (litellm does not list it as such)"
    mode = api_mode or "auto"
    if mode == "auto":
        endpoints = [e.get("supported_endpoints") for e in _entries(model)]
        responses = any(isinstance(e, list) and "/v1/responses" in e for e in endpoints)
    else:
        responses = mode == "responses"
    if responses:
        return (
            f"the model {model!r} is called through the OpenAI Responses API, which carries "
            'no audio from this agent (set its "api_mode" to "chat" to send audio)'
        )
    return None


def _entries(model: str | None) -> list[dict[str, Any]]:
    """litellm's map entries for a configured model name (with or without provider)."""
    if not model:
        return []
    table = _model_map()
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    found = [table.get(name) for name in candidates]
    return [entry for entry in found if isinstance(entry, dict)]


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


def audio_content(data: str, audio_format: str, label: str) -> Any:
    """The SDK content part for a base64 clip in `audio_format` (wav, mp3)."""
    part = _audio_class()(text=label)
    part._data = data
    part._format = audio_format
    return part
