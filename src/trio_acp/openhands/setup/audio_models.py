"""Which models take audio input: litellm's own answer (its model map's
`supports_audio_input`), read from the map file litellm ships rather than by importing
litellm: `initialize` answers at once (docs/ARCHITECTURE.md#d3-an-instant-initialize)
while the import still runs, and must advertise `promptCapabilities.audio` already. Light
(no SDK, no Trio), so that `initialize` is answered before the agent is imported
(`openhands/front.py`). The lookup is litellm's for the names users configure
(`provider/model` or a bare name); tests/openhands/test_audio.py holds it to
`litellm.supports_audio_input`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from collections.abc import Mapping
from pathlib import Path

from trio_acp.openhands.setup.settings import SettingsError, load_settings
from trio_acp.openhands.translate.shapes import JsonObject

log = logging.getLogger(__name__)

#: The map litellm reads under LITELLM_LOCAL_MODEL_COST_MAP (set by sdk/__init__.py).
_MAP_FILE = "model_prices_and_context_window_backup.json"


@functools.cache
def _model_map() -> JsonObject:  # litellm's JSON file
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


def _entries(model: str | None) -> list[JsonObject]:
    """litellm's map entries for a configured model name (with or without provider)."""
    if not model:
        return []
    table = _model_map()
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    found = [table.get(name) for name in candidates]
    return [entry for entry in found if isinstance(entry, dict)]


def default_model_takes_audio(env: Mapping[str, str] | None) -> bool:
    """`promptCapabilities.audio`: whether the configured default model takes audio."""
    try:
        settings = load_settings(env)
    except SettingsError:
        return False
    llm = settings.llm or {}
    return audio_refusal(llm.get("model"), llm.get("api_mode")) is None
