"""Audio prompts: advertised and passed to the model (an OpenAI `input_audio` part) only
for a model litellm lists as taking audio; refused, naming the model, otherwise."""

from __future__ import annotations

import base64
import json
import os

import pytest
from test_models_auth_fork import with_raw

from _inprocess import agent_env
from trio_acp.openhands.sdk.audio import audio_refusal, supports_audio_input
from trio_acp.testing import scenario_prompt

CLIP = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()

#: A model litellm's map lists with `supports_audio_input` and no Responses API endpoint
#: (served by the scripted server).
AUDIO_MODEL = "openai/gpt-4o-audio-preview-2024-12-17"


def audio_prompt(text: str, mime: str = "audio/wav") -> list[dict]:
    return [{"type": "text", "text": text}, {"type": "audio", "mimeType": mime, "data": CLIP}]


async def call_prompt(raw, sid, blocks):
    return await raw.call("session/prompt", {"sessionId": sid, "prompt": blocks})


def test_the_lookup_agrees_with_litellm():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    models = [
        AUDIO_MODEL,
        "openai/gpt-audio",
        "gpt-audio",
        "gemini/gemini-2.5-flash",
        "openai/gpt-4o",
        "gpt-4o",
        "anthropic/claude-sonnet-4-5",
        "openai/scripted",
    ]
    for model in models:
        assert supports_audio_input(model) == litellm.supports_audio_input(model=model), model
    assert supports_audio_input(AUDIO_MODEL) and not supports_audio_input("openai/scripted")
    assert not supports_audio_input(None) and not supports_audio_input("")


def test_audio_is_refused_where_the_sdk_would_use_the_responses_api():
    # gpt-audio lists /v1/responses: the SDK's Responses serializer would turn the audio
    # part into text. With api_mode "chat" it goes through chat completions.
    assert "Responses API" in (audio_refusal("openai/gpt-audio") or "")
    assert audio_refusal("openai/gpt-audio", "chat") is None
    assert audio_refusal(AUDIO_MODEL) is None
    assert "Responses API" in (audio_refusal(AUDIO_MODEL, "responses") or "")
    assert "does not take audio" in (audio_refusal("openai/gpt-4o") or "")


async def test_a_model_without_audio_refuses_it_by_name(env, llm, tmp_path):
    async def body(raw, agent):
        init = await raw.initialize()
        assert init["agentCapabilities"]["promptCapabilities"]["audio"] is False
        sid = (await raw.new_session(tmp_path))["sessionId"]
        before = len(llm.requests)
        answer = await call_prompt(raw, sid, audio_prompt(scenario_prompt("echo", "hi")))
        assert answer["error"]["code"] == -32602
        assert "openai/scripted" in json.dumps(answer["error"])
        assert "audio" in json.dumps(answer["error"])
        assert len(llm.requests) == before  # the model was not called
        # The refused prompt holds nothing up: the next one runs.
        result, _ = await raw.prompt(sid, scenario_prompt("echo", "after"))
        assert result["stopReason"] == "end_turn"

    await with_raw(env, body)


@pytest.mark.parametrize(("mime", "fmt"), [("audio/wav", "wav"), ("audio/mpeg", "mp3")])
async def test_a_model_with_audio_hears_it(llm, tmp_path, mime, fmt):
    env = agent_env(llm, tmp_path / "home", LLM_MODEL=AUDIO_MODEL)

    async def body(raw, agent):
        init = await raw.initialize()
        assert init["agentCapabilities"]["promptCapabilities"]["audio"] is True
        sid = (await raw.new_session(tmp_path))["sessionId"]
        before = len(llm.requests)
        answer = await call_prompt(raw, sid, audio_prompt(scenario_prompt("echo", "hi"), mime))
        assert "result" in answer, answer
        assert answer["result"]["stopReason"] == "end_turn"
        user = [m for m in llm.requests[before].messages if m["role"] == "user"][-1]
        parts = user["content"]
        assert {"type": "input_audio", "input_audio": {"data": CLIP, "format": fmt}} in parts
        assert CLIP not in json.dumps(llm.requests[before].messages[0])  # not in system

    await with_raw(env, body)
