"""The condenser's token counts, each message counted once (sdk/token_counts.py).

The count must be the SDK's own, to the token (the condenser decides on it when to
summarize), for every kind of message and with or without tools; and a history that grew
by a message must encode only that message's text again.
"""

from __future__ import annotations

import pytest
from litellm.litellm_core_utils import token_counter as litellm_counter
from openhands.sdk import LLM, Message, TextContent
from openhands.sdk.llm import MessageToolCall
from openhands.sdk.tool.builtins import FinishTool, ThinkTool

from trio_acp.openhands.sdk import (
    loaded,  # noqa: F401  (the SDK door, as sessions load it)
    token_counts,
)
from trio_acp.openhands.sdk.llm import SessionLLM

FIELDS = {
    "model": "openai/scripted",
    "base_url": "http://127.0.0.1:9",
    "api_key": "scripted",
    "usage_id": "agent",
    "max_input_tokens": 1_000_000,
}


@pytest.fixture(autouse=True)
def _fresh():
    token_counts.forget()
    yield
    token_counts.forget()


def _history(turns: int, tag: str = "") -> list[Message]:
    """A system prompt, then per turn: the user, a tool call, its result, a reply."""
    messages = [Message(role="system", content=[TextContent(text=f"You are terse. {tag}")])]
    for i in range(turns):
        call = MessageToolCall(
            id=f"call-{tag}-{i}",
            name="think",
            arguments=f'{{"thought": "step {i} of {tag}: ' + "why " * (20 + i) + '"}',
            origin="completion",
        )
        messages += [
            Message(role="user", content=[TextContent(text=f"question {i} {tag} " * (5 + i))]),
            Message(
                role="assistant",
                content=[TextContent(text=f"let me think {i}")],
                tool_calls=[call],
                reasoning_content=f"reasoning {i} " * 3,
            ),
            Message(
                role="tool",
                tool_call_id=call.id,
                name="think",
                content=[TextContent(text=f"observed {i}: " + "ok " * (30 + i))],
            ),
            Message(
                role="assistant",
                content=[TextContent(text=f"answer {i} {tag}: " + "word " * (200 + 17 * i))],
            ),
        ]
    return messages


def _tools():
    return [*FinishTool.create(), *ThinkTool.create()]


@pytest.mark.parametrize("with_tools", [False, True])
@pytest.mark.parametrize("risk", [False, True])
@pytest.mark.parametrize("with_system", [True, False])
def test_counts_are_the_sdks_own(with_tools, risk, with_system):
    ours, sdk = SessionLLM(**FIELDS), LLM(**FIELDS)
    history = _history(4, "a")
    if not with_system:
        history = history[1:]
    tools = _tools() if with_tools else None
    for end in range(len(history) + 1):  # every prefix (none too): first counted, then kept
        messages = history[:end]
        expected = sdk.get_token_count(messages, tools, add_security_risk_prediction=risk)
        assert ours.get_token_count(messages, tools, add_security_risk_prediction=risk) == expected
    assert token_counts.kept() == len(history)
    # And again, all from what was kept.
    expected = sdk.get_token_count(history, tools, add_security_risk_prediction=risk)
    assert ours.get_token_count(history, tools, add_security_risk_prediction=risk) == expected


def test_a_grown_history_encodes_only_its_new_messages(monkeypatch):
    encoded: list[str] = []
    real = litellm_counter._encoding_count

    def spy(encoding, text):
        encoded.append(text)
        return real(encoding, text)

    monkeypatch.setattr(litellm_counter, "_encoding_count", spy)
    llm, tools = SessionLLM(**FIELDS), _tools()
    history = _history(3, "b")
    llm.get_token_count(history, tools, add_security_risk_prediction=True)
    first = "".join(encoded)
    assert "answer 2 b" in first and "answer 0 b" in first

    encoded.clear()
    grown = [
        *history,
        Message(role="user", content=[TextContent(text="one more question")]),
        Message(role="assistant", content=[TextContent(text="one more answer " * 50)]),
    ]
    total = llm.get_token_count(grown, tools, add_security_risk_prediction=True)
    again = "".join(encoded)
    assert "one more question" in again and "one more answer" in again
    # Nothing of the old messages, nor the tools' definitions, is encoded again.
    assert "answer 0 b" not in again and "question 2 b" not in again
    assert "think" not in again
    assert len(again) < len(first) / 4
    assert total == LLM(**FIELDS).get_token_count(grown, tools, add_security_risk_prediction=True)


def test_turned_off_it_is_the_sdks_count(monkeypatch):
    monkeypatch.setenv("TRIO_ACP_TOKEN_COUNT_CACHE", "0")
    history = _history(2, "c")
    count = SessionLLM(**FIELDS).get_token_count(history, _tools())
    assert count == LLM(**FIELDS).get_token_count(history, _tools())
    assert token_counts.kept() == 0


def test_mocked_tool_calls_are_counted_the_sdks_way():
    # Without native tool calls the SDK rewrites the whole list into a text prompt.
    fields = {**FIELDS, "native_tool_calling": False}
    history = _history(2, "d")
    count = SessionLLM(**fields).get_token_count(history, _tools())
    assert count == LLM(**fields).get_token_count(history, _tools())
    assert token_counts.kept() == 0


def test_a_model_of_another_name_is_counted_anew():
    history = _history(1, "e")
    SessionLLM(**FIELDS).get_token_count(history)
    kept = token_counts.kept()
    other = {**FIELDS, "model": "openai/gpt-4o"}  # another tokenizer (o200k_base)
    assert SessionLLM(**other).get_token_count(history) == LLM(**other).get_token_count(history)
    assert token_counts.kept() == 2 * kept


def test_the_kept_counts_are_bounded():
    counts = token_counts._Counts(2)
    for i, key in enumerate([("m", b"1"), ("m", b"2"), ("m", b"3")]):
        counts.put(key, i)
    assert len(counts) == 2 and counts.get(("m", b"1")) is None
    assert counts.get(("m", b"2")) == 1
    counts.put(("m", b"4"), 3)  # "2" was used last: "3" goes
    assert counts.get(("m", b"3")) is None and counts.get(("m", b"2")) == 1
