"""Sub-agents as child sessions (`subagent_update`, unstable; translate/subagents.py
`SubagentSessions`) for a client with the `subagents` capability, and exactly today's
updates for one without: a real delegation on the scripted model, in process over raw
frames, every frame held to the official schema and each `subagent_update` to
`schema.unstable.json`."""

from __future__ import annotations

from test_models_auth_fork import with_raw
from test_unstable_session import unstable_errors

from trio_acp import schema
from trio_acp.openhands.translate.plans import spell_for_client
from trio_acp.openhands.translate.subagents import META_KEY, SubagentSessions
from trio_acp.schema import to_wire, unstable
from trio_acp.testing import scenario_prompt

DELEGATE = scenario_prompt("delegate", "[command:echo from-the-sub-agent]")


def updates(frames) -> list[dict]:
    return [f["params"] for f in frames if f.get("method") == "session/update"]


async def delegate(raw, tmp_path, caps) -> tuple[str, list[dict], dict]:
    await raw.initialize(caps)
    sid = (await raw.new_session(tmp_path))["sessionId"]
    result, frames = await raw.prompt(sid, DELEGATE)
    return sid, updates(frames), result


async def test_a_subagents_client_gets_the_sub_agent_as_a_child_session(env, tmp_path):
    async def body(raw, agent):
        sid, sent, result = await delegate(raw, tmp_path, {"subagents": {}})
        assert result["stopReason"] == "end_turn"
        for params in sent:
            assert unstable_errors("SessionNotification", params) == []
        kinds = [(p["sessionId"], p["update"]["sessionUpdate"]) for p in sent]
        announce = [p["update"] for p in sent if p["update"]["sessionUpdate"] == "subagent_update"]
        assert len(announce) == 2  # the start and the end
        first, last = announce
        child = first["sessionId"]
        assert child != sid
        assert first["state"] == {"state": "running"}
        assert first["title"] == "Run a command"
        assert "from-the-sub-agent" in first["description"]
        assert last == {
            "sessionUpdate": "subagent_update",
            "sessionId": child,
            "state": {"state": "idle", "stopReason": "end_turn"},
        }
        # Both on the parent session; the child's tool calls on the child's, in between.
        i_first = kinds.index((sid, "subagent_update"))
        i_last = len(kinds) - 1 - kinds[::-1].index((sid, "subagent_update"))
        on_child = [i for i, (s, _) in enumerate(kinds) if s == child]
        assert on_child and all(i_first < i < i_last for i in on_child)
        child_calls = [p["update"] for p in sent if p["sessionId"] == child]
        assert {u["sessionUpdate"] for u in child_calls} <= {"tool_call", "tool_call_update"}
        started = [u for u in child_calls if u["sessionUpdate"] == "tool_call"]
        assert "echo from-the-sub-agent" in started[0]["title"]
        assert not started[0]["title"].startswith("Run a command:")  # the child's own title
        # The delegating call is the parent's, and ends just before the child's end.
        parent_id = child_calls[0]["_meta"]["trio_acp"]["parentToolCallId"]
        ends = [
            i
            for i, p in enumerate(sent)
            if p["sessionId"] == sid
            and p["update"].get("toolCallId") == parent_id
            and p["update"].get("status") == "completed"
        ]
        assert ends == [i_last - 1]
        # No sub-agent tool call on the parent session.
        assert not any(
            "/" in (p["update"].get("toolCallId") or "") for p in sent if p["sessionId"] == sid
        )

    await with_raw(env, body)


async def test_a_client_without_subagents_sees_todays_updates(env, tmp_path):
    async def body(raw, agent):
        sid, sent, result = await delegate(raw, tmp_path, {"plan": {}})
        assert result["stopReason"] == "end_turn"
        assert {p["sessionId"] for p in sent} == {sid}
        assert "subagent_update" not in {p["update"]["sessionUpdate"] for p in sent}
        nested = [p["update"] for p in sent if "/" in (p["update"].get("toolCallId") or "")]
        assert nested and nested[0]["title"].startswith("Run a command: ")

    await with_raw(env, body)


# --- SubagentSessions alone (pure: the fast layer) ------------------------------------------


SID = "00000000-0000-0000-0000-000000000001"
META = {META_KEY: {"parentToolCallId": "p1", "subagent": "Run tests"}}


def delegation_steps(end_status: str = "completed") -> list[schema.SessionNotification]:
    args = {"description": "Run tests", "prompt": "Run pytest.", "subagent_type": "x"}
    steps = [
        schema.ToolCallStart(
            tool_call_id="p1", title="Sub-agent x", kind="think", status="pending", raw_input={}
        ),
        schema.ToolCallProgress(
            tool_call_id="p1",
            title="Sub-agent x: Run tests",
            kind="think",
            status="in_progress",
            raw_input=args,
        ),
        schema.ToolCallStart(
            tool_call_id="p1/c1", title="Run tests: pytest", kind="execute", meta=META
        ),
        # The permission flow's status update carries no `_meta` (confirm.py).
        schema.ToolCallProgress(tool_call_id="p1/c1", status="in_progress"),
        schema.ToolCallProgress(tool_call_id="p1/c1", status="completed", meta=META),
        schema.ToolCallProgress(
            tool_call_id="p1",
            status=end_status,
            content=[schema.ContentToolCallContent(content=schema.TextContent(text="it broke"))],
        ),
        schema.AgentMessageChunk(content=schema.TextContent(text="done")),
    ]
    return [schema.SessionNotification(session_id=SID, update=u) for u in steps]


def spelled(caps, steps, between=None) -> list[dict]:
    sessions = SubagentSessions()
    out = []
    for i, n in enumerate(steps):
        if between is not None:
            between(i, sessions)
        out += [to_wire(each) for each in sessions.spell(caps, n)]
    return out


def test_without_the_capability_every_update_is_as_before():
    for caps in (schema.ClientCapabilities(), unstable.ClientCapabilities(plan={})):
        steps = delegation_steps()
        assert spelled(caps, steps) == [to_wire(spell_for_client(caps, n)) for n in steps]


def child_states(out: list[dict]) -> list[dict]:
    return [o["update"]["state"] for o in out if o["update"]["sessionUpdate"] == "subagent_update"]


def test_the_child_is_announced_when_it_runs_and_ended_by_its_call():
    caps = unstable.ClientCapabilities(subagents=unstable.SubagentCapabilities())
    out = spelled(caps, delegation_steps())
    for o in out:
        assert unstable_errors("SessionNotification", o) == []
    assert [(o["sessionId"] != SID, o["update"]["sessionUpdate"]) for o in out] == [
        (False, "tool_call"),
        (False, "tool_call_update"),
        (False, "subagent_update"),
        (True, "tool_call"),
        (True, "tool_call_update"),
        (True, "tool_call_update"),
        (False, "tool_call_update"),
        (False, "subagent_update"),
        (False, "agent_message_chunk"),
    ]
    assert out[2]["update"]["title"] == "Run tests"
    assert out[2]["update"]["description"] == "Run pytest."
    assert out[3]["update"]["title"] == "pytest"
    assert child_states(out) == [{"state": "running"}, {"state": "idle", "stopReason": "end_turn"}]


def test_a_cancelled_or_failed_sub_agent_ends_so():
    caps = unstable.ClientCapabilities(subagents=unstable.SubagentCapabilities())
    failed = spelled(caps, delegation_steps("failed"))
    assert child_states(failed)[-1] == {
        "state": "idle",
        "stopReason": "error",
        "error": {"code": -32603, "message": "it broke"},
    }

    def cancel_at_the_child(i, sessions):
        if i == 3:
            sessions.cancel_requested(SID)

    cancelled = spelled(caps, delegation_steps("failed"), cancel_at_the_child)
    assert child_states(cancelled)[-1] == {"state": "idle", "stopReason": "cancelled"}

    def cancel_then_prompt(i, sessions):
        if i == 1:
            sessions.cancel_requested(SID)
        if i == 2:
            sessions.prompt_received(SID)  # a new turn: its failure is no cancel's

    again = spelled(caps, delegation_steps("failed"), cancel_then_prompt)
    assert child_states(again)[-1]["stopReason"] == "error"


def test_a_delegation_refused_before_it_ran_announces_nothing():
    caps = unstable.ClientCapabilities(subagents=unstable.SubagentCapabilities())
    steps = delegation_steps("failed")
    steps = [steps[0], steps[5]]  # pending, then failed (permission refused)
    assert child_states(spelled(caps, steps)) == []


# --- a cancel, through a real delegation ------------------------------------------------------


async def test_a_cancelled_delegation_ends_its_child_cancelled(env, tmp_path):
    """The cancel comes while the sub-agent's first action is on its way (held there, as
    test_subagents_cancel.py holds it): the child is announced, its call shown on its
    session, and its end says `cancelled`."""
    import uuid

    import trio
    from test_subagents_cancel import WAIT, HeldDelivery

    from _inprocess import RecordingClient, loader
    from trio_acp.openhands.agent import open_openhands_agent
    from trio_acp.schema import UnknownVariant
    from trio_acp.testing.pair import open_in_memory_pair

    class Client(RecordingClient):
        def __init__(self) -> None:
            super().__init__()
            self.sent: list[tuple[str, object]] = []

        async def session_update(self, params):
            self.sent.append((params.session_id, params.update))
            await super().session_update(params)

    client = Client()
    caps = unstable.ClientCapabilities(subagents=unstable.SubagentCapabilities())
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(protocol_version=1, client_capabilities=caps)
            sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            session = agent._sessions[uuid.UUID(sid)]
            hold = HeldDelivery(session.outbox.post_event)
            session.outbox.post_event = hold  # type: ignore[method-assign]
            prompt = scenario_prompt("delegate", command="echo held back")
            result = {}

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
    assert result["r"].stop_reason == "cancelled"
    states = [
        (s, u.data["sessionId"], u.data["state"])
        for s, u in client.sent
        if isinstance(u, UnknownVariant) and u.tag == "subagent_update"
    ]
    assert [state for _, _, state in states] == [
        {"state": "running"},
        {"state": "idle", "stopReason": "cancelled"},
    ]
    child = states[0][1]
    assert {s for s, _, _ in states} == {sid}
    on_child = [u for s, u in client.sent if s == child]
    assert on_child and all(
        isinstance(u, schema.ToolCallStart | schema.ToolCallProgress) for u in on_child
    )
