"""The sub-agents' hub (openhands/setup/subagents.py): a sub-agent's thread asks the running turn
and waits; every way a turn can end releases it; nothing is approved by default; stopping
waits for the sub-agent's thread. Real threads, no SDK."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import trio
import trio.testing

from trio_acp.openhands.permissions.confirm import CANCELLED
from trio_acp.openhands.setup.subagents import (
    REJECT,
    RUN,
    STOP,
    Hub,
    serve_subagents,
)

ACTIONS = [SimpleNamespace(tool_call_id="c1", tool_name="terminal")]


async def ask_in_thread(hub: Hub, d: Any) -> tuple[str, str]:
    return await trio.to_thread.run_sync(hub.ask, d, ACTIONS)


async def test_nobody_to_ask_means_stop() -> None:
    hub = Hub()
    d = hub.begin("p1", "sub")
    assert (await ask_in_thread(hub, d))[0] == STOP


async def test_the_turn_answers_and_a_cancel_releases_the_question() -> None:
    hub = Hub()
    d = hub.begin("p1", "sub")
    asked = trio.Event()
    answers = [RUN]

    async def decide(ask: Any) -> tuple[str, str]:
        if answers:
            return answers.pop(0), ""
        asked.set()
        await trio.sleep_forever()  # a user who never answers
        raise AssertionError

    async with trio.open_nursery() as nursery:
        await nursery.start(hub.serve, decide)
        assert await ask_in_thread(hub, d) == (RUN, "")
        result: list[Any] = []

        async def waiting() -> None:
            result.append(await ask_in_thread(hub, d))

        nursery.start_soon(waiting)
        await asked.wait()
        hub.interrupt()  # what the executor's interrupt() does on a cancel
        while not result:
            await trio.sleep(0.01)
        assert result[0][0] == STOP
        # After a cancel, a delegation that starts is stopped at once...
        assert hub.begin("p2", "late").stopped.is_set()
        nursery.cancel_scope.cancel()
    # ...and a question after the turn stopped serving is not approved.
    assert (await ask_in_thread(hub, hub.begin("p3", "after")))[0] == STOP


async def test_the_end_of_serving_releases_a_pending_question() -> None:
    hub = Hub()
    d = hub.begin("p1", "sub")
    asked = trio.Event()

    async def decide(ask: Any) -> tuple[str, str]:
        asked.set()
        await trio.sleep_forever()
        raise AssertionError

    result: list[Any] = []
    async with trio.open_nursery() as outer:

        async def waiting() -> None:
            result.append(await ask_in_thread(hub, d))

        with trio.CancelScope() as serving:
            outer.start_soon(waiting)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(hub.serve, decide)
                await asked.wait()
                serving.cancel()
    assert result[0][0] == STOP


class Host:
    """A turn's host whose `confirm_pending` answers from a script."""

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome
        self.seen: list[str] = []

    async def confirm_pending(self, conv: Any, cancel_event: trio.Event) -> str:
        pending = await conv.pending_actions()
        self.seen = [a.tool_call_id for a in pending]
        if self.outcome == "reject":
            await conv.reject_pending("The user rejected: terminal ls.")
        if self.outcome == "fail":
            raise RuntimeError("the client's UI crashed")
        return CANCELLED if self.outcome == "cancel" else "continue"


def conversation_with(hub: Hub) -> Any:
    return SimpleNamespace(sdk_conversation=SimpleNamespace(_visualizer=SimpleNamespace(hub=hub)))


async def test_the_turn_asks_with_its_own_confirmation_under_nested_ids() -> None:
    for outcome, expected in [
        ("allow", RUN),
        ("reject", REJECT),
        ("fail", REJECT),
        ("cancel", STOP),
    ]:
        hub, host = Hub(), Host(outcome)
        d = hub.begin("p1", "sub")
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_subagents, host, conversation_with(hub), trio.Event())
            answer, reason = await ask_in_thread(hub, d)
            nursery.cancel_scope.cancel()
        assert answer == expected, outcome
        assert host.seen == ["p1/c1"]  # the ids the client knows the calls by
        if outcome == "reject":
            assert "rejected" in reason


async def test_serving_without_a_hub_returns_at_once() -> None:
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(serve_subagents, Host("allow"), SimpleNamespace(), trio.Event())


def test_stop_all_stops_processes_interrupts_and_waits_for_the_thread() -> None:
    hub = Hub()
    d = hub.begin("p1", "sub")
    interrupted = threading.Event()
    tool_interrupted = threading.Event()
    stopped: list[Any] = []
    executor = SimpleNamespace(interrupt=tool_interrupted.set)
    conv = SimpleNamespace(
        agent=SimpleNamespace(tools_map={"terminal": SimpleNamespace(executor=executor)}),
        interrupt=interrupted.set,
    )
    d.conversation = conv

    def sub_agent_thread() -> None:  # the sub-agent's run() ends once it is interrupted
        interrupted.wait(10)
        hub.end(d)

    thread = threading.Thread(target=sub_agent_thread)
    thread.start()
    hub.stop_all(stopped.append, wait=10)
    assert d.stopped.is_set() and tool_interrupted.is_set() and stopped == [conv]
    assert d.finished.is_set()  # stop_all returned only once the thread was done
    thread.join()


def test_a_sub_agents_events_are_framed_by_its_start_and_end() -> None:
    posted: list[Any] = []
    hub = Hub(posted.append)
    d = hub.begin("p1", "sub")
    hub.post(d, "an event")
    hub.end(d)
    assert [type(p).__name__ for p in posted] == ["SubagentBegan", "SubagentEvent", "SubagentEnded"]
    assert {p.parent_tool_call_id for p in posted} == {"p1"}
    assert d.finished.is_set()


async def test_waiting_for_the_sub_agents_returns_once_the_last_one_ended() -> None:
    hub = Hub(lambda item: None)
    with trio.fail_after(5):
        assert await hub.wait_ended()  # none runs
    first, second = hub.begin("p1", "a"), hub.begin("p2", "b")
    ended: list[bool] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            ended.append(await hub.wait_ended(timeout=30))

        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        await trio.to_thread.run_sync(hub.end, first)  # the sub-agents' own threads
        await trio.testing.wait_all_tasks_blocked()
        assert ended == []  # one still runs
        await trio.to_thread.run_sync(hub.end, second)
    assert ended == [True]


async def test_waiting_for_a_sub_agent_that_does_not_end_is_bounded(autojump_clock) -> None:
    hub = Hub(lambda item: None)
    d = hub.begin("p1", "stuck")
    with trio.fail_after(60):
        assert not await hub.wait_ended(timeout=5)
    # Once stopping gave up on it, a turn's end does not wait for it again.
    d.conversation = None
    hub.stop_all(lambda conv: None, wait=0)
    start = trio.current_time()
    assert not await hub.wait_ended(timeout=5)
    assert trio.current_time() == start
