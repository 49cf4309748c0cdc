"""The live conversation a session drives: the `Conversation` Protocol and its values.

`Conversation` is what the turn logic, the session, `confirm` and `commands` may ask of
a conversation: run it, interrupt it, hand it a message, decide on its pending actions,
read the little state a turn needs, switch its model, condense it, close it. It says
nothing about threads or the SDK's objects, so the in-process SDK conversation
(`local_conversation.py`), a remote conversation (an OpenHands agent-server,
`remote_conversation.py`) and a scripted fake (`trio_acp.testing.fake_conversation`)
implement it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

import attrs

from trio_acp.openhands.sdk.audio import audio_content
from trio_acp.openhands.setup.critic_review import CriticOutcome
from trio_acp.openhands.setup.mcp_startup import McpStartFailure
from trio_acp.openhands.translate.prompt import AudioPart, ImagePart, TextPart, merge_text

if TYPE_CHECKING:
    import uuid

    from trio_acp.openhands.sdk.classes import (
        ActionEvent,
        Event,
        ImageContent,
        Message,
        Metrics,
        Skill,
        TextContent,
    )
    from trio_acp.openhands.sdk.loaded import Sdk
    from trio_acp.openhands.setup.models import ModelChoice

log = logging.getLogger(__name__)

# The conversation's execution status, as the SDK words it (its values go on the wire in
# a failed turn's error data).
FINISHED = "finished"
WAITING_FOR_CONFIRMATION = "waiting_for_confirmation"
ERROR = "error"
STUCK = "stuck"


class StatsSource(Protocol):
    """The SDK's `ConversationStats` as `usage_of` reads it (local, or an agent-server's), or
    one LLM's metrics shaped so (local_conversation.py)."""

    def get_combined_metrics(self) -> Metrics: ...


@attrs.frozen
class Usage:
    """Tokens and cost so far, and the context the last model call used."""

    last_used: int  # prompt + completion tokens of the last call
    context_window: int
    cost: float | None
    prompt_tokens: int | None  # accumulated
    completion_tokens: int | None


@attrs.frozen
class Condensed:
    """How a `/condense` went: `failure` is None when it worked."""

    added: int = 0  # events it added to the history
    failure: str | None = None
    empty: bool = False  # nothing to condense yet


@attrs.frozen
class LlmOptions:
    """What the session offers of the conversation's LLM."""

    reasoning_effort: str | None  # None: the model has none to choose
    stream: bool


#: What stops one tool call's running command (`Conversation.stop_tool_call`).
StopCommand = Callable[[], Awaitable[None]]


class Run(Protocol):
    """One run of the conversation (until it finishes, stops for confirmation, fails...)."""

    def done(self) -> bool: ...

    async def outcome(self) -> BaseException | None:
        """Wait for the run's end: None, or the error it ended with."""
        ...

    async def wait_done(self) -> None:
        """Wait until the run is over, however it ended."""
        ...


class Conversation(Protocol):
    async def warm_up(self, report: dict[str, str]) -> list[McpStartFailure]:
        """Start the tools and warm the model call path; returns MCP start-up failures."""
        ...

    def llm_options(self) -> LlmOptions: ...

    async def set_mode(self, mode: str) -> None: ...

    async def use_model(
        self, choice: ModelChoice, *, reasoning_effort: str | None, stream: bool
    ) -> str | None:
        """Switch to another configured model; returns its reasoning effort (None: none)."""
        ...

    async def update_llm(self, **update: object) -> None:
        """Change options of the current LLM (`stream`, `reasoning_effort`)."""
        ...

    def status(self) -> str: ...

    def event_count(self) -> int: ...

    def critic_outcome(self, since: int) -> CriticOutcome | None:
        """The critic's verdict on the last answer since event `since` (None: no critic,
        or no answer)."""
        ...

    def last_error(self, since: int) -> tuple[str | None, str | None]:
        """(code, detail) of the last error event since `since`, or (None, None)."""
        ...

    async def send_message(
        self, parts: list[TextPart | ImagePart | AudioPart], sender: str | None = None
    ) -> None:
        """Add the user's message; `sender` is kept on its event (translate/messages.py)."""
        ...

    def start_run(self) -> Run: ...

    async def interrupt(self) -> None: ...

    async def stop_tools(self) -> None:
        """Stop what the tools started (the terminal's processes)."""
        ...

    def stop_tool_call(self, tool_call_id: str) -> tuple[bool, StopCommand | None]:
        """Stop one tool call's command, the run going on (ACP v2's `tool_call/cancel`):
        decided at once (False: it was over already), and what stops its command if it
        runs, to await once the stop is answered (`sessions/tool_call_stop.py`). Raises
        `RequestError` (invalid params) where a single tool call cannot be stopped."""
        ...

    async def pending_actions(self) -> list[ActionEvent]: ...

    async def reject_pending(self, reason: str) -> None: ...

    async def note_interruption(self) -> None:
        """Record in the history that the user cut the turn short (unless it was complete)."""
        ...

    def usage(self) -> Usage | None: ...

    def skills(self) -> list[Skill]:
        """The skills in the agent's context (`/skills`)."""
        ...

    async def history(self) -> list[Event]: ...

    async def condense(self) -> Condensed: ...

    async def fork(self, fork_id: uuid.UUID) -> None: ...

    async def close(self) -> None: ...


def user_message(sdk: Sdk, parts: list[TextPart | ImagePart | AudioPart]) -> Message:
    """The SDK's user `Message` for a prompt's parts (prompt.py), local or remote alike:
    adjacent text parts become one `TextContent` (`merge_text`: a part costs the SDK a
    deep copy on every model call)."""
    content: list[TextContent | ImageContent] = []
    for part in merge_text(parts):
        if isinstance(part, TextPart):
            content.append(sdk.TextContent(text=part.text))
        elif isinstance(part, ImagePart):
            content.append(sdk.ImageContent(image_urls=[part.url]))
        elif isinstance(part, AudioPart):
            content.append(audio_content(part.data, part.format, part.label))
    return sdk.Message(role="user", content=content)


def usage_of(stats: StatsSource) -> Usage | None:
    """`Usage` from the SDK's `ConversationStats` (local, or as an agent-server reports it)."""
    try:
        metrics = stats.get_combined_metrics()
    except Exception:
        return None
    usages = getattr(metrics, "token_usages", None) or []
    last = usages[-1] if usages else None
    total = getattr(metrics, "accumulated_token_usage", None)
    cost = metrics.accumulated_cost
    return Usage(
        last_used=((last.prompt_tokens or 0) + (last.completion_tokens or 0))
        if last is not None
        else 0,
        context_window=(getattr(last, "context_window", 0) or 0) if last is not None else 0,
        cost=cost if cost is not None and math.isfinite(cost) else None,
        prompt_tokens=total.prompt_tokens if total is not None else None,
        completion_tokens=total.completion_tokens if total is not None else None,
    )
