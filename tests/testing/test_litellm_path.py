"""litellm's real OpenAI streaming path against the scripted server."""

from __future__ import annotations

import json

import litellm
import pytest
from litellm.exceptions import MidStreamFallbackError

from trio_acp.testing import Reply, ScriptedLLM, ToolCall, scenario_prompt

litellm.suppress_debug_info = True  # the OpenHands SDK sets this too (else it prints to stdout)

TWO_CALLS = Reply(
    reasoning="Two tools at once.",
    text="Running two things.",
    tool_calls=[
        ToolCall("terminal", {"command": "echo a"}, id="call_a"),
        ToolCall("file_editor", {"command": "view", "path": "/tmp"}),
    ],
    chunk_size=5,
)


@pytest.fixture(scope="module")
def llm():
    with ScriptedLLM([("two calls", [TWO_CALLS])]) as server:
        yield server


def complete(llm, prompt, **kw):
    return litellm.completion(
        model="openai/scripted",
        api_base=llm.base_url,
        api_key="x",
        messages=[{"role": "user", "content": prompt}],
        max_retries=0,
        timeout=10,
        **kw,
    )


def test_streaming_deltas_and_reassembly(llm):
    chunks = list(complete(llm, "two calls", stream=True, stream_options={"include_usage": True}))
    kinds = []
    fragments = []
    for c in chunks:
        if not c.choices:
            continue
        d = c.choices[0].delta
        if getattr(d, "reasoning_content", None):
            kinds.append("reasoning")
        if d.content:
            kinds.append("text")
        for tc in d.tool_calls or []:
            kinds.append("tool")
            fragments.append((tc.index, tc.id, tc.function.name, tc.function.arguments))
    assert [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k] == [
        "reasoning",
        "text",
        "tool",
    ]
    # OpenAI shape: a first fragment with index/id/name and "" arguments, then argument pieces
    first = [f for f in fragments if f[1] is not None]
    assert [(i, name, args) for i, _, name, args in first] == [
        (0, "terminal", ""),
        (1, "file_editor", ""),
    ]
    assert first[0][1] == "call_a" and first[1][1].startswith("call_")
    assert all(name is None for _, cid, name, _ in fragments if cid is None)
    assert len(fragments) > 4
    assert chunks[-1].usage.completion_tokens == TWO_CALLS.completion_tokens()

    built = litellm.stream_chunk_builder(
        chunks, messages=[{"role": "user", "content": "two calls"}]
    )
    msg = built.choices[0].message
    assert built.choices[0].finish_reason == "tool_calls"
    assert msg.content == "Running two things."
    assert msg.reasoning_content == "Two tools at once."
    assert [(t.id, t.function.name) for t in msg.tool_calls][0] == ("call_a", "terminal")
    assert [json.loads(t.function.arguments) for t in msg.tool_calls] == [
        {"command": "echo a"},
        {"command": "view", "path": "/tmp"},
    ]
    assert built.usage.completion_tokens == TWO_CALLS.completion_tokens()
    assert built.usage.completion_tokens_details.reasoning_tokens == TWO_CALLS.reasoning_tokens()


def test_usage_without_include_usage(llm):
    chunks = list(complete(llm, "hello", stream=True))
    built = litellm.stream_chunk_builder(chunks, messages=[{"role": "user", "content": "hello"}])
    assert built.choices[0].message.content == "Echo: hello"
    assert built.usage.completion_tokens == 3  # len("Echo: hello") = 11 chars -> ceil(11/4)


def test_non_streaming(llm):
    r = complete(llm, "two calls")
    msg = r.choices[0].message
    assert msg.content == "Running two things." and msg.reasoning_content == "Two tools at once."
    assert [t.function.name for t in msg.tool_calls] == ["terminal", "file_editor"]
    assert r.usage.prompt_tokens > 0


def test_long_reply_streams_every_token(llm):
    n = 500  # litellm's sync stream costs ~1 ms per chunk here
    chunks = list(complete(llm, scenario_prompt("long", tokens=n), stream=True))
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content) == n
    assert litellm.stream_chunk_builder(chunks).choices[0].message.content.count(" ") == n


def test_faults_map_to_litellm_exceptions(llm):
    with pytest.raises(litellm.InternalServerError):
        complete(llm, "[scenario:error500]", stream=True)
    # mid-stream failures surface as MidStreamFallbackError (a ServiceUnavailableError)
    # wrapping the APIConnectionError
    with pytest.raises(MidStreamFallbackError, match="incomplete chunked read"):
        list(complete(llm, "[scenario:truncate]", stream=True))
    with pytest.raises(MidStreamFallbackError, match="timed out"):
        list(
            litellm.completion(
                model="openai/scripted",
                api_base=llm.base_url,
                api_key="x",
                messages=[{"role": "user", "content": "[scenario:stall]"}],
                stream=True,
                max_retries=0,
                timeout=0.5,
            )
        )
