"""Conversations on a real OpenHands agent-server (openhands-agent-server, same version as the
SDK) with the scripted model: streaming, permission, cancel, reload, a server crash.

One server for the module (starting one imports the whole SDK: ~10-30 s); the crash test
kills and restarts it, so it runs last.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import threading
import uuid
from pathlib import Path
from typing import Any

import attrs
import psutil
import pytest
import trio

from trio_acp.openhands.backends.agent_server_config import AgentServerTarget
from trio_acp.openhands.backends.remote import (
    INTERRUPTION_NOTE,
    MARKER_VAR,
    RemoteConversationDriver,
    RemoteError,
    delete_conversation,
    get_conversation,
    list_conversations,
)
from trio_acp.openhands.backends.remote_lost_run import CUT_BY_RESTART
from trio_acp.testing import ScriptedLLM, fast_llm_kwargs, scenario_prompt

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def sdk():
    from trio_acp.openhands.sdk import import_sdk

    return import_sdk()


@pytest.fixture(scope="module")
def llm():
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def target(server):
    return AgentServerTarget(url=server.url, api_key=server.api_key)


class Seen:
    """What the driver hands on (from the SDK's socket thread), in order."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.tokens: list[str] = []

    def event(self, event: Any) -> None:
        self.events.append(event)

    def token(self, chunk: Any) -> None:
        self.tokens.append(chunk.choices[0].delta.content or "")

    def of(self, name: str) -> list[Any]:
        return [e for e in self.events if type(e).__name__ == name]

    def ids(self) -> list[str]:
        return [e.id for e in self.events]


async def open_driver(sdk, target, llm, server, seen: Seen, mode: str = "always-approve", **kwargs):
    from trio_acp.openhands.sdk import build_agent, confirmation_setup

    agent = build_agent(sdk, sdk.LLM(**fast_llm_kwargs(llm.base_url, timeout=30)))
    policy, analyzer = confirmation_setup(sdk, mode)
    return await RemoteConversationDriver.open(
        sdk,
        target,
        agent,
        working_dir=str(server.workspace),
        on_event=seen.event,
        on_token=seen.token,
        confirmation_policy=policy,
        security_analyzer=analyzer,
        **kwargs,
    )


def user(sdk, text: str):
    return sdk.Message(role="user", content=[sdk.TextContent(text=text)])


def reply_text(seen: Seen) -> str:
    texts = [
        "".join(c.text for c in e.llm_message.content if hasattr(c, "text"))
        for e in seen.of("MessageEvent")
        if e.source == "agent"
    ]
    return texts[-1] if texts else ""


def terminal_output(seen: Seen) -> str:
    return "\n".join(
        str(e.observation) for e in seen.of("ObservationEvent") if e.tool_name == "terminal"
    )


def marked_processes(marker: str, name: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] != name:
            continue
        try:
            if proc.environ().get(MARKER_VAR) == marker:
                found.append(proc)
        except psutil.Error:
            continue
    return found


async def wait_for(predicate, timeout: float = 60.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.05)


async def test_streamed_reply(sdk, target, llm, server):
    seen = Seen()
    driver = await open_driver(sdk, target, llm, server, seen)
    try:
        prompt = "tell me something long enough to stream in several pieces [scenario:echo]"
        await driver.send_message(user(sdk, prompt))
        status = await driver.run()
        assert status == "finished"
        assert len(seen.tokens) > 1, (
            "the reply came as one piece: no token streaming over the socket"
        )
        assert "".join(seen.tokens) == reply_text(seen) == f"Echo: {prompt}"
        assert len(seen.ids()) == len(set(seen.ids()))
        rtt = await driver.measure_round_trip()
        print(f"agent-server round trip: {rtt * 1000:.1f} ms")
    finally:
        await driver.close()


async def test_permission_allow_then_reject_fails_closed(sdk, target, llm, server, tmp_path):
    seen = Seen()
    driver = await open_driver(sdk, target, llm, server, seen, mode="always-ask")
    try:
        await driver.send_message(
            user(sdk, scenario_prompt("terminal", command="echo approved-run"))
        )
        assert await driver.run() == "waiting_for_confirmation"
        pending = await driver.pending_actions()
        assert [a.tool_name for a in pending] == ["terminal"]
        assert not seen.of("ObservationEvent"), "ran before it was approved"
        # Approving is running again.
        assert await driver.run() == "finished"
        assert "approved-run" in terminal_output(seen)

        target_file = Path(server.workspace) / f"refused-{uuid.uuid4().hex}"
        await driver.send_message(
            user(sdk, scenario_prompt("terminal", command=f"touch {target_file}"))
        )
        assert await driver.run() == "waiting_for_confirmation"
        await driver.reject_pending_actions("The user rejected it.")
        assert not await driver.pending_actions()
        assert seen.of("UserRejectObservation")
        assert not target_file.exists()
    finally:
        await driver.close()


async def test_cancel_mid_stream_stops_the_remote_run(sdk, target, llm, server):
    seen = Seen()
    driver = await open_driver(sdk, target, llm, server, seen)
    try:
        await driver.send_message(user(sdk, scenario_prompt("slow", chunks=400, delay_ms=50)))
        cancel = trio.Event()
        async with trio.open_nursery() as nursery:

            async def cancel_once_streaming() -> None:
                await wait_for(lambda: len(seen.tokens) >= 3)
                cancel.set()

            nursery.start_soon(cancel_once_streaming)
            assert await driver.run(cancel) == "cancelled"
        info = await get_conversation(target, driver.id)
        assert info["execution_status"] != "running"
        assert not seen.of("MessageEvent")[1:], "the cancelled reply was completed anyway"
        # The conversation goes on.
        await driver.send_message(user(sdk, "again [scenario:echo]"))
        assert await driver.run() == "finished"
        # The model is told the cancelled request was cut short, then gets the new one.
        reply = reply_text(seen)
        assert reply.index(INTERRUPTION_NOTE) < reply.index("again [scenario:echo]")
    finally:
        await driver.close()


async def test_cancel_mid_tool_ends_the_remote_command(sdk, target, llm, server):
    seen = Seen()
    driver = await open_driver(sdk, target, llm, server, seen)
    try:
        await driver.send_message(user(sdk, scenario_prompt("sleep", seconds=30)))
        cancel = trio.Event()
        sleeping: list[psutil.Process] = []
        async with trio.open_nursery() as nursery:

            async def cancel_once_sleeping() -> None:
                await wait_for(
                    lambda: sleeping.extend(marked_processes(driver.marker, "sleep")) or sleeping
                )
                cancel.set()

            nursery.start_soon(cancel_once_sleeping)
            assert await driver.run(cancel) == "cancelled"
        _, alive = psutil.wait_procs(sleeping, timeout=10)
        assert not alive, "the remote `sleep 30` outlived the cancel"
        # The terminal itself survived and runs the next command.
        await driver.send_message(
            user(sdk, scenario_prompt("terminal", command="echo terminal-still-works"))
        )
        assert await driver.run() == "finished"
        assert "terminal-still-works" in terminal_output(seen)
    finally:
        await driver.close()


async def test_a_command_announced_after_the_cancel_is_stopped_too(sdk, target, llm, server):
    """The server starts a command before its announcement reaches us (the socket's thread
    lags under load): a cancel in between must still stop it. The announcement is held
    back until the server has been asked to interrupt."""
    seen = Seen()
    driver = await open_driver(sdk, target, llm, server, seen)
    inbox = driver._inbox
    interrupt_asked = threading.Event()
    track = inbox._track_terminal

    def lagging_track(event: Any) -> None:
        if type(event).__name__ == "ActionEvent":
            interrupt_asked.wait(timeout=60)  # the socket's thread, held
        track(event)

    inbox._track_terminal = lagging_track
    conv = driver.conversation
    server_interrupt = conv.interrupt

    def interrupt() -> None:
        interrupt_asked.set()
        server_interrupt()

    conv.interrupt = interrupt
    try:
        await driver.send_message(user(sdk, scenario_prompt("sleep", seconds=30)))
        cancel = trio.Event()
        sleeping: list[psutil.Process] = []
        async with trio.open_nursery() as nursery:

            async def cancel_once_sleeping() -> None:
                await wait_for(
                    lambda: sleeping.extend(marked_processes(driver.marker, "sleep")) or sleeping
                )
                assert not inbox.terminal_calls  # not announced yet
                cancel.set()

            nursery.start_soon(cancel_once_sleeping)
            assert await driver.run(cancel) == "cancelled"
        _, alive = psutil.wait_procs(sleeping, timeout=10)
        assert not alive, "the remote `sleep 30` outlived the cancel"
    finally:
        interrupt_asked.set()
        await driver.close()


async def test_listed_and_reloaded_after_our_side_is_recreated(sdk, target, llm, server):
    first = Seen()
    driver = await open_driver(sdk, target, llm, server, first)
    await driver.send_message(user(sdk, "remember me [scenario:echo]"))
    assert await driver.run() == "finished"
    conversation_id = driver.id
    await driver.close()

    listed = await list_conversations(target)
    assert str(conversation_id) in [item["id"] for item in listed]

    again = Seen()
    reopened = await open_driver(
        sdk, target, llm, server, again, conversation_id=conversation_id, create=False
    )
    try:
        history = await reopened.events()
        assert [e.id for e in history if type(e).__name__ == "MessageEvent"] == [
            e.id for e in first.of("MessageEvent")
        ]
        assert not again.events, "history was handed on again as new events"
        await reopened.send_message(user(sdk, "and again [scenario:echo]"))
        assert await reopened.run() == "finished"
        assert reply_text(again) == "Echo: and again [scenario:echo]"
    finally:
        await reopened.close()

    assert await delete_conversation(target, conversation_id)
    assert await get_conversation(target, conversation_id) is None
    assert str(conversation_id) not in [item["id"] for item in await list_conversations(target)]
    with pytest.raises(RemoteError, match="does not exist"):
        await open_driver(
            sdk, target, llm, server, Seen(), conversation_id=conversation_id, create=False
        )


async def test_the_server_lost_while_starting_the_run_is_the_server_lost(sdk, target, llm, server):
    """Killed while it answers the request that starts the run (under load, its answer can
    come after the run's first command): the turn says the server was lost, as the health
    check does, not the bare transport error (seen in tests/remote/test_e2e_lifecycle.py's
    killed-server test under load)."""
    import httpx

    seen = Seen()
    driver = await open_driver(sdk, target, llm, server, seen)
    try:
        await driver.send_message(user(sdk, "hello [scenario:echo]"))

        def run(*args: Any, **kwargs: Any) -> None:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")

        real_run = driver.conversation.run
        driver.conversation.run = run
        try:
            with pytest.raises(RemoteError) as raised:
                await driver.run()
        finally:
            driver.conversation.run = real_run
        message = str(raised.value)
        assert raised.value.unreachable
        assert f"lost the agent-server at {server.url} during the turn" in message, message
        assert "Server disconnected without sending a response" in message
        assert server.api_key not in message
        # The next prompt reconnects (the connection is taken as gone) and runs.
        await driver.send_message(user(sdk, "again [scenario:echo]"))
        assert await driver.run() == "finished"
    finally:
        await driver.close()


async def test_the_key_never_appears_in_errors_logs_or_files(sdk, target, llm, server, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = AgentServerTarget(url=server.url, api_key="wrong-" + server.api_key)
    with pytest.raises(RemoteError) as refused:
        await open_driver(sdk, wrong, llm, server, Seen())
    assert "401" in str(refused.value)
    assert wrong.api_key not in str(refused.value) and server.api_key not in str(refused.value)
    assert server.api_key not in repr(target)

    seen = Seen()
    driver = await open_driver(sdk, target, llm, server, seen)
    try:
        await driver.send_message(user(sdk, "a turn [scenario:echo]"))
        assert await driver.run() == "finished"
    finally:
        await driver.close()
    assert server.api_key not in caplog.text
    assert server.api_key not in server.log_text()
    # The server's own keys file holds it, by design: its owner's alone (docs/agent-server.md).
    keys = server.root / "keys.json"
    assert stat.S_IMODE(keys.stat().st_mode) == 0o600
    for path in server.root.rglob("*"):
        if path.is_file() and path != keys:
            assert server.api_key.encode() not in path.read_bytes(), f"the key is in {path}"


async def test_a_delete_the_server_refuses_removes_nothing(sdk, target, llm, server):
    """The server answers, and says no (here: a wrong key): session/delete fails, saying
    nothing was removed; the conversation is still there to delete once the key is right."""
    from trio_acp.openhands.backends.remote_conversation import delete_on_server
    from trio_acp.rpc import RequestError

    driver = await open_driver(sdk, target, llm, server, Seen())
    conversation_id = driver.id
    await driver.close()
    wrong = AgentServerTarget(url=server.url, api_key="wrong-" + server.api_key)
    with pytest.raises(RequestError) as refused:
        await delete_on_server(wrong, conversation_id, server.url)
    assert "401" in refused.value.message and "Nothing was removed" in refused.value.message
    assert wrong.api_key not in refused.value.message
    assert await get_conversation(target, conversation_id) is not None
    assert await delete_on_server(target, conversation_id, server.url) is None
    assert await get_conversation(target, conversation_id) is None


async def test_close_ends_the_event_socket_at_once(sdk, target, llm, server):
    """Regression: the SDK's socket thread noticed its stop flag only when a message came,
    so a quiet session's close waited out a 5 s join (and so did the process's exit)."""
    seen = Seen()
    driver = await open_driver(sdk, target, llm, server, seen)
    await driver.send_message(user(sdk, "quiet after this [scenario:echo]"))
    assert await driver.run() == "finished"
    socket = driver.conversation._ws_client._thread
    assert socket is not None and socket.is_alive()
    await driver.close()
    assert not socket.is_alive(), "the event socket's thread outlived the close"


async def test_a_stalled_server_mid_turn_is_named_within_the_stall_timeout(
    sdk, target, llm, server
):
    """A server that stops answering without going away (SIGSTOP: connections still
    accepted, nothing answered) ends the turn once it has been silent for the target's
    stall timeout, with an error naming it; resumed, it takes the next prompt."""
    seen = Seen()
    stalled = attrs.evolve(target, stall_timeout=1.0)
    driver = await open_driver(sdk, stalled, llm, server, seen, poll_interval=0.2)
    group = os.getpgid(server.process.pid)
    try:
        await driver.send_message(user(sdk, scenario_prompt("sleep", seconds=20)))
        async with trio.open_nursery() as nursery:

            async def stall_once_sleeping() -> None:
                await wait_for(lambda: marked_processes(driver.marker, "sleep"))
                os.killpg(group, signal.SIGSTOP)

            nursery.start_soon(stall_once_sleeping)
            with trio.fail_after(60), pytest.raises(RemoteError) as lost:
                await driver.run()
        message = str(lost.value)
        assert f"lost the agent-server at {server.url}" in message
        assert "it did not answer for 1 s" in message
        assert server.api_key not in message
        os.killpg(group, signal.SIGCONT)
        await driver.interrupt()  # the stalled run's `sleep` goes on once resumed
        await driver.send_message(user(sdk, "after the stall [scenario:echo]"))
        assert await driver.run() == "finished"
        assert reply_text(seen) == "Echo: after the stall [scenario:echo]"
    finally:
        os.killpg(group, signal.SIGCONT)
        await driver.close()


@pytest.mark.parametrize("mode", ["always-approve", "always-ask"])
async def test_server_killed_mid_turn_then_restarted(sdk, target, llm, server, mode):
    """Last: it restarts the module's server.

    In always-ask the command runs approved: the server saves the status of a run only
    when a step ends, so the restarted one still holds the action as waiting for approval;
    it must not run again, and the model reads what happened to it (remote.py,
    `_settle_lost_run`)."""
    seen = Seen()
    driver = await open_driver(
        sdk, target, llm, server, seen, mode=mode, unreachable_grace=1.0, poll_interval=0.2
    )
    try:
        await driver.send_message(user(sdk, scenario_prompt("sleep", seconds=30)))
        if mode == "always-ask":
            assert await driver.run() == "waiting_for_confirmation"
        async with trio.open_nursery() as nursery:

            async def kill_once_sleeping() -> None:
                await wait_for(lambda: marked_processes(driver.marker, "sleep"))
                server.kill()

            nursery.start_soon(kill_once_sleeping)
            with pytest.raises(RemoteError) as lost:
                await driver.run()
        message = str(lost.value)
        assert "lost the agent-server" in message and server.url in message
        assert server.api_key not in message

        await trio.to_thread.run_sync(server.start)
        await driver.send_message(user(sdk, "after the restart [scenario:echo]"))
        assert await driver.run() == "finished"
        assert reply_text(seen) == "Echo: after the restart [scenario:echo]"
        assert not seen.of("ObservationEvent"), "the cut command ran again"
        if mode == "always-ask":
            [cut] = seen.of("UserRejectObservation")
            assert cut.rejection_reason == CUT_BY_RESTART
        ids = seen.ids()
        assert len(ids) == len(set(ids)), "an event was handed on twice"
        # The driver created the conversation: every event the server has was handed on.
        # (State updates are not conversation events: the driver tracks them, never hands them on.)
        on_server = {
            e.id: type(e).__name__
            for e in await driver.events()
            if type(e).__name__ != "ConversationStateUpdateEvent"
        }
        missed = {i: kind for i, kind in on_server.items() if i not in set(ids)}
        assert not missed, f"events the server has were never handed on: {missed}"
    finally:
        await driver.close()


async def test_one_response_id_per_response_and_late_deltas_dropped(sdk):
    """Deltas carry no response id: the driver gives one response's deltas one id (the
    final message then repeats nothing), and drops deltas that reach the socket after the
    response is complete (the server publishes them on another path than events)."""
    from openhands.sdk.event import MessageEvent, StreamingDeltaEvent

    from trio_acp.openhands.backends.remote_inbox import Inbox

    tokens: list[Any] = []
    inbox = Inbox(trio.lowlevel.current_trio_token(), lambda event: None, tokens.append)

    def message(source: str, text: str) -> Any:
        role = "assistant" if source == "agent" else "user"
        return MessageEvent(
            source=source, llm_message=sdk.Message(role=role, content=[sdk.TextContent(text=text)])
        )

    inbox(StreamingDeltaEvent(content="Hel"))
    inbox(StreamingDeltaEvent(content="lo"))
    inbox(message("agent", "Hello"))
    inbox(StreamingDeltaEvent(content="lo"))  # late: the response is complete
    assert [t.choices[0].delta.content for t in tokens] == ["Hel", "lo"]
    assert tokens[0].id == tokens[1].id
    inbox(message("user", "again"))
    inbox(StreamingDeltaEvent(content="Next"))
    assert len(tokens) == 3 and tokens[2].id != tokens[0].id
