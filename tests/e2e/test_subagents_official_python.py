"""Sub-agents (the `task` tool) end to end, under the official Python client.

The scripted model drives both agents: the parent's prompt selects the `delegate` scenario,
whose `task` call hands the sub-agent a prompt selecting its own scenario (its LLM calls
come to the same server, with a history of their own). The client sees the sub-agent's tool
calls nested under the delegating one (`_meta.trio_acp.parentToolCallId`), is asked before
each of them in the default `always-ask` mode, and a cancel while the sub-agent's command
runs ends the turn `cancelled` with nothing left running.
"""

from __future__ import annotations

import asyncio
import os

import psutil
import pytest

acp = pytest.importorskip("acp")

from _oh_harness import (  # noqa: E402
    TIMEOUT,
    Client,
    Wire,
    _prompt,
    _run,
    agent_env,
    new_session,
    trio_acp_agent,
)
from acp.schema import (  # noqa: E402
    AllowedOutcome,
    DeniedOutcome,
    RequestPermissionResponse,
    ToolCallProgress,
    ToolCallStart,
)

from trio_acp.testing import scenario_prompt  # noqa: E402


class AnsweringClient(Client):
    """Answers permission requests from a queue of option ids; records what it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[str] = []
        self.asked: list = []
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append(tool_call)
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "hang":  # a user who has not answered when the cancel comes
            self.waiting.set()
            await self.release.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )


def _calls(client: Client) -> dict[str, list]:
    """Every tool call update, by tool call id, in order."""
    calls: dict[str, list] = {}
    for _, u in client.updates:
        if isinstance(u, (ToolCallStart, ToolCallProgress)):
            calls.setdefault(u.tool_call_id, []).append(u)
    return calls


def _parent_of(update) -> str | None:
    meta = update.field_meta or {}
    return (meta.get("trio_acp") or {}).get("parentToolCallId")


SLEEP = 57  # the sub-agent's command: `sleep 57`


def _sleeps(agent: psutil.Process) -> list[int]:
    """The sub-agent's `sleep 57` processes. By its whole command line: a shell starting
    up may run a `sleep` of its own (pyenv's rehash in ~/.bashrc sleeps 0.1 s while another
    shell holds its lock), which is not the sub-agent's command."""
    pids = []
    for p in agent.children(recursive=True):
        try:
            if p.cmdline() == ["sleep", str(SLEEP)]:
                pids.append(p.pid)
        except psutil.Error:
            pass
    return pids


async def _delegation(llm, home, ws):
    client, wire, out = AnsweringClient(), Wire(), {}
    async with trio_acp_agent(client, wire, agent_env(llm, home)) as (conn, process):
        sid = (await new_session(conn, ws)).session_id

        # 1. Allowed: the task, then the sub-agent's command (always).
        client.answers = ["allow_once", "allow_always"]
        prompt = scenario_prompt("delegate", command=f"touch {ws}/by-sub-agent")
        out["allowed"] = (await _prompt(conn, wire, sid, prompt)).stop_reason
        out["allowed_calls"], out["allowed_asked"] = _calls(client), list(client.asked)
        out["allowed_text"] = client.text()
        out["files_after_allowed"] = sorted(os.listdir(ws))
        # The session's "always" rule covers the sub-agent's command next time.
        client.asked.clear()
        client.answers = ["allow_once"]
        out["again"] = (await _prompt(conn, wire, sid, prompt)).stop_reason
        out["again_asked"] = [a.title for a in client.asked]

        # 2. The sub-agent's (other) command refused: never run; the turn ends normally.
        client.updates.clear()
        client.asked.clear()
        client.answers = ["allow_once", "reject_once"]
        prompt = scenario_prompt("delegate", command=f"touch {ws}/refused")
        out["refused"] = (await _prompt(conn, wire, sid, prompt)).stop_reason
        out["refused_asked"] = list(client.asked)
        out["files_after_refused"] = sorted(os.listdir(ws))

        # 2b. A cancel while the sub-agent's permission request is pending.
        client.asked.clear()
        client.answers = ["allow_once", "hang"]
        prompt = scenario_prompt("delegate", command=f"touch {ws}/never")
        task = asyncio.create_task(_prompt(conn, wire, sid, prompt))
        await asyncio.wait_for(client.waiting.wait(), TIMEOUT)
        await conn.cancel(session_id=sid)
        client.release.set()
        out["cancel_during_ask"] = (await asyncio.wait_for(task, TIMEOUT)).stop_reason
        out["files_after_cancel_during_ask"] = sorted(os.listdir(ws))

        # 3. A cancel while the sub-agent's `sleep` runs; in always-approve nobody is asked.
        await _prompt(conn, wire, sid, "/confirm always-approve")
        agent = psutil.Process(process.pid)
        client.updates.clear()
        client.asked.clear()
        client.answers = []
        prompt = scenario_prompt("delegate", sub="sleep", seconds=SLEEP)
        task = asyncio.create_task(_prompt(conn, wire, sid, prompt))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + TIMEOUT
        # The moment its `sleep` exists, whether or not the client has seen the sub-agent's
        # call yet: the turn answers only once the sub-agent's last events are shown
        # (openhands/setup/subagents.py).
        while not _sleeps(agent) and loop.time() < deadline and not task.done():
            await asyncio.sleep(0.05)
        out["sleeping"] = bool(_sleeps(agent))
        await conn.cancel(session_id=sid)
        out["cancelled"] = (await asyncio.wait_for(task, TIMEOUT)).stop_reason
        out["sleeps_after_cancel"] = _sleeps(agent)
        out["cancel_calls"] = _calls(client)
        out["cancel_updates"] = list(client.updates)
        out["cancel_asked"] = list(client.asked)
        # The session goes on.
        out["after"] = (await _prompt(conn, wire, sid, scenario_prompt("echo", "next"))).stop_reason
        out["late"] = wire.updates_after_responses()
        out["schema"] = wire.schema_errors()
    out["requests"] = list(llm.requests)
    return out


def test_delegation_is_nested_asked_and_cancellable():
    out = _run(_delegation)

    # 1. The task call, then the sub-agent's command nested under it.
    assert out["allowed"] == "end_turn"
    assert "by-sub-agent" in out["files_after_allowed"]
    task_asked, sub_asked = out["allowed_asked"]
    assert task_asked.title.startswith("Sub-agent general-purpose: Run a command")
    assert task_asked.kind == "think"
    assert "touch" in str(sub_asked.raw_input)
    assert sub_asked.tool_call_id.startswith(task_asked.tool_call_id + "/")
    # The request names the call as the client was shown it: label, parent.
    assert sub_asked.title.startswith("Run a command: touch ")
    assert _parent_of(sub_asked) == task_asked.tool_call_id
    calls = out["allowed_calls"]
    task_updates = calls[task_asked.tool_call_id]
    sub_updates = calls[sub_asked.tool_call_id]
    assert isinstance(sub_updates[0], ToolCallStart)
    assert _parent_of(sub_updates[0]) == task_asked.tool_call_id
    assert sub_updates[0].title.startswith("Run a command: touch ")
    assert sub_updates[-1].status == "completed"
    # While it worked, the delegating call listed the sub-agent's steps; its result is the
    # sub-agent's final message, which the parent's model then quoted.
    assert any(
        u.content
        and "touch" in u.content[0].content.text
        and "Sub-agent" in u.content[0].content.text
        for u in task_updates
        if isinstance(u, ToolCallProgress) and u.status is None
    )
    assert task_updates[-1].status == "completed"
    assert "I ran the command in the terminal." in task_updates[-1].content[0].content.text
    assert "The sub-agent reported:" in out["allowed_text"]
    assert "I ran the command in the terminal." in out["allowed_text"]
    # The sub-agent's model calls: not streamed, its own history starting at its prompt.
    sub_requests = [r for r in out["requests"] if "[scenario:terminal]" in str(r.messages[-1:])]
    assert sub_requests and not any(r.stream for r in sub_requests)

    assert out["again"] == "end_turn"
    assert len(out["again_asked"]) == 1 and out["again_asked"][0].startswith("Sub-agent")

    # 2. Refused: asked, never run.
    assert out["refused"] == "end_turn"
    assert len(out["refused_asked"]) == 2
    assert "refused" not in out["files_after_refused"]

    assert out["cancel_during_ask"] == "cancelled"
    assert "never" not in out["files_after_cancel_during_ask"]

    # 3. Cancelled mid-command: the turn ends `cancelled`, no sleep survives, the
    # delegating call and the sub-agent's call are closed, the sub-agent's first.
    assert out["sleeping"] and out["cancel_asked"] == []
    assert out["cancelled"] == "cancelled"
    assert out["sleeps_after_cancel"] == []
    calls = out["cancel_calls"]
    for call_id, updates in calls.items():
        assert updates[-1].status in ("completed", "failed"), (call_id, updates[-1])
    (nested,) = [call_id for call_id in calls if "/" in call_id]
    # The killed command's own result is shown (exit code and all), then the delegating
    # call's end: the sub-agent's last events are not dropped behind the parent's.
    assert "exit_code" in (calls[nested][-1].raw_output or {})
    parent = nested.split("/")[0]
    tool_updates = [
        u for _, u in out["cancel_updates"] if isinstance(u, ToolCallStart | ToolCallProgress)
    ]
    last = {u.tool_call_id: i for i, u in enumerate(tool_updates)}  # each call's last update
    assert last[nested] < last[parent]
    assert out["after"] == "end_turn"
    assert out["late"] == []
    errors, checked = out["schema"]
    assert errors == [] and checked > 0
