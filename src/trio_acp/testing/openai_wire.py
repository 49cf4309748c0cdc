"""OpenAI's chat-completions wire format for a scripted reply: JSON bodies, SSE chunks, errors.

Pure functions (no sockets): :mod:`.llm_server` writes what they build.

Streaming follows OpenAI: ``data: {chunk}\\n\\n`` events over chunked transfer encoding, the first
delta carries ``role``; then ``reasoning_content`` pieces, then ``content`` pieces, then tool
calls (first fragment: ``index``, ``id``, ``type="function"``, ``function.name``,
``function.arguments=""``; following fragments: ``index`` + argument string pieces), a last chunk
with an empty delta and ``finish_reason``, a usage chunk (``choices: []``) when
``stream_options.include_usage`` is set, and ``data: [DONE]``.

Error bodies are shaped like OpenAI's (``{"error": {"message", "type", "param", "code"}}``, with
OpenAI's ``type``/``code`` for 400, 401, 403, 404, 429, 500, 502, 503).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from trio_acp.testing.script import Reply, tokens

__all__ = [
    "BROKEN_EVENT",
    "DONE_EVENT",
    "HTML_PAGE",
    "completion_payload",
    "new_call_ids",
    "openai_error_body",
    "padded",
    "response_id",
    "split",
    "sse_event",
    "stream_chunks",
    "stream_deltas",
    "usage",
]

#: The ``data:`` event a ``badjson`` fault sends: not JSON (cut off mid-object).
BROKEN_EVENT = b'data: {"id": "chatcmpl-broken", "choices": [{"delta": {"content": "x"\n\n'
#: The event that ends an OpenAI stream.
DONE_EVENT = b"data: [DONE]\n\n"
#: The page an ``html`` fault answers with status 200: a web UI or a captive portal, not the API.
HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n"
    b"<body><h1>Sign in to continue</h1><p>This network requires you to sign in "
    b"(scripted html fault).</p></body></html>\n"
)


#: OpenAI's error ``type``/``code``/message per status, so clients classify them as they would
#: the real service's (``{"error": {"message", "type", "param", "code"}}``).
_OPENAI_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request (scripted HTTP 400 fault)."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: scri****pted. You can find your API key at "
        "https://platform.openai.com/account/api-keys. (scripted HTTP 401 fault)",
    ),
    403: (
        "request_forbidden",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported (scripted HTTP 403 fault).",
    ),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it. "
        "(scripted HTTP 404 fault)",
    ),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests (scripted HTTP 429 fault). Please try again later.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request (scripted HTTP 500 fault).",
    ),
    502: ("server_error", None, "Bad gateway (scripted HTTP 502 fault)."),
    503: (
        "server_error",
        None,
        "The engine is currently overloaded, please try again later (scripted HTTP 503 fault).",
    ),
}

_CONTEXT_LENGTH_MESSAGE = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted "
    "in {tokens} tokens. Please reduce the length of the messages. (scripted fault)"
)


def response_id(reply: Reply) -> str:
    """The ``id`` of a reply's completion or chunks: the scripted one, else a fresh one."""
    return reply.response_id or f"chatcmpl-{uuid.uuid4().hex}"


def padded(payload: dict[str, Any], size: int | None) -> dict[str, Any]:
    """An error ``payload`` whose message is padded so the body is about ``size`` bytes."""
    if not size:
        return payload
    error = dict(payload["error"])
    message = str(error.get("message") or "")
    missing = size - len(json.dumps(payload))
    if missing > 0:
        error["message"] = message + " " + "x" * missing
    return {**payload, "error": error}


def openai_error_body(
    status: int, model: str = "scripted", *, context_length: bool = False
) -> dict[str, Any]:
    """The JSON error body OpenAI sends for ``status`` (``context_length``: the 400 for a too-long prompt)."""
    if context_length:
        return {
            "error": {
                "message": _CONTEXT_LENGTH_MESSAGE.format(tokens=131072),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    type_, code, message = _OPENAI_ERRORS.get(
        status,
        (
            "server_error" if status >= 500 else "invalid_request_error",
            None,
            f"scripted HTTP {status} fault",
        ),
    )
    return {
        "error": {
            "message": message.format(model=model),
            "type": type_,
            "param": None,
            "code": code,
        }
    }


def split(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_deltas(reply: Reply, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The streamed deltas of a reply (without the final finish_reason chunk)."""
    deltas: list[dict[str, Any]] = []
    for piece in split(reply.reasoning, reply.chunk_size):
        deltas.append({"reasoning_content": piece})
    for piece in split(reply.text, reply.chunk_size):
        deltas.append({"content": piece})
    for i, (tc, call_id) in enumerate(zip(reply.tool_calls, ids, strict=True)):
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tc.name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in split(tc.arguments_json(), reply.chunk_size):
            deltas.append({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    if deltas:
        deltas[0] = {"role": "assistant", **deltas[0]}
    else:
        deltas.append({"role": "assistant", "content": ""})
    return deltas


def new_call_ids(reply: Reply) -> list[str]:
    """The tool-call ids of a reply: the scripted ones, else fresh OpenAI-style ``call_...``."""
    return [tc.id or f"call_{uuid.uuid4().hex[:24]}" for tc in reply.tool_calls]


def usage(body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
    """The ``usage`` object for ``reply`` to the request ``body`` (see :mod:`.script` on tokens)."""
    prompt = tokens(len(json.dumps(body.get("messages") or [])))
    completion = reply.completion_tokens()
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens()},
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def completion_payload(
    body: Mapping[str, Any], reply: Reply, model: str, ids: Sequence[str]
) -> dict[str, Any]:
    """The non-streaming ``chat.completion`` response for ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": tc.name, "arguments": tc.arguments_json()},
            }
            for tc, call_id in zip(reply.tool_calls, ids, strict=True)
        ]
    return {
        "id": response_id(reply),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", model),
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.effective_finish_reason,
                "logprobs": None,
            }
        ],
        "usage": usage(body, reply),
    }


def stream_chunks(
    body: Mapping[str, Any], reply: Reply, model: str, ids: Sequence[str]
) -> tuple[list[dict[str, Any]], int]:
    """The ``chat.completion.chunk`` objects streaming ``reply``, and how many carry deltas.

    After the deltas: the finish chunk, then (when ``stream_options.include_usage`` asks for it)
    a usage chunk with empty ``choices``; otherwise the usage rides on the finish chunk.
    """
    deltas = stream_deltas(reply, ids)
    base = {
        "id": response_id(reply),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", model),
        "system_fingerprint": None,
    }
    chunks = [
        {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None, "logprobs": None}]}
        for d in deltas
    ]
    chunks.append(
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {},
                    "finish_reason": reply.effective_finish_reason,
                    "logprobs": None,
                }
            ],
        }
    )
    opts = body.get("stream_options") or {}
    if isinstance(opts, Mapping) and opts.get("include_usage"):
        # OpenAI: a last chunk with empty choices carries the usage
        chunks.append({**base, "choices": [], "usage": usage(body, reply)})
    else:
        # not asked for: attach it to the finish chunk (some providers do; litellm uses it)
        chunks[-1]["usage"] = usage(body, reply)
    return chunks, len(deltas)


def sse_event(chunk: Mapping[str, Any]) -> bytes:
    """One server-sent event carrying ``chunk``."""
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"
