"""A run lost with the agent-server, settled before the next message (`remote.py`).

A server restarted mid-run records the cut action itself (its reload turns a saved
"running" into an error with a result for the action), but not an action it was running as
approved: the SDK saves the status only when a step lets go of the state's lock, so the saved
one is still "waiting_for_confirmation", and the next run would take the action as approved
again, run it a second time, and the model would read the cut request and the next one as
one message. Such actions get a result that says what happened (`CUT_BY_RESTART`). Only
when the server did restart: a server that was merely unreachable may still be running them
(its saved status is as stale), and a second result would contradict the first.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from trio_acp.openhands.backends.agent_server_api import REQUEST_TIMEOUT, RemoteError
from trio_acp.openhands.translate.interruptions import LOST_NOTE

if TYPE_CHECKING:
    from trio_acp.openhands.backends.remote import RemoteConversationDriver
    from trio_acp.openhands.sdk.classes import RemoteConversation

log = logging.getLogger(__name__)

# The tool result of an approved action the agent-server was running when trio-acp lost it,
# and which the restarted server still holds as waiting for approval.
CUT_BY_RESTART = (
    "The agent-server stopped while this approved action ran and was restarted: the action "
    "was cut short, and may have run in part or not at all."
)


async def settle_lost_run(
    driver: RemoteConversationDriver, conv: RemoteConversation, *, approving: bool, began: float
) -> str | None:
    """Make what the server kept of the lost run true; the note the next message opens
    with (`LOST_NOTE`), or None. `approving`: the run was running approved actions;
    `began`: when it began (`time.monotonic()`)."""
    assert driver.id is not None
    info = await driver.get_info(driver.id)
    status = str((info or {}).get("execution_status") or "")
    if approving and status == "waiting_for_confirmation":
        if await _restarted_since(driver, began):
            await driver.call(lambda: conv.reject_pending_actions(CUT_BY_RESTART))
    elif status != "running" and await driver.call(lambda: _unanswered(driver, conv)):
        # The cut request has nothing after it (lost while the model was called): the
        # SDK would merge it with the next message, as after a cancel
        # (INTERRUPTION_NOTE). A server still running it answers it yet.
        return LOST_NOTE
    return None


def _unanswered(driver: RemoteConversationDriver, conv: RemoteConversation) -> bool:
    """Whether the last event the model reads is the user's message."""
    events = conv.state.events
    for i in range(len(events) - 1, -1, -1):
        event = events[i]
        if hasattr(event, "to_llm_message"):  # what the model reads
            return isinstance(event, driver.sdk.MessageEvent) and event.source == "user"
    return False


async def _restarted_since(driver: RemoteConversationDriver, began: float) -> bool:
    """Whether the server's process started after `began` (`time.monotonic()`)."""
    try:
        workspace = driver.live()[1]
        response = await driver.call(
            lambda: workspace.client.get("/server_info", timeout=REQUEST_TIMEOUT)
        )
        uptime = float(response.json()["uptime"])
    except (RemoteError, KeyError, TypeError, ValueError) as exc:
        log.warning("could not tell whether the agent-server restarted: %s", exc)
        return False
    # `uptime` is whole seconds, rounded down: a second of margin.
    return uptime + 1.0 <= time.monotonic() - began
