"""Stopping one tool call while its turn goes on: the agent's side of ACP v2's
`tool_call/cancel` and `terminal/cancel` (docs/v2.md).

The v1 agent has no such method; the v2 gateway (`trio_acp/v2/gateway.py`) asks for it
with an extension request of ours, `frames.STOP_TOOL_CALL`, for the calls of the tools
named here, once it has checked that the tool call is live in the session's turn. A tool
call waiting for the user's permission never comes here: the gateway answers that
question itself. The conversation stops the command (`Conversation.stop_tool_call`:
`permissions/tool_processes.stop_command_in` in process), and the model gets the
interrupted command's result, or the refusal of a command that had not started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trio_acp.rpc import RequestError, after_response
from trio_acp.v2.frames import STOP_TOOL_CALL

if TYPE_CHECKING:
    from trio_acp.openhands.sessions.session import Session

__all__ = ["STOPPABLE_TOOLS", "STOP_TOOL_CALL", "stop"]

#: The tools whose calls can be stopped one by one: the terminal, whose commands go
#: through the run's gate (`permissions/run_gate.py`).
STOPPABLE_TOOLS = frozenset({"terminal"})


def tool_call_id(params: object) -> tuple[str, str]:
    """(session id, tool call id) of a stop request; raises invalid params."""
    if isinstance(params, dict):
        sid, call_id = params.get("sessionId"), params.get("toolCallId")
        if isinstance(sid, str) and isinstance(call_id, str) and call_id:
            return sid, call_id
    raise RequestError.invalid_params(f"{STOP_TOOL_CALL} takes a sessionId and a toolCallId")


async def stop(session: Session, call_id: str) -> dict[str, bool]:
    """Stop `call_id`'s command in `session`: `{"stopping": false}` when it was over.

    Answered as soon as the stop is decided, and its command stopped after the answer
    (the draft: "The response does not mean the work has stopped"): the answer then
    precedes the tool call's final update on the wire, which the gateway reports as
    `cancelled` only once it knows the call is being stopped."""
    if not await session.until_open():
        raise RequestError.invalid_params("the session has no conversation to stop a tool in")
    conversation = session.conversation
    assert conversation is not None
    stopping, stop_command = conversation.stop_tool_call(call_id)
    if stop_command is not None:
        after_response(stop_command)
    return {"stopping": stopping}
