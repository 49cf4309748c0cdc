"""What the user should know while the agent works: notices, and compactions as such.

ACP has a `notice` session update (a live, fire-and-forget message: a model call being
retried, an MCP server that did not start) and `compaction_update` (a condensation of the
history as an entity with a status and a summary). Both MUST only be sent to a client that
advertised `clientCapabilities.session.notices` / `.compaction`; anything else gets what it
always got: a thought note, or nothing. Pure apart from `logging`: no trio, no SDK import.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

from .. import schema
from . import model_failures
from .translate.text import one_line

log = logging.getLogger(__name__)

# The SDK's own logger for the conversation: it reports an MCP server that failed to start
# only as a warning there, then goes on without that server's tools.
SDK_CONVERSATION_LOGGER = "openhands.sdk.conversation.impl.local_conversation"
_MCP_FAILED = "MCP server startup failed"


def _session_capabilities(client: Any) -> Any:
    capabilities = getattr(client, "capabilities", None)
    return getattr(capabilities, "session", None)


def supports_notices(client: Any) -> bool:
    """The client advertised `session.notices` (`{}` or more; omitted or null is no)."""
    return getattr(_session_capabilities(client), "notices", None) is not None


def supports_compaction(client: Any) -> bool:
    """The client advertised `session.compaction`."""
    return getattr(_session_capabilities(client), "compaction", None) is not None


def retry_note(client: Any, attempt: int, total: int, error: BaseException | None) -> Any:
    """A model call failed and will be retried: a warning notice, else a thought note.

    It also explains why a reply that was streaming may start over, and when the next
    attempt starts (model_failures.py decides the wait).
    """
    if supports_notices(client):
        return schema.NoticeUpdate(
            severity="warning",
            title=f"The model call failed; retrying {model_failures.retry_when(error)} "
            f"(attempt {attempt + 1} of {total})",
            description=model_failures.retry_reason(error),
        )
    text = model_failures.retry_note(attempt, total, error)
    return schema.AgentThoughtChunk(content=schema.TextContent(text=text))


def mcp_failure_notices(client: Any, failures: list[str]) -> list[Any]:
    """Notices for MCP servers that did not start (nothing for a client without notices:
    there is no turn to put a note in, and the reason is in the agent's log)."""
    if not supports_notices(client):
        return []
    return [
        schema.NoticeUpdate(
            severity="error",
            title="An MCP server did not start; the agent goes on without its tools",
            description=one_line(failure, 1000),
        )
        for failure in failures
    ]


class _ThreadRecords(logging.Handler):
    """Collects one thread's records of one kind (other sessions warm up concurrently)."""

    def __init__(self, prefix: str) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.prefix = prefix
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread and str(record.msg).startswith(self.prefix):
            try:
                self.messages.append(record.getMessage())
            except Exception:
                self.messages.append(str(record.msg))


@contextlib.contextmanager
def watch_mcp_startup() -> Iterator[list[str]]:
    """Within the block, on this thread: the SDK's "MCP server startup failed" warnings."""
    handler = _ThreadRecords(_MCP_FAILED)
    logger = logging.getLogger(SDK_CONVERSATION_LOGGER)
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
