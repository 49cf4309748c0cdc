"""What the driver makes of a run it lost with the agent-server, before the next message
(remote.py, `_settle_lost_run`), on fakes: each state the server may be found in. The same
through a real server killed mid-command: test_remote_conversation.py and
test_e2e_lifecycle.py (`test_server_killed_mid_turn_then_restarted`)."""

from __future__ import annotations

import time
import uuid
from types import SimpleNamespace as NS
from typing import Any

import attrs
import pytest

from trio_acp.openhands.backends.agent_server_config import AgentServerTarget
from trio_acp.openhands.backends.remote import (
    INTERRUPTION_NOTE,
    RemoteConversationDriver,
    RemoteError,
)
from trio_acp.openhands.backends.remote_lost_run import CUT_BY_RESTART
from trio_acp.openhands.translate.interruptions import LOST_NOTE

# The first test pays the SDK's import (the driver's event inbox): a minute on a loaded machine.
pytestmark = pytest.mark.timeout(180)


@attrs.define
class TextContent:
    text: str


@attrs.define
class Message:
    content: list[Any]

    def model_copy(self, *, update: dict[str, Any]) -> Message:
        return attrs.evolve(self, **update)


class MessageEvent(NS):
    def to_llm_message(self) -> None: ...


class ErrorEvent(NS):
    def to_llm_message(self) -> None: ...


class StateUpdate(NS):
    """Not read by the model (no `to_llm_message`)."""


SDK = NS(TextContent=TextContent, MessageEvent=MessageEvent)
CUT = MessageEvent(source="user")


class Server:
    """The server's side as the driver reaches it: the conversation (through the SDK's
    client), its info and `/server_info`."""

    def __init__(self, status: str, events: list[Any], uptime: float | None) -> None:
        self.status, self.uptime = status, uptime
        self.sent: list[Message] = []
        self.rejected: list[str] = []
        self.conv = NS(
            state=NS(events=events),
            send_message=self.sent.append,
            reject_pending_actions=self.rejected.append,
        )

    def get(self, path: str, timeout: float) -> Any:
        assert path == "/server_info"
        if self.uptime is None:
            raise RemoteError("agent-server http://127.0.0.1:9: HTTP 404")
        return NS(json=lambda: {"uptime": self.uptime})


async def lost_then_send(
    server: Server, *, approving: bool, lost_ago: float = 10.0
) -> RemoteConversationDriver:
    driver = RemoteConversationDriver(
        SDK,
        AgentServerTarget(url="http://127.0.0.1:9", api_key="k" * 16),
        working_dir="/w",
        on_event=lambda e: None,
        on_token=lambda c: None,
    )
    driver.conversation, driver.id = server.conv, uuid.uuid4()
    driver.workspace = NS(client=NS(get=server.get))

    async def get_info(conversation_id: uuid.UUID) -> dict[str, Any]:
        return {"execution_status": server.status}

    driver.get_info = get_info  # type: ignore[method-assign]
    driver._lost_run = (approving, time.monotonic() - lost_ago)
    await driver.send_message(Message(content=[TextContent("next")]))
    return driver


def sent_texts(server: Server) -> list[str]:
    [message] = server.sent
    return [c.text for c in message.content]


async def test_an_approved_action_cut_by_a_restart_gets_its_result_and_does_not_run_again():
    # The restarted server saved the status the approved run started with.
    server = Server("waiting_for_confirmation", [CUT, NS()], uptime=3)
    await lost_then_send(server, approving=True)
    assert server.rejected == [CUT_BY_RESTART]
    assert sent_texts(server) == ["next"]  # the action's result sits between the two


@pytest.mark.parametrize("uptime", [100, None])
async def test_a_server_that_did_not_restart_or_cannot_say_keeps_the_approved_action(uptime):
    # Unreachable only: it may still be running it, and a second result would contradict
    # the first. A server whose uptime cannot be read is taken as not restarted.
    server = Server("waiting_for_confirmation", [CUT, NS()], uptime=uptime)
    await lost_then_send(server, approving=True)
    assert server.rejected == []
    assert sent_texts(server) == ["next"]


async def test_a_request_left_without_anything_after_it_is_noted_as_cut():
    # Lost while the model was called: the restarted server has the message alone.
    server = Server("error", [CUT, StateUpdate()], uptime=3)
    driver = await lost_then_send(server, approving=False)
    assert server.rejected == []
    assert sent_texts(server) == [LOST_NOTE, "next"]
    assert driver._lost_run is None
    server.sent.clear()
    await driver.send_message(Message(content=[TextContent("then")]))
    assert sent_texts(server) == ["then"]  # once


@pytest.mark.parametrize(
    ("status", "events"),
    [
        # The server's own recovery answered the cut command (an error result).
        ("error", [CUT, NS(), ErrorEvent(source="environment")]),
        # Still running it: the server answers it yet.
        ("running", [CUT]),
    ],
)
async def test_no_note_where_the_cut_request_has_an_answer_coming_or_given(status, events):
    server = Server(status, events, uptime=3)
    await lost_then_send(server, approving=False)
    assert sent_texts(server) == ["next"]


async def test_a_cancel_after_the_lost_run_notes_the_cancel():
    server = Server("error", [CUT], uptime=3)
    driver = await lost_then_send(server, approving=False)
    assert sent_texts(server)[0] == LOST_NOTE
    # The next turn is cancelled before its run, and the one after is lost again.
    driver.mark_interrupted()
    driver._lost_run = (False, time.monotonic())
    server.conv.state.events.append(MessageEvent(source="user"))
    server.sent.clear()
    await driver.send_message(Message(content=[TextContent("again")]))
    assert sent_texts(server) == [INTERRUPTION_NOTE, "again"]
