"""The SDK's client of an agent-server conversation, as `backends/remote.py` drives it.

- `connect`: the SDK's `RemoteConversation` on a `RemoteWorkspace`, its events-socket client
  one a close stops at once (`use_stoppable_sockets`: the SDK builds that client by a
  module-level name, which we replace once per process; reliance.py lists it).
- `stream_chunk`, `is_delta`, `is_state_update`: what the server's socket brings, read the
  way the local conversation's token callback and events are (translate/).
- `stats_usage`: the conversation's stats as the server reports them.

Imports the SDK: imported inside `backends/`'s functions, after the load.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable
from typing import TypeGuard

from litellm.types.utils import Delta, ModelResponseStream, StreamingChoices
from openhands.sdk import AgentBase, RemoteConversation
from openhands.sdk.conversation.conversation_stats import ConversationStats
from openhands.sdk.conversation.impl import remote_conversation as remote_module
from openhands.sdk.conversation.impl.remote_conversation import WebSocketCallbackClient
from openhands.sdk.event import ConversationStateUpdateEvent, Event, StreamingDeltaEvent
from openhands.sdk.hooks import HookConfig
from openhands.sdk.workspace import RemoteWorkspace

from trio_acp.openhands.translate.shapes import JsonObject


class StoppableSocket(WebSocketCallbackClient):
    """The SDK's events-socket client, stopped at once by `stop()` (`use_stoppable_sockets`)."""

    trio_acp_stoppable = True
    _loop: asyncio.AbstractEventLoop | None = None
    _task: asyncio.Task[object] | None = None  # whatever task runs the loop

    async def _client_loop(self) -> None:
        # Noted first, then the flag read: `stop()` sets the flag first, then reads
        # these, so either the loop never starts or `stop()` cancels it.
        self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        if self._stop.is_set():
            return
        try:
            await super()._client_loop()
        except asyncio.CancelledError:
            pass  # stopped: the thread ends quietly

    def stop(self) -> None:
        self._stop.set()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # its loop is closed: the thread is over
                pass
        super().stop()


@functools.cache
def use_stoppable_sockets() -> None:
    """Have the SDK's `RemoteConversation` use an events-socket client a close stops at once.

    The SDK's `WebSocketCallbackClient` checks its stop flag only when a message arrives:
    on a quiet socket its `stop()` waited out its thread join (5 s), so closing a remote
    session, and exiting on stdin EOF with one open, took 5 s and editors killed the agent.
    This subclass also cancels the socket's task, which closes the connection (its close
    handshake with the server: milliseconds); the join stays the SDK's, as a bound. The
    SDK builds the client by this module-level name, once per conversation, in this
    process only trio-acp's.
    """
    remote_module.WebSocketCallbackClient = StoppableSocket  # type: ignore[misc]


def connect(
    *,
    url: str,
    api_key: str | None,
    working_dir: str,
    agent: AgentBase,
    conversation_id: uuid.UUID | None,
    callback: Callable[[Event], None],
    max_iterations: int,
    hook_config: HookConfig | None,
) -> tuple[RemoteConversation, RemoteWorkspace]:
    """The SDK's conversation `conversation_id` (None: a new one) on the agent-server at
    `url`, its events handed to `callback`; blocking. The workspace's HTTP client is closed
    when it fails."""
    use_stoppable_sockets()
    workspace = RemoteWorkspace(
        host=url, api_key=api_key, working_dir=working_dir, read_timeout=60.0
    )
    try:
        conversation = RemoteConversation(
            agent=agent,
            workspace=workspace,
            conversation_id=conversation_id,
            callbacks=[callback],
            visualizer=None,
            max_iteration_per_run=max_iterations,
            delete_on_close=False,
            hook_config=hook_config,
        )
    except BaseException:
        workspace.client.close()
        raise
    return conversation, workspace


def is_delta(event: object) -> TypeGuard[StreamingDeltaEvent]:
    """A streamed piece of a model response (not an event of the conversation)."""
    return isinstance(event, StreamingDeltaEvent)


def is_state_update(event: object) -> TypeGuard[ConversationStateUpdateEvent]:
    return isinstance(event, ConversationStateUpdateEvent)


def stream_chunk(response_id: str, event: StreamingDeltaEvent) -> ModelResponseStream:
    """A streamed delta as the chunk litellm hands a local conversation's token callback."""
    return ModelResponseStream(
        id=response_id,
        choices=[
            StreamingChoices(
                index=0,
                delta=Delta(content=event.content, reasoning_content=event.reasoning_content),
            )
        ],
    )


def stats_of(info: JsonObject) -> ConversationStats:
    """The conversation's stats in the server's info about it (may raise)."""
    return ConversationStats.model_validate(info.get("stats") or {})
