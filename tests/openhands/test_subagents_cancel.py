"""A cancel while a sub-agent's events are still on their way from its thread: the turn
answers only once they are shown (openhands/setup/subagents.py, translate/subagents.py).

The real SDK in process, on the scripted model: the parent delegates with the `task` tool
and the sub-agent runs a terminal command. The sub-agent's thread is held as it delivers
its ActionEvent; the cancel comes meanwhile, and the parent's interrupted run closes the
delegating call first (the SDK's error for the interrupted tool call). Then the sub-agent's
delivery goes on. Its call must still reach the client, inside the turn, before the
delegating call's end — not be dropped as an update about a call that already ended.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import trio

from _inprocess import RecordingClient, loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.testing import scenario_prompt
from trio_acp.testing.pair import open_in_memory_pair

WAIT = 60.0  # a bound against hanging, never reached when the test passes

TOOL_UPDATES = (schema.ToolCallStart, schema.ToolCallProgress)


class HeldDelivery:
    """Wraps a session's `outbox.post_event` (what the SDK's threads call): holds the
    sub-agent's first ActionEvent on its thread until the parent's own error for the
    interrupted delegating call has been posted."""

    def __init__(self, post: Any) -> None:
        self._post = post
        self.held = threading.Event()
        self.parent_closed = threading.Event()

    def __call__(self, event: Any) -> None:
        inner = getattr(event, "event", None)
        if (
            type(event).__name__ == "SubagentEvent"
            and type(inner).__name__ == "ActionEvent"
            and not self.held.is_set()
        ):
            self.held.set()
            # The sub-agent's thread, mid-delivery. Bounded: the test fails, never hangs.
            self.parent_closed.wait(WAIT)
        self._post(event)
        if type(event).__name__ == "AgentErrorEvent":
            self.parent_closed.set()


def _tool_updates(client: RecordingClient) -> list[Any]:
    return [u for u in client.updates if isinstance(u, TOOL_UPDATES)]


async def test_a_cancel_waits_for_the_sub_agents_call_still_on_its_way(env, tmp_path):
    client = RecordingClient()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            session = agent._sessions[uuid.UUID(sid)]
            hold = HeldDelivery(session.outbox.post_event)
            session.outbox.post_event = hold  # type: ignore[method-assign]
            prompt = scenario_prompt("delegate", command="echo held back")
            result: dict[str, Any] = {}

            async def run_prompt() -> None:
                result["r"] = await conn.agent.prompt(
                    session_id=sid, prompt=[schema.TextContent(text=prompt)]
                )

            with trio.fail_after(WAIT):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(run_prompt)
                    while not hold.held.is_set():
                        await trio.sleep(0.01)
                    await conn.agent.cancel(session_id=sid)
            updates = _tool_updates(client)
            answered_with = len(client.updates)

            assert result["r"].stop_reason == "cancelled"
            assert hold.parent_closed.is_set()  # the race happened as intended
            nested = [u for u in updates if "/" in u.tool_call_id]
            assert nested, "the sub-agent's call never reached the client"
            start = nested[0]
            assert isinstance(start, schema.ToolCallStart)
            assert "echo held back" in (start.title or "")
            parent = start.tool_call_id.split("/")[0]
            assert (start.meta or {})["trio_acp"]["parentToolCallId"] == parent
            assert nested[-1].status in ("completed", "failed")
            # The delegating call ends after its sub-agent's call is shown, and nothing
            # is said about either after that.
            ends = [
                i
                for i, u in enumerate(updates)
                if u.tool_call_id == parent and u.status in ("completed", "failed")
            ]
            assert len(ends) == 1
            assert all(updates.index(u) < ends[0] for u in nested)
            # Nothing of the turn after its response; the session goes on.
            after = await conn.agent.prompt(
                session_id=sid, prompt=[schema.TextContent(text=scenario_prompt("echo", "on"))]
            )
            assert after.stop_reason == "end_turn"
            late = [u for u in client.updates[answered_with:] if isinstance(u, TOOL_UPDATES)]
            assert late == []
