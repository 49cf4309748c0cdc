"""The streaming fast path: a streamed call to an OpenAI chat-completions server, read by us.

litellm makes the request as always (its parameters, headers, client, HTTP errors and
their exception classes are unchanged); when the stream it opens is its OpenAI handler's
(`CustomStreamWrapper` over the ``openai`` client's `AsyncStream`, provider ``openai``:
every ``openai/...`` model, with or without a base URL), we read the event stream's bytes
ourselves (`chat_stream.py`) instead of through litellm's per-chunk wrapper, and after the
last event hand litellm the same reply as a handful of chunks (`ChatStreamReader.compacted`)
to build the final message with its own code: litellm's wrapper, `stream_chunk_builder`,
its usage, cost and logging, over five chunks instead of one per token.

What this replaces costs, per token, an `openai` pydantic chunk, a litellm chunk and
litellm's checks over both (~470 µs CPU on the shared bench machine), and after the last
token three rebuilds of the reply from every chunk (bench/README.md, "Streaming fast
path"). Everything else is the SDK's, called the way its own `LLM._atransport_call` calls
it: the idle timeout between chunks (`_aiter_with_idle_timeout`), the token callback
(`_invoke_token_callback`), the retry around the attempt. A failure in the stream goes
through litellm's own handler of the wrapper (`_log_stream_failure_and_raise`), so the
SDK's retry sees the same exception classes as on litellm's path.

Any other stream (another provider, an instrumented litellm, a sync iterator) is read the
SDK's way. ``TRIO_ACP_FAST_STREAM=0`` turns the fast path off. Imports the SDK: only
`sdk/loaded.py` imports this module's importers.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Mapping
from typing import cast

import httpx
import litellm
import openai
from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper
from litellm.types.utils import ModelResponse, ModelResponseStream
from openhands.sdk import LLM
from openhands.sdk.llm import llm as sdk_llm
from openhands.sdk.llm.streaming import AnyTokenCallbackType, _invoke_token_callback

from trio_acp.openhands.sdk.chat_stream import ChatStreamReader, Chunk, StreamError
from trio_acp.openhands.translate.shapes import JsonObject, PassedOn

__all__ = ["FAST_STREAM_ENV", "NotAModelReply", "atransport_call", "enabled", "not_a_reply"]

#: ``0`` / ``false`` / ``no`` / ``off`` turns the fast path off (read on every call).
FAST_STREAM_ENV = "TRIO_ACP_FAST_STREAM"


class NotAModelReply(Exception):
    """A streamed model call answered by a web page (HTTP 200, `text/html`): not the API.

    litellm reads such a page as a stream without events and makes up an empty reply; the
    SDK answers an empty reply with corrective feedback to the model and calls again, and
    the turn ended on whatever that next call said. A base URL pointing at a web UI, or a
    proxy's or a network's sign-in page, answers this way (model_failures.py words it).
    """


def not_a_reply(content_type: str) -> NotAModelReply | None:
    """The error for a streamed answer of this Content-Type, if it is a web page."""
    kind = content_type.lower()
    if "html" not in kind:
        return None
    return NotAModelReply(
        f"the model call was answered by a web page (HTTP 200, {kind}), not an event stream"
    )


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether streamed calls may take the fast path (`FAST_STREAM_ENV`)."""
    value = environ.get(FAST_STREAM_ENV, "").strip().lower()
    return value not in ("0", "false", "no", "off")


async def atransport_call(
    llm: LLM,
    *,
    messages: list[JsonObject],  # the chat messages, as the SDK types them
    on_token: AnyTokenCallbackType,
    slow_on_token: AnyTokenCallbackType,
    **kwargs: PassedOn,
) -> ModelResponse:
    """One streamed attempt, as the SDK's `LLM._atransport_call(enable_streaming=True)`.

    `on_token` gets the fast path's chunks; `slow_on_token` litellm's, when the stream is
    not one the fast path reads (it checks what answered on the first chunk: llm.py).
    """
    auth_values = await llm._aget_litellm_auth_values()
    # The module's name, not an import of it: an instrumentation that wraps it is kept.
    ret = await sdk_llm.litellm_acompletion(
        **llm._prepare_transport_kwargs(
            messages=messages, enable_streaming=True, auth_values=auth_values, **kwargs
        )
    )
    stream = _openai_stream(ret)
    if stream is None:
        return await _sdk_way(llm, ret, messages, slow_on_token)
    wrapper = cast(CustomStreamWrapper, ret)
    response = stream.response
    reader = ChatStreamReader()
    batches = _batches(reader, wrapper, response)
    timed = cast(AsyncGenerator[list[Chunk]], llm._aiter_with_idle_timeout(batches))
    try:
        refused = not_a_reply(response.headers.get("content-type", ""))
        if refused is not None:
            raise refused
        async for batch in timed:
            for chunk in batch:
                await _invoke_token_callback(on_token, cast(ModelResponseStream, chunk))
            _hand_over_the_gil()
    finally:
        # Closed here, not by a garbage collector's hook some time later (a cancel, a
        # callback's error): the connection goes back or away now.
        await timed.aclose()
        await batches.aclose()
        await response.aclose()
    return await _final_message(wrapper, stream, reader, messages)


def _hand_over_the_gil() -> None:
    """Let the thread the token callback woke (the agent's Trio thread, which sends the
    updates) take the GIL now: a fast server keeps the reading loop busy from one read to
    the next, and the waiting thread would get the GIL only at the interpreter's switch
    interval, which a loaded machine stretches (bench/README.md, "Streaming fast path":
    2.95 s against 4.54 s for the 20,000-token reply). Never blocks: a zero sleep."""
    time.sleep(0)


def _openai_stream(ret: object) -> openai.AsyncStream[object] | None:
    """The ``openai`` client's stream under litellm's wrapper, if this is litellm's OpenAI
    chat-completions handler's stream, not yet read."""
    if not isinstance(ret, CustomStreamWrapper) or ret.custom_llm_provider != "openai":
        return None
    stream = ret.completion_stream
    if not isinstance(stream, openai.AsyncStream):
        return None
    if not isinstance(stream.response, httpx.Response) or stream.response.is_stream_consumed:
        return None
    return stream


async def _batches(
    reader: ChatStreamReader, wrapper: CustomStreamWrapper, response: httpx.Response
) -> AsyncGenerator[list[Chunk]]:
    """The token chunks, a batch per read that completed any (the SDK's idle timeout runs
    between batches: between chunks, as on litellm's path)."""
    limit = litellm.REPEATED_STREAMING_CHUNK_LIMIT
    try:
        async for data in response.aiter_bytes():
            batch = reader.feed(data)
            if reader.repeats >= limit:
                # litellm's check for a model repeating itself (`raise_on_model_repetition`).
                raise litellm.InternalServerError(
                    message=f"The model is repeating the same chunk = {reader._last_content}.",
                    model="",
                    llm_provider="",
                )
            if batch:
                yield batch
            if reader.error is not None:
                raise reader.error
            if reader.done:
                return
    except StreamError as exc:
        _failed(wrapper, reader, openai.APIError(exc.message, response.request, body=exc.body))
    except (httpx.ReadError, httpx.RemoteProtocolError) as exc:
        # Cut after the finish chunk: litellm ends the stream there as complete.
        if reader.finish_reason is None:
            _failed(wrapper, reader, exc)
    except Exception as exc:  # what litellm's wrapper maps: timeouts, bad JSON, ...
        _failed(wrapper, reader, exc)


def _failed(wrapper: CustomStreamWrapper, reader: ChatStreamReader, exc: Exception) -> None:
    """Raise what litellm's wrapper raises for `exc` in the middle of its stream (called in
    the `except` block: litellm logs the traceback it is handling)."""
    wrapper.response_uptil_now = reader.text_so_far()
    wrapper.sent_first_chunk = reader.sent_choices
    try:
        raise exc
    except Exception as raised:
        wrapper._log_stream_failure_and_raise(raised)


async def _final_message(
    wrapper: CustomStreamWrapper,
    stream: openai.AsyncStream[object],
    reader: ChatStreamReader,
    messages: list[JsonObject],
) -> ModelResponse:
    """The reply as litellm builds it: its wrapper over the compacted chunks, then
    `stream_chunk_builder`, as the SDK does over every chunk."""
    client = stream._client
    parsed = [
        client._process_response_data(
            data=payload, cast_to=stream._cast_to, response=stream.response
        )
        for payload in reader.compacted()
    ]

    async def replay() -> AsyncIterator[object]:
        for item in parsed:
            yield item

    wrapper.completion_stream = replay()
    chunks: list[ModelResponseStream] = [chunk async for chunk in wrapper]
    built = litellm.stream_chunk_builder(chunks, messages=messages)
    assert isinstance(built, ModelResponse), f"Expected ModelResponse, got {type(built)}"
    return built


async def _sdk_way(
    llm: LLM, ret: object, messages: list[JsonObject], on_token: AnyTokenCallbackType
) -> ModelResponse:
    """The rest of the SDK's own streamed attempt (`LLM._atransport_call`), for a stream
    the fast path does not read."""
    chunks: list[ModelResponseStream] = []
    # litellm's `acompletion` types its streamed answer loosely: an async or a sync
    # iterable of chunks.
    if isinstance(ret, CustomStreamWrapper) or hasattr(ret, "__aiter__"):
        stream = cast("AsyncIterable[ModelResponseStream]", ret)
        async for chunk in llm._aiter_with_idle_timeout(stream):
            await _invoke_token_callback(on_token, chunk)
            chunks.append(chunk)
    else:
        import asyncio

        loop = asyncio.get_running_loop()
        synced: list[ModelResponseStream] = await loop.run_in_executor(
            None, list, cast("Iterable[ModelResponseStream]", ret)
        )
        for chunk in synced:
            await _invoke_token_callback(on_token, chunk)
            chunks.append(chunk)
    built = litellm.stream_chunk_builder(chunks, messages=messages)
    assert isinstance(built, ModelResponse), f"Expected ModelResponse, got {type(built)}"
    return built
