"""/condense on an in-process conversation: summarise the history now, say why it could not.

`LocalConversation.condense` (local_conversation.py) delegates here. The SDK only logs why
a summary's model call failed and raises without the reason, and keeps the request it could
not serve for the next turn; this module reads the log of the calling thread and moves the
conversation's head back.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING

import trio

from trio_acp.openhands.backends.conversation import Condensed
from trio_acp.openhands.errors import SEE_LOG, describe

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import LocalConversation as SdkConversation
    from trio_acp.openhands.sdk.loaded import Sdk

log = logging.getLogger(__name__)


async def condense(sdk: Sdk, conv: SdkConversation, limiter: trio.CapacityLimiter) -> Condensed:
    """Condense `conv` now, in worker threads under the conversation's `limiter`."""

    def has_history() -> bool:
        # Only the system prompt so far: the SDK would record a condensation request it
        # cannot serve, and the next prompt would pay for it. Nothing to do, say so.
        return any(type(e).__name__ != "SystemPromptEvent" for e in conv.state.view.events)

    if not await trio.to_thread.run_sync(has_history, limiter=limiter):
        return Condensed(empty=True)
    before = len(conv.state.events)
    error, logged = await trio.to_thread.run_sync(_condense_now, conv, limiter=limiter)
    if error is not None:
        return Condensed(failure=_condense_failure(sdk, error, logged))
    return Condensed(added=len(conv.state.events) - before)


class _ThreadWarnings(logging.Handler):
    """Warnings logged by the calling thread (the condenser's logger is shared by sessions)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.messages.append(record.getMessage())


def _condense_now(conv: SdkConversation) -> tuple[Exception | None, list[str]]:
    # When the summary's model call fails, the SDK logs why and raises without it
    # ("Unable to compute forgotten events"): the log is where the reason is.
    seen = _ThreadWarnings()
    logger = logging.getLogger(CONDENSER_LOGGER)
    events = conv.state.events
    head = events[-1].id if len(events) else None
    logger.addHandler(seen)
    try:
        conv.condense()
        return None, seen.messages
    except Exception as exc:
        _forget_request(conv, head)
        return exc, seen.messages
    finally:
        logger.removeHandler(seen)


def _forget_request(conv: SdkConversation, head: str | None) -> None:
    """Put the conversation back where it was before a failed /condense.

    The SDK keeps the condensation request it could not serve, and the next turn serves
    it first — with the user's new message inside the summary, not answered. Moving the
    conversation's head back leaves the request on an abandoned branch (still on disk,
    out of the model's view).
    """
    if head is None:
        return
    try:
        conv.navigate_to(head)
    except Exception:
        log.warning("could not drop the failed condensation request", exc_info=True)


CONDENSER_LOGGER = "openhands.sdk.context.condenser"
_LLM_FAILED = re.compile(r"LLM call failed: (.*?)(?:\. Reducing max event size.*)?$", re.S)


def _condense_failure(sdk: Sdk, exc: Exception, logged: list[str]) -> str:
    unchanged = "The history is unchanged"
    if isinstance(exc, ValueError) and "condenser" in str(exc).lower():
        # The SDK's text goes on with a Python snippet meant for SDK users.
        return f"{str(exc).splitlines()[0]} {unchanged}."
    if isinstance(exc, getattr(sdk, "NoCondensationAvailableException", ())):
        for text in [str(exc), *reversed(logged)]:
            found = _LLM_FAILED.search(text)
            if found:
                reason = " ".join(found.group(1).split())[:300]
                return f"the model call that writes the summary failed ({reason}). {unchanged}."
        return f"no summary could be written ({describe(exc)}). {unchanged}."
    return f"{describe(exc)}. {unchanged}. ({SEE_LOG})"
