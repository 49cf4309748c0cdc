"""The session's model: the SDK's `LLM` with our retry policy, context-overflow guard and
check of what answered a streamed call (translate/model_failures.py words the failures).

Imports the SDK: only `trio_acp.openhands.sdk.loaded` imports it (docs/ARCHITECTURE.md,
"Inside `trio_acp.openhands`").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from litellm.types.utils import ModelResponse
from openhands.sdk import LLM
from openhands.sdk.llm import LLMResponse, Message
from openhands.sdk.llm.exceptions import LLMContextWindowExceedError
from openhands.sdk.llm.llm_profile_store import LLMProfileStore
from openhands.sdk.llm.streaming import AnyTokenCallbackType, LLMStreamChunk, TokenCallbackType
from openhands.sdk.tool import ToolDefinition
from pydantic import PrivateAttr
from tenacity import RetryCallState, wait_exponential
from tenacity.retry import retry_base

from trio_acp.openhands.sdk import fast_stream, token_counts
from trio_acp.openhands.sdk.fast_stream import NotAModelReply
from trio_acp.openhands.translate.model_failures import CONTEXT_OVERFLOWS, RetryPolicy
from trio_acp.openhands.translate.shapes import PassedOn

__all__ = [
    "ContextStillTooLong",
    "NotAModelReply",
    "SessionLLM",
    "load_profile",
    "use_profile_store",
]


log = logging.getLogger(__name__)

#: A model call the SDK's retry decorator wraps: any of its calls, as the SDK types it.
ModelCall = Callable[..., Any]


class _Retried(Protocol):
    """A function tenacity's `Retrying` wrapped: tenacity sets these two on it (untyped)."""

    @property
    def retry(self) -> _RetryingParts: ...

    def retry_with(self, *args: PassedOn, **kwargs: PassedOn) -> ModelCall: ...


class _RetryingParts(Protocol):
    """What we reuse of the SDK's `Retrying`: its retry predicate and before-sleep hook."""

    @property
    def retry(self) -> retry_base: ...

    @property
    def before_sleep(self) -> Callable[[RetryCallState], object]: ...


class SessionLLM(LLM):
    """The SDK's `LLM` with our retry policy (model_failures.py) in its retry decorator.

    The SDK decides *what* is transient; we add: a timed-out attempt is retried once, a
    429's Retry-After is honoured up to a bound (a longer one fails at once), and every
    failed attempt is marked with what was decided, for the retry note and the final
    error message. Everything else (stop, logging, the temperature nudge) stays the SDK's.
    Serialized, it is a plain `LLM`: nothing of this reaches the persisted conversation.
    """

    # Context-window overflows in a row, with no successful call in between. The agent
    # answers an overflow by condensing and calling again; when condensing cannot make
    # the conversation fit (a window smaller than the system prompt and tools), that
    # loop would run to the iteration limit, one summary call per round.
    _context_overflows: int = PrivateAttr(default=0)

    async def agenerate(self, *args: PassedOn, **kwargs: PassedOn) -> LLMResponse:
        try:
            response = await super().agenerate(*args, **kwargs)
        except LLMContextWindowExceedError as exc:
            self._overflowed(exc)
            raise
        self._context_overflows = 0
        return response

    def generate(self, *args: PassedOn, **kwargs: PassedOn) -> LLMResponse:
        try:
            response = super().generate(*args, **kwargs)
        except LLMContextWindowExceedError as exc:
            self._overflowed(exc)
            raise
        self._context_overflows = 0
        return response

    def get_token_count(
        self,
        messages: list[Message],
        tools: Sequence[ToolDefinition] | None = None,
        add_security_risk_prediction: bool = False,
    ) -> int:
        # The condenser counts the whole history before every model call: each message is
        # counted once (token_counts.py). The SDK's way stays for what counts the list as
        # a whole: a custom tokenizer (maybe a chat template), mocked tool calls.
        if token_counts.enabled() and not self.custom_tokenizer:
            cc_tools = [
                tool.to_openai_tool(add_security_risk_prediction=add_security_risk_prediction)
                for tool in tools or []
            ]
            if not self.should_mock_tool_calls(cc_tools):
                try:
                    return token_counts.count(
                        self.model, self.format_messages_for_llm(messages), cc_tools
                    )
                except Exception:  # the SDK's own count below logs it, and gives its answer
                    log.debug("token count: falling back to the SDK's", exc_info=True)
        return super().get_token_count(messages, tools, add_security_risk_prediction)

    # One model call's attempt (inside the SDK's retry boundary): the SDK's transport,
    # checked for an answer that was no model reply at all (`NotAModelReply`); a streamed
    # one takes the fast path (fast_stream.py) unless TRIO_ACP_FAST_STREAM=0.
    async def _atransport_call(
        self, *, on_token: AnyTokenCallbackType | None = None, **kwargs: PassedOn
    ) -> ModelResponse:
        # Returns what `on_token` returns (a sync callback's None, an async one's
        # coroutine): the same kind of callback, which mypy cannot tell from the union.
        checked = cast("AnyTokenCallbackType | None", _checked(on_token, kwargs))
        if checked is not None and on_token is not None and fast_stream.enabled():
            kwargs.pop("enable_streaming")
            return await fast_stream.atransport_call(
                self, on_token=on_token, slow_on_token=checked, **kwargs
            )
        return await super()._atransport_call(on_token=checked or on_token, **kwargs)

    def _transport_call(
        self, *, on_token: TokenCallbackType | None = None, **kwargs: PassedOn
    ) -> ModelResponse:
        checked = _checked(on_token, kwargs)
        return super()._transport_call(on_token=checked or on_token, **kwargs)

    def _overflowed(self, exc: BaseException) -> None:
        self._context_overflows += 1
        if self._context_overflows >= CONTEXT_OVERFLOWS:
            self._context_overflows = 0
            # Not an LLMContextWindowExceedError, so the agent does not condense
            # again: the turn ends, and model_failures.py says why.
            raise ContextStillTooLong(
                f"the conversation still exceeds the context window after "
                f"{CONTEXT_OVERFLOWS - 1} condensations: {exc}"
            ) from exc

    def retry_decorator(
        self, *args: PassedOn, **kwargs: PassedOn
    ) -> Callable[[ModelCall], ModelCall]:
        listener = kwargs.pop("retry_listener", None)
        base = super().retry_decorator(*args, **{**kwargs, "retry_listener": None})
        attempts = int(kwargs.get("num_retries", self.num_retries) or 0)
        policy = RetryPolicy(attempts=attempts)
        backoff = wait_exponential(
            multiplier=kwargs.get("retry_multiplier", self.retry_multiplier) or 0,
            min=kwargs.get("retry_min_wait", self.retry_min_wait) or 0,
            max=kwargs.get("retry_max_wait", self.retry_max_wait) or 0,
        )

        def decorate(fn: ModelCall) -> ModelCall:
            wrapped = cast(_Retried, base(fn))  # tenacity's Retrying-wrapped function
            sdk_retry, sdk_before_sleep = wrapped.retry.retry, wrapped.retry.before_sleep

            def exception_of(state: RetryCallState) -> BaseException | None:
                return state.outcome.exception() if state.outcome is not None else None

            def retry(state: RetryCallState) -> bool:
                return policy.should_retry(
                    sdk_retry(state), state.attempt_number, exception_of(state)
                )

            def wait(state: RetryCallState) -> float:
                return policy.wait(backoff(state), exception_of(state))

            def before_sleep(state: RetryCallState) -> None:
                sdk_before_sleep(state)
                if listener is not None:
                    exc = exception_of(state)
                    listener(state.attempt_number, policy.attempts_for(exc), exc)

            return wrapped.retry_with(retry=retry, wait=wait, before_sleep=before_sleep)

        return decorate


class ContextStillTooLong(Exception):
    """Condensing did not make the conversation fit the model's context window."""


class _CheckedTokens[R]:
    """The SDK's token callback for one streamed attempt, checking what answered it. `R`:
    what the callback returns (None, or an async one's coroutine: the SDK awaits it)."""

    def __init__(self, on_token: Callable[[LLMStreamChunk], R]) -> None:
        self.on_token = on_token
        self.checked = False

    def __call__(self, chunk: LLMStreamChunk) -> R:
        if not self.checked:  # the headers are the attempt's: the first chunk has them
            self.checked = True
            refused = fast_stream.not_a_reply(_content_type(chunk))
            if refused is not None:
                raise refused
        return self.on_token(chunk)  # an async callback's coroutine: the SDK awaits it


def _content_type(chunk: LLMStreamChunk) -> str:
    """The response's Content-Type, as litellm keeps it on a stream chunk (else "")."""
    hidden = getattr(chunk, "_hidden_params", None)
    headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    kind = headers.get("llm_provider-content-type") if isinstance(headers, dict) else None
    return kind.lower() if isinstance(kind, str) else ""


def _checked[R](
    on_token: Callable[[LLMStreamChunk], R] | None, kwargs: dict[str, PassedOn]
) -> _CheckedTokens[R] | None:
    if on_token is None or not kwargs.get("enable_streaming"):
        return None
    return _CheckedTokens(on_token)


def load_profile(profile_dir: Path | str | None, name: str) -> SessionLLM:
    """A saved LLM profile, loaded the SDK's way (`LLMProfileStore`, which also resolves a
    linked provider connection's key), as a `SessionLLM` with the profile's own values: its
    failures follow the same retry policy and context-overflow guard as the default model's
    (model_failures.py). Blocking (reads the profile)."""
    saved = LLMProfileStore(profile_dir).load(name)
    return SessionLLM.model_validate(
        {field: getattr(saved, field) for field in saved.model_fields_set}
    )


def use_profile_store(directory: Path) -> None:
    """Point the SDK's default LLM profile store at `directory`, for this process (its
    module default, read on every `LLMProfileStore()`: sessions/build.py says why)."""
    from openhands.sdk.llm import llm_profile_store

    llm_profile_store._DEFAULT_PROFILE_DIR = directory  # type: ignore[misc]
