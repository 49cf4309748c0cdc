"""sdk/chat_stream.py: SSE bytes → token chunks and a compact stream (pure; no SDK).

The comparison with litellm's path on the scripted server is tests/openhands/test_fast_stream.py;
these are the wire forms the scripted server does not send.
"""

from __future__ import annotations

import json

import pytest

from trio_acp.openhands.sdk.chat_stream import ChatStreamReader, StreamError


def _event(payload: object, newline: bytes = b"\n") -> bytes:
    return b"data: " + json.dumps(payload).encode() + newline + newline


def _chunk(delta: dict, finish: str | None = None, **extra: object) -> dict:
    return {
        "id": "r1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        **extra,
    }


def _texts(chunks) -> list[str | None]:
    return [c.choices[0].delta.content for c in chunks]


STREAM = [
    _chunk({"role": "assistant", "reasoning_content": "Think"}),
    _chunk({"reasoning_content": "ing."}),
    _chunk({"content": "Hel"}),
    _chunk({"content": "lo"}),
    _chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "t", "arguments": ""},
                }
            ]
        }
    ),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]}),
    _chunk({}, "tool_calls"),
    {
        "id": "r1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    },
]


def test_chunks_carry_what_the_token_callbacks_read():
    reader = ChatStreamReader()
    chunks = reader.feed(b"".join(_event(p) for p in STREAM) + b"data: [DONE]\n\n")
    assert reader.done and reader.error is None
    assert len(chunks) == 8  # the usage chunk has no choices: no token chunk
    assert [c.id for c in chunks] == ["r1"] * 8
    assert chunks[0].choices[0].delta.reasoning_content == "Think"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].choices[0].delta.model_fields_set == {"reasoning_content", "role"}
    assert _texts(chunks)[2:4] == ["Hel", "lo"]
    (call,) = chunks[4].choices[0].delta.tool_calls
    assert (call.index, call.id, call.type, call.function.name) == (0, "c1", "function", "t")
    assert chunks[5].choices[0].delta.tool_calls[0].function.arguments == '{"a":'
    assert chunks[7].choices[0].finish_reason == "tool_calls"
    assert reader.finish_reason == "tool_calls"
    assert reader.text_so_far() == "Hello"


def test_the_compact_stream_is_the_same_reply_in_few_chunks():
    reader = ChatStreamReader()
    reader.feed(b"".join(_event(p) for p in STREAM))
    compact = reader.compacted()
    assert len(compact) == 4  # text and reasoning, the tool call, the finish, the usage
    first = compact[0]["choices"][0]["delta"]
    assert first == {"role": "assistant", "reasoning_content": "Thinking.", "content": "Hello"}
    assert compact[1]["choices"][0]["delta"]["tool_calls"] == [
        {
            "index": 0,
            "id": "c1",
            "type": "function",
            "function": {"name": "t", "arguments": '{"a": 1}'},
        }
    ]
    assert compact[2]["choices"][0]["finish_reason"] == "tool_calls"
    assert compact[3]["usage"]["total_tokens"] == 7
    assert all(c["id"] == "r1" and c["model"] == "m" for c in compact)


@pytest.mark.parametrize("split", [1, 2, 3, 7, 64])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_events_split_anywhere_and_any_line_ending_read_the_same(split, newline):
    data = b"".join(_event(p, newline) for p in STREAM) + b"data: [DONE]" + newline * 2
    reader = ChatStreamReader()
    chunks = []
    for i in range(0, len(data), split):
        chunks += reader.feed(data[i : i + split])
    assert reader.done
    assert [c.choices[0].delta.content for c in chunks] == _texts(
        ChatStreamReader().feed(b"".join(_event(p) for p in STREAM))
    )
    assert reader.compacted()[0]["choices"][0]["delta"]["content"] == "Hello"


def test_comments_named_events_and_multi_line_data_are_read_as_the_openai_client_does():
    payload = json.dumps(_chunk({"content": "x"}), indent=1).encode()  # several lines
    data = (
        b": keep-alive\n\n"
        + b"event: message\nid: 1\n"
        + b"".join(b"data: " + line + b"\n" for line in payload.split(b"\n"))
        + b"\n"
        + b"data:"
        + json.dumps(_chunk({"content": "y"})).encode()
        + b"\n\n"  # no space
    )
    chunks = ChatStreamReader().feed(data)
    assert _texts(chunks) == ["x", "y"]


def test_nothing_after_done_counts():
    reader = ChatStreamReader()
    chunks = reader.feed(
        _event(_chunk({"content": "a"})) + b"data: [DONE]\n\n" + _event(_chunk({"content": "b"}))
    )
    assert _texts(chunks) == ["a"]
    assert reader.feed(_event(_chunk({"content": "c"}))) == []


def test_a_failed_event_ends_the_stream_after_the_chunks_before_it():
    reader = ChatStreamReader()
    chunks = reader.feed(
        _event(_chunk({"content": "a"}))
        + b'data: {"error": {"message": "overloaded", "code": 529}}\n\n'
        + _event(_chunk({"content": "b"}))
    )
    assert _texts(chunks) == ["a"]
    assert isinstance(reader.error, StreamError)
    assert reader.error.message == "overloaded" and reader.error.body == {
        "message": "overloaded",
        "code": 529,
    }
    assert reader.done

    broken = ChatStreamReader()
    assert _texts(broken.feed(_event(_chunk({"content": "a"})) + b'data: {"id": \n\n')) == ["a"]
    assert isinstance(broken.error, json.JSONDecodeError)


def test_an_error_without_a_message_is_worded_as_the_openai_client_words_it():
    reader = ChatStreamReader()
    reader.feed(b'data: {"error": "boom"}\n\n')
    assert isinstance(reader.error, StreamError)
    assert reader.error.message == "An error occurred during streaming"


@pytest.mark.parametrize(
    "odd",
    [
        _chunk({"content": "x"}) | {"choices": [{"index": 1, "delta": {"content": "x"}}]},
        _chunk({"content": "x"})
        | {"choices": [{"index": 0, "delta": {"content": "x"}, "logprobs": {"content": []}}]},
        _chunk({"content": "x", "audio": {"id": "a"}}),
        _chunk({"tool_calls": [{"index": 0, "id": "c2", "function": {"name": "u"}}]}),
    ],
    ids=["second-choice", "logprobs", "audio", "second-call-at-an-index"],
)
def test_a_reply_it_cannot_merge_is_replayed_whole(odd):
    reader = ChatStreamReader()
    stream = [
        _chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "c1", "type": "function", "function": {"name": "t"}}
                ]
            }
        ),
        odd,
        _chunk({}, "stop"),
    ]
    reader.feed(b"".join(_event(p) for p in stream))
    assert not reader.mergeable
    assert reader.compacted() == stream


def test_a_repeated_chunk_is_counted_as_litellm_counts_it():
    reader = ChatStreamReader()
    reader.feed(b"".join(_event(_chunk({"content": "same"})) for _ in range(5)))
    assert reader.repeats == 5
    reader.feed(_event(_chunk({"content": "ab"})) + _event(_chunk({"content": "ab"})))
    assert reader.repeats == 1  # 2 characters or fewer never count
