"""A bound on what is read of a model provider's error body.

litellm reads an error response whole, and each failed attempt runs its secret redaction (one
large regular expression, about 3 µs a byte here) over the error's text several times: a
5 MiB HTTP 500 body cost 37 s between two attempts whose documented wait was 2 s
(model_failures.py has the waits), and a body with no end would never be done. An error
worth reading is small (OpenAI's JSON error is a few hundred bytes; a proxy's error page a
few KiB), so only its first `MAX_ERROR_BODY` bytes are read and the connection is closed.

litellm builds the transports of its HTTP clients, the OpenAI-compatible ones and its own
(every other provider), in one place, `AsyncHTTPHandler._create_async_transport`;
`install` wraps what it returns so that each transport bounds the bodies of the error
responses it receives. The transport stays litellm's own object (litellm recognizes its
aiohttp transport by class to recycle its sessions). Synchronous calls (not the agent's:
its conversation runs `arun()`, docs/ARCHITECTURE.md#d9) are not bounded.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

import httpx

from trio_acp.openhands.translate.shapes import PassedOn

if TYPE_CHECKING:
    from litellm.llms.custom_httpx.aiohttp_transport import LiteLLMAiohttpTransport

log = logging.getLogger(__name__)

#: The most of an error response's body that is read (HTTP status >= 400).
MAX_ERROR_BODY = 8 * 1024

_INSTALLED = "_trio_acp_bounded"


class BoundedBody(httpx.AsyncByteStream):
    """The first `limit` bytes of a response body; the rest is never read."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        left = self._limit
        async for part in self._inner:
            if len(part) >= left:
                if left:
                    yield part[:left]
                log.debug("an error body longer than %d bytes was cut there", self._limit)
                break
            left -= len(part)
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


def bound_errors[T: httpx.AsyncBaseTransport](
    transport: T | None, limit: int = MAX_ERROR_BODY
) -> T | None:
    """`transport` (an `httpx.AsyncBaseTransport`), its error responses' bodies bounded."""
    if transport is None or getattr(transport, _INSTALLED, False):
        return transport
    send: Callable[[httpx.Request], Awaitable[httpx.Response]] = transport.handle_async_request

    @functools.wraps(send)
    async def handle_async_request(request: httpx.Request) -> httpx.Response:
        response = await send(request)
        if response.status_code >= 400 and isinstance(response.stream, httpx.AsyncByteStream):
            response.stream = BoundedBody(response.stream, limit)
        return response

    transport.handle_async_request = handle_async_request  # type: ignore[method-assign]
    setattr(transport, _INSTALLED, True)
    return transport


def install() -> None:
    """Bound the error bodies of every asynchronous transport litellm builds from now on
    (call once the SDK is imported, before any model call). Idempotent."""
    from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

    create = AsyncHTTPHandler.__dict__.get("_create_async_transport")
    if not isinstance(create, staticmethod):
        log.warning("litellm's transport factory changed; model error bodies are not bounded")
        return
    if getattr(create.__func__, _INSTALLED, False):
        return
    original = create.__func__

    @functools.wraps(original)
    def bounded(
        *args: PassedOn, **kwargs: PassedOn
    ) -> LiteLLMAiohttpTransport | httpx.AsyncHTTPTransport | None:
        return bound_errors(original(*args, **kwargs))

    setattr(bounded, _INSTALLED, True)
    AsyncHTTPHandler._create_async_transport = staticmethod(bounded)  # type: ignore[method-assign]
