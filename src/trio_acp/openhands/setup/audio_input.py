"""Audio prompts: advertised, and taken, only for a model that takes audio input.

`promptCapabilities.audio` follows the configured default model (`initialize` cannot know
which model a session will switch to); a prompt's audio blocks are checked against the
model the session runs with at that moment, and refused (-32602, naming the model and
why) when it takes no audio, rather than dropped: the user would otherwise believe the
model heard it. Which models take audio is litellm's knowledge (`audio_models.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from trio_acp.openhands.setup.audio_models import audio_refusal
from trio_acp.openhands.translate.prompt import has_audio
from trio_acp.openhands.translate.shapes import JsonObject, JsonValue
from trio_acp.rpc import RequestError

if TYPE_CHECKING:
    from trio_acp.openhands.setup.models import ModelChoice


def model_fields(choice_id: str, choices: Iterable[ModelChoice]) -> JsonObject:
    """The LLM fields (model name, api_mode) of the session's model choice
    (`setup/models.py`); a profile's are in its file: its id stands for its model."""
    for choice in choices:
        if choice.id == choice_id and choice.fields and choice.fields.get("model"):
            return dict(choice.fields)
    return {"model": choice_id}


def check_audio(blocks: Iterable[object], fields: Mapping[str, JsonValue]) -> None:
    """Refuse a prompt with audio that cannot reach the session's model."""
    if not has_audio(blocks):
        return
    refusal = audio_refusal(fields.get("model"), fields.get("api_mode"))
    if refusal is not None:
        raise RequestError.invalid_params(
            f"this prompt has audio, but {refusal}; send a transcript instead, or choose "
            "a model that takes audio"
        )
