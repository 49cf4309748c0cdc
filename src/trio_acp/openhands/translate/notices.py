"""What the user should know while the agent works: notices, and compactions as such.

ACP has a `notice` session update (a live, fire-and-forget message: a model call being
retried, an MCP server that did not start) and `compaction_update` (a condensation of the
history as an entity with a status and a summary). Both MUST only be sent to a client that
advertised `clientCapabilities.session.notices` / `.compaction`; anything else gets what it
always got: a thought note, or nothing. Pure apart from `logging`: no trio, no SDK import.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from trio_acp import schema
from trio_acp.openhands.translate import model_failures
from trio_acp.openhands.translate.text import one_line

if TYPE_CHECKING:
    from trio_acp.openhands.setup.mcp_startup import McpStartFailure

log = logging.getLogger(__name__)


def _session_capabilities(client: object) -> object:
    capabilities = getattr(client, "capabilities", None)
    return getattr(capabilities, "session", None)


def supports_notices(client: object) -> bool:
    """The client advertised `session.notices` (`{}` or more; omitted or null is no)."""
    return getattr(_session_capabilities(client), "notices", None) is not None


def supports_compaction(client: object) -> bool:
    """The client advertised `session.compaction`."""
    return getattr(_session_capabilities(client), "compaction", None) is not None


def retry_note(
    client: object, attempt: int, total: int, error: BaseException | None
) -> schema.NoticeUpdate | schema.AgentThoughtChunk:
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


def mcp_failure_notices(
    client: object, failures: Sequence[McpStartFailure]
) -> list[schema.NoticeUpdate]:
    """One notice per MCP server that did not start, naming it and why (nothing for a
    client without notices: `mcp_failure_note` is its fallback)."""
    if not supports_notices(client):
        return []
    return [
        schema.NoticeUpdate(
            severity="error",
            title=f"MCP server {failure.server!r} did not start; the agent goes on without its tools",
            description=one_line(failure.reason, 1000),
        )
        for failure in failures
    ]


def mcp_failure_note(failures: Sequence[McpStartFailure]) -> schema.AgentThoughtChunk:
    """For a client without notices: the same, as a thought note in a turn."""
    lines = [
        f"MCP server {failure.server!r} did not start; going on without its tools: "
        f"{one_line(failure.reason, 1000)}"
        for failure in failures
    ]
    return schema.AgentThoughtChunk(content=schema.TextContent(text="\n".join(lines) + "\n"))
