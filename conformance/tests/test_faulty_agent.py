"""The reference agent itself, where a race in it once made the suite's own tests flaky."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trio_acp_conformance.checks._util import turn_update_since
from trio_acp_conformance.harness import Frame, open_agent
from trio_acp_conformance.scenarios import slow_prompt

from .conftest import faulty_command


async def test_a_close_read_right_behind_a_prompt_cancels_it(tmp_path: Path) -> None:
    """A session/close that arrives in the same read as a prompt ends that prompt
    "cancelled". Both handlers start in one Trio batch, in either order; the close used to
    drop the session before the prompt's handler looked it up, which then answered -32002
    "unknown session" (ACP-CLOSE-002 failed on the unbroken agent under load, when the check
    sent its close that early). Each round has even odds of the close running first."""
    env = dict(os.environ, OPENHANDS_PERSISTENCE_DIR=str(tmp_path / "persistence"))
    async with open_agent(
        "close-race", faulty_command(), env=env, cwd=str(tmp_path), stderr_path=tmp_path / "err"
    ) as agent:
        await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        answers = []
        for _ in range(12):
            new = await agent.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            sid = new.result["sessionId"]
            prompt, close = await agent.send_together(
                [
                    {
                        "jsonrpc": "2.0",
                        "id": agent.new_id(),
                        "method": "session/prompt",
                        "params": {
                            "sessionId": sid,
                            "prompt": [{"type": "text", "text": slow_prompt()}],
                        },
                    },
                    {
                        "jsonrpc": "2.0",
                        "id": agent.new_id(),
                        "method": "session/close",
                        "params": {"sessionId": sid},
                    },
                ]
            )
            assert prompt is not None and close is not None
            answers.append(((await prompt.wait(10)).describe(), (await close.wait(10)).describe()))
    assert answers == [('result {"stopReason": "cancelled"}', "result {}")] * 12


class _Frames:
    def __init__(self, frames: list[Frame]) -> None:
        self.frames = frames

    def since(self, mark: int) -> list[Frame]:
        return [f for f in self.frames if f.seq > mark]


def _update(seq: int, sid: str, kind: str) -> Frame:
    msg: dict[str, Any] = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": sid, "update": {"sessionUpdate": kind}},
    }
    return Frame(seq=seq, direction="in", time=0.0, raw=b"", msg=msg)


def test_a_session_level_update_does_not_show_a_turn_under_way() -> None:
    """What the close and cancel checks wait for before they close or cancel a running turn:
    the `available_commands_update` an agent sends after answering session/new may come after
    the prompt was sent, and says nothing about the turn."""
    agent: Any = _Frames([_update(5, "s1", "available_commands_update")])
    assert not turn_update_since(agent, "s1", 3)
    agent.frames.append(_update(6, "s2", "agent_message_chunk"))
    assert not turn_update_since(agent, "s1", 3)
    agent.frames.append(_update(7, "s1", "agent_message_chunk"))
    assert turn_update_since(agent, "s1", 3)
    assert not turn_update_since(agent, "s1", 7)
