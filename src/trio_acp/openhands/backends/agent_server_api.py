"""The agent-server's HTTP side without a conversation open, and the key's protection.

Requests of our own (the catalogue: get, list, delete; fork and model switches), the one
error type for agent-server failures (`RemoteError`, whose texts never hold the key), and
the log filter that masks the key where libraries log it. docs/agent-server.md.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypedDict

import trio

from trio_acp.openhands.backends.agent_server_config import AgentServerTarget
from trio_acp.openhands.translate.shapes import JsonObject, JsonValue

if TYPE_CHECKING:
    import httpx

# Per-request timeout of our own REST calls (health polls, list, delete).
REQUEST_TIMEOUT = 10.0


class _KeyRedactor(logging.Filter):
    """Masks the session API keys in the records of the loggers that see them.

    The SDK's WebSocket client authenticates with a first frame holding the key, and the
    `websockets` library logs every frame at DEBUG: with debug logging on, the key would
    be in the log.
    """

    LOGGERS = ("websockets.client", "websockets.protocol", "httpx", "httpcore")

    def __init__(self) -> None:
        super().__init__()
        self.keys: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.keys:
            try:
                message = record.getMessage()
            except Exception:
                return True
            if any(key in message for key in self.keys):
                for key in self.keys:
                    message = message.replace(key, "***")
                record.msg, record.args = message, None
        return True


_redactor = _KeyRedactor()
for _name in _KeyRedactor.LOGGERS:
    logging.getLogger(_name).addFilter(_redactor)


class RemoteError(Exception):
    """A request to the agent-server failed; the message says what, never the key.

    `unreachable`: no answer at all (connection refused, host unreachable, timeout), as
    opposed to an answer that says no.
    """

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


def _scrub(text: str, key: str | None) -> str:
    return text.replace(key, "***") if key else text


def _describe(exc: BaseException) -> str:
    """A one-line reason for an HTTP/WebSocket failure."""
    import httpx

    if isinstance(exc, httpx.HTTPStatusError):
        response = exc.response
        if response.status_code == 401:
            return "the agent-server refused the session API key (HTTP 401)"
        return f"HTTP {response.status_code} {response.reason_phrase} from {exc.request.method} {exc.request.url.path}"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host unreachable"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer in time ({type(exc).__name__})"
    cause = getattr(exc, "original_exception", None)
    if cause is not None and cause is not exc:
        return _describe(cause)
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:300]


def _is_transport_error(error: BaseException) -> bool:
    import httpx

    exc: BaseException | None = error
    for _ in range(5):  # the SDK wraps (ConversationRunError), at most a few deep
        if exc is None:
            return False
        if isinstance(exc, httpx.TransportError):
            return True
        exc = getattr(exc, "original_exception", None) or exc.__cause__
    return False


# -- the server's catalogue, without a conversation open ----------------------------------


#: The server's answer about one conversation (`GET /api/conversations/{id}`): read by key
#: (`execution_status`, `stats`), each value checked where it is read.
ConversationInfo = JsonObject


class ConversationListing(TypedDict):
    """One conversation of `list_conversations`: the server's values, as it sent them."""

    id: JsonValue
    title: JsonValue
    execution_status: JsonValue
    created_at: JsonValue
    updated_at: JsonValue
    working_dir: JsonValue


def _client(target: AgentServerTarget) -> httpx.Client:
    import httpx

    headers = {"X-Session-API-Key": target.api_key} if target.api_key else {}
    return httpx.Client(base_url=target.url, headers=headers, timeout=REQUEST_TIMEOUT)


async def _request(
    target: AgentServerTarget,
    method: str,
    path: str,
    ok: Iterable[int] = (200,),
    *,
    params: dict[str, str | int] | None = None,
    json: JsonObject | None = None,
) -> httpx.Response:
    def call() -> httpx.Response:
        with _client(target) as client:
            response = client.request(method, path, params=params, json=json)
            if response.status_code not in ok:
                response.raise_for_status()
            return response

    try:
        return await trio.to_thread.run_sync(call, abandon_on_cancel=True)
    except Exception as exc:
        raise RemoteError(
            _scrub(f"agent-server {target.url}: {_describe(exc)}", target.api_key),
            unreachable=_is_transport_error(exc),
        ) from None


async def get_conversation(
    target: AgentServerTarget, conversation_id: uuid.UUID
) -> ConversationInfo | None:
    response = await _request(target, "GET", f"/api/conversations/{conversation_id}", ok=(200, 404))
    if response.status_code == 404:
        return None
    info: ConversationInfo = response.json()
    return info


async def list_conversations(
    target: AgentServerTarget, *, limit: int = 100
) -> list[ConversationListing]:
    """The server's conversations, newest first: id, title, status, created/updated times."""
    items: list[ConversationListing] = []
    page_id: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": limit}
        if page_id:
            params["page_id"] = page_id
        page = (await _request(target, "GET", "/api/conversations/search", params=params)).json()
        for item in page.get("items", []):
            items.append(
                ConversationListing(
                    id=item.get("id"),
                    title=item.get("title"),
                    execution_status=item.get("execution_status"),
                    created_at=item.get("created_at"),
                    updated_at=item.get("updated_at"),
                    working_dir=(item.get("workspace") or {}).get("working_dir"),
                )
            )
        page_id = page.get("next_page_id")
        if not page_id:
            return items


async def delete_conversation(target: AgentServerTarget, conversation_id: uuid.UUID) -> bool:
    """Delete it on the server; False if it did not exist."""
    response = await _request(
        target, "DELETE", f"/api/conversations/{conversation_id}", ok=(200, 404)
    )
    return response.status_code == 200


async def post_json(
    target: AgentServerTarget, path: str, body: JsonObject, ok: Iterable[int] = (200,)
) -> JsonValue:
    """POST `body` to the server; the parsed answer. Raises `RemoteError`."""
    return (await _request(target, "POST", path, ok=ok, json=body)).json()
