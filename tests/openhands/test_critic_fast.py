"""The critic's verdict and iterative refinement on a scripted conversation (no SDK, virtual
time): the CLI's rules and message, what the client sees, cancel in the middle."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio
from test_turn_fast import _Host

from trio_acp import schema
from trio_acp.openhands.setup.critic_review import (
    CriticOutcome,
    Issue,
    outcome_of,
    refinement_message,
    review_updates,
    wants_refinement,
)
from trio_acp.openhands.setup.user_setup import CriticSettings
from trio_acp.testing.fake_conversation import FakeConversation, Reply, Tool

REFINE = CriticSettings(enable_iterative_refinement=True)


@pytest.fixture
def autojump(autojump_clock):
    return autojump_clock


def _host(nursery, script, settings=REFINE) -> _Host:
    host = _Host(nursery, script)
    host.critic = settings
    host.conversation.with_critic = True
    return host


def _verdicts(wire) -> list:
    return [
        u
        for u in wire
        if isinstance(u, schema.ToolCallStart) and u.tool_call_id.startswith("critic-")
    ]


def _refinements(wire) -> list:
    return [u for u in wire if isinstance(u, schema.UserMessageChunk)]


def test_the_refinement_message_is_the_clis():
    outcome = CriticOutcome(
        "a",
        0.42,
        (
            Issue("insufficient_testing", "Insufficient Testing", 0.81),
            Issue("scope_creep", "Scope Creep", 0.5),
        ),
    )
    # openhands_cli/tui/utils/critic/refinement.py, build_refinement_message (CLI 1.16.0).
    assert refinement_message(outcome, 2, REFINE) == (
        "The task appears incomplete (iteration 2/3, predicted success likelihood: 42.0%).\n"
        "\n"
        "**Detected issues requiring attention:**\n"
        "- Insufficient Testing (81%)\n"
        "\n"
        "Please review what you've done and verify each requirement is met.\n"
        "List what's working and what needs fixing, then complete the task."
    )
    plain = CriticOutcome("a", 0.1)
    assert "**Detected" not in refinement_message(plain, 1, REFINE)


def test_refinement_triggers_as_in_the_cli():
    settings = CriticSettings(
        enable_iterative_refinement=True, critic_threshold=0.5, issue_threshold=0.7
    )
    assert wants_refinement(CriticOutcome("a", 0.49), settings)
    assert not wants_refinement(CriticOutcome("a", 0.5), settings)
    # A high score with one issue at the issue threshold refines too.
    issue = Issue("loop_behavior", "Loop Behavior", 0.7)
    assert wants_refinement(CriticOutcome("a", 0.95, (issue,)), settings)
    assert not wants_refinement(CriticOutcome("a", 0.95, (Issue("x", "X", 0.69),)), settings)
    # Switched off, or no verdict: never.
    assert not wants_refinement(CriticOutcome("a", 0.1), CriticSettings())
    assert not wants_refinement(CriticOutcome("a", None, error="down"), settings)


def test_the_verdict_is_on_the_last_answer_of_the_run():
    class MessageEvent(SimpleNamespace):
        pass

    class ActionEvent(SimpleNamespace):
        pass

    class FinishAction(SimpleNamespace):
        pass

    judged = SimpleNamespace(score=0.3, metadata=None)
    user = MessageEvent(id="u", source="user", critic_result=None)
    finish = ActionEvent(id="f", action=FinishAction(), critic_result=judged)
    tool = ActionEvent(id="t", action=SimpleNamespace(), critic_result=None)
    assert outcome_of([user, finish, tool]) == CriticOutcome("f", 0.3)
    assert outcome_of([user]) is None
    failed = MessageEvent(id="m", source="agent", critic_result=None)
    assert outcome_of([finish, failed], "503") == CriticOutcome("m", None, error="503")


def test_a_client_without_notices_gets_the_failure_as_a_thought():
    client = SimpleNamespace(capabilities=SimpleNamespace(session=None))
    updates, following = review_updates(
        client, CriticOutcome("a", None, error="HTTP 503"), REFINE, 0
    )
    assert following is None
    assert isinstance(updates[0], schema.AgentThoughtChunk)
    assert "could not evaluate" in updates[0].content.text and "HTTP 503" in updates[0].content.text


async def test_refinement_runs_in_the_same_turn_after_the_answer(autojump):
    async with trio.open_nursery() as nursery:
        host = _host(
            nursery,
            [Reply("first try", critic=0.2), Reply("second try", critic=0.8)],
        )
        assert await host.prompt("do it") == "end_turn"
        nursery.cancel_scope.cancel()
    wire = host.client.wire
    verdicts, refinements = _verdicts(wire), _refinements(wire)
    assert [v.raw_output["score"] for v in verdicts] == [0.2, 0.8]
    assert [r.meta["trioAcp"]["refinement"] for r in refinements] == [
        {"iteration": 1, "maxIterations": 3}
    ]
    # In order: the answer, its verdict, the follow-up, the next answer, its verdict, the end.
    order = [wire.index(verdicts[0]), wire.index(refinements[0]), wire.index(verdicts[1])]
    assert order == sorted(order) and wire[-1] == ("response", "end_turn")
    texts = [
        (i, u.content.text) for i, u in enumerate(wire) if isinstance(u, schema.AgentMessageChunk)
    ]
    assert (
        max(i for i, t in texts if "first" in t)
        < order[0]
        < min(i for i, t in texts if "second" in t)
    )
    # The model got the follow-up as the user's next message.
    assert host.conversation.messages[1][0].text == refinements[0].content.text


async def test_a_cancel_during_refinement_ends_the_turn_cancelled(autojump):
    async with trio.open_nursery() as nursery:
        host = _host(
            nursery,
            [Reply("first", critic=0.1), Reply("slow", tools=(Tool("sleep", seconds=1000),))],
        )
        cancel = trio.Event()

        async def cancel_once_refining():
            while not _refinements(host.client.wire):
                await trio.sleep(0.01)
            cancel.set()

        nursery.start_soon(cancel_once_refining)
        assert await host.prompt("do it", cancel) == "cancelled"
        nursery.cancel_scope.cancel()
    assert host.conversation.interrupts >= 1
    assert len(_verdicts(host.client.wire)) == 1


async def test_no_verdict_without_a_critic_and_none_for_a_stopped_run(autojump):
    async with trio.open_nursery() as nursery:
        host = _host(nursery, [Reply("hello", critic=0.1)], settings=None)
        assert await host.prompt("hi") == "end_turn"
        nursery.cancel_scope.cancel()
    assert _verdicts(host.client.wire) == [] and len(host.conversation.messages) == 1


def test_the_critic_template_and_timeout_variables(tmp_path):
    from trio_acp.openhands.setup.settings import SettingsError
    from trio_acp.openhands.setup.user_setup import _critic_timeout, load_critic_template

    config = tmp_path / "tokenizer_config.json"
    config.write_text('{"chat_template": "{{ messages }}", "eos_token": "x"}')
    assert load_critic_template(str(config)) == "{{ messages }}"
    jinja = tmp_path / "t.jinja"
    jinja.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert load_critic_template(str(jinja)).startswith("{% for m")
    config.write_text('{"eos_token": "x"}')
    with pytest.raises(SettingsError, match="without a 'chat_template'"):
        load_critic_template(str(config))
    with pytest.raises(SettingsError, match="cannot read"):
        load_critic_template(str(tmp_path / "absent"))
    assert _critic_timeout(None) == 60.0 and _critic_timeout("2.5") == 2.5
    for bad in ("0", "-1", "soon", "nan", "inf"):
        with pytest.raises(SettingsError, match="TRIO_ACP_CRITIC_TIMEOUT"):
            _critic_timeout(bad)


async def test_the_request_cancelled_while_the_follow_up_is_sent_ends_cancelled(autojump):
    # `$/cancel_request` cancels the prompt's own scope: arriving while the follow-up goes
    # to the conversation, the turn still answers `cancelled` (not a dropped request), once
    # the follow-up is sent (a send to a ready conversation is awaited whole).
    class SlowFollowUp(FakeConversation):
        async def send_message(self, parts):
            await super().send_message(parts)
            if len(self.messages) == 2:
                await trio.sleep(10)

    async with trio.open_nursery() as nursery:
        host = _host(nursery, [])
        old = host.conversation
        conv = host.conversation = SlowFollowUp(
            [Reply("first", critic=0.1), Reply("second", critic=0.9)],
            nursery,
            on_event=old.on_event,
            on_token=old.on_token,
            with_critic=True,
        )
        result = {}

        async def prompt():
            with trio.CancelScope() as scope:
                result["scope"] = scope
                result["stop"] = await host.prompt("do it")

        nursery.start_soon(prompt)
        while len(conv.messages) < 2:
            await trio.sleep(0.01)
        result["scope"].cancel()
        with trio.fail_after(60):
            while "stop" not in result:
                await trio.sleep(0.1)
        nursery.cancel_scope.cancel()
    assert result["stop"] == "cancelled"
    assert len(_verdicts(host.client.wire)) == 1
