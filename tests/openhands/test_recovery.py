"""A session reopened after its process stopped mid-turn (recovery.py, journal.py), and
interruption notes in a replay (translate/interruptions.py): the pure parts, on duck-typed
events (the SDK's own go through tests/e2e/test_reload_after_kill_official_python.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace as NS

import trio

from trio_acp import schema
from trio_acp.credentials import MASK, SecretValues
from trio_acp.openhands.sessions.journal import JournalRecord, Shown, TurnJournal
from trio_acp.openhands.sessions.recovery import plan_recovery, turn_tail
from trio_acp.openhands.translate import Translator, message_id
from trio_acp.openhands.translate.interruptions import (
    CANCEL_NOTE,
    CANCEL_SENDER,
    CANCEL_TEXT,
    LOST_NOTE,
    LOST_TEXT,
    NOT_APPROVED,
    STOPPED_SENDER,
    STOPPED_TEXT,
    TOOL_STOPPED,
)


class MessageEvent(NS):
    pass


class ActionEvent(NS):
    pass


def _user(eid: str, *texts: str) -> MessageEvent:
    return MessageEvent(
        id=eid,
        source="user",
        llm_message=NS(role="user", content=[NS(text=t) for t in texts]),
    )


def _agent(eid: str, text: str, *, rid: str | None = None, sender: str | None = None):
    return MessageEvent(
        id=eid,
        source="agent",
        sender=sender,
        llm_response_id=rid,
        llm_message=NS(role="assistant", content=[NS(text=text)]),
    )


# --- interruption notes are not the user's words (issue 26.6) ----------------------------


def test_an_agent_servers_cancel_note_replays_as_the_agents_not_the_users():
    history = [_user("u1", CANCEL_NOTE, "the next question")]
    replay = Translator("/w").replay(history)
    users = [u for u in replay if isinstance(u, schema.UserMessageChunk)]
    assert [u.content.text for u in users] == ["the next question"]
    (note,) = [u for u in replay if isinstance(u, schema.AgentMessageChunk)]
    assert note.content.text == CANCEL_TEXT
    assert note.meta == {"trioAcp": {"interrupted": "cancelled"}}
    assert replay.index(note) < replay.index(users[0])  # before the message it preceded


def test_an_agent_servers_lost_note_replays_as_a_stopped_turn_not_the_users_words():
    # The note that opens the message after a turn cut by losing the agent-server (remote.py).
    replay = Translator("/w").replay([_user("u1", LOST_NOTE + "\nthe next question")])
    users = [u.content.text for u in replay if isinstance(u, schema.UserMessageChunk)]
    assert users == ["the next question"]
    (note,) = [u for u in replay if isinstance(u, schema.AgentMessageChunk)]
    assert note.content.text == LOST_TEXT
    assert note.meta == {"trioAcp": {"interrupted": "stopped"}}


def test_a_cancel_note_merged_into_the_users_text_is_taken_off_it_too():
    replay = Translator("/w").replay([_user("u1", CANCEL_NOTE + "\n\nthe next question")])
    users = [u.content.text for u in replay if isinstance(u, schema.UserMessageChunk)]
    assert users == ["the next question"]


def test_a_user_message_that_only_mentions_the_note_is_the_users():
    text = "why did you say " + CANCEL_NOTE
    replay = Translator("/w").replay([_user("u1", text)])
    assert [u.content.text for u in replay] == [text]


def test_local_cancel_and_stop_notes_replay_marked_as_such():
    history = [
        _agent("a1", CANCEL_TEXT, sender=CANCEL_SENDER),
        _agent("a2", "half a reply\n\n" + STOPPED_TEXT, sender=STOPPED_SENDER),
    ]
    cancel, stop = Translator("/w").replay(history)
    assert cancel.meta == {"trioAcp": {"interrupted": "cancelled"}}
    assert stop.meta == {"trioAcp": {"interrupted": "stopped"}}
    assert stop.content.text.startswith("half a reply")


# --- tool calls left without a result (issue 22.2) ------------------------------------------


def _action(call_id: str) -> ActionEvent:
    return ActionEvent(id="e-" + call_id, tool_call_id=call_id, tool_name="terminal")


def test_an_approved_call_may_have_run_and_an_unapproved_one_did_not():
    ran, asked = _action("c1"), _action("c2")
    journal = JournalRecord(approved=frozenset({"c1"}))
    plan = plan_recovery([], [ran, asked], waiting_for_confirmation=True, journal=journal, cwd="/w")
    assert [(e.action, e.rejected, e.reason) for e in plan.endings] == [
        (ran, False, TOOL_STOPPED),
        (asked, True, NOT_APPROVED),
    ]


def test_a_call_that_ran_unasked_may_have_run():
    plan = plan_recovery(
        [], [_action("c1")], waiting_for_confirmation=False, journal=JournalRecord(), cwd="/w"
    )
    assert [(e.rejected, e.reason) for e in plan.endings] == [(False, TOOL_STOPPED)]


def test_nothing_left_open_nothing_to_do():
    assert not plan_recovery(
        [], [], waiting_for_confirmation=False, journal=JournalRecord(), cwd="/w"
    )


# --- text the user saw, that no event holds (issue 22.2) -------------------------------------


def test_only_text_no_saved_event_holds_is_kept_and_marked():
    saved = message_id("r1", "message")
    lost = message_id("r2", "message")
    tail = [_user("u1", "hi"), _agent("a1", "a saved reply", rid="r1")]
    journal = JournalRecord(
        shown=(
            Shown("message", saved, "a saved reply"),
            Shown("message", lost, "half of the next"),
            Shown("thought", message_id("r2", "thought"), "thinking"),
        )
    )
    plan = plan_recovery(tail, [], waiting_for_confirmation=False, journal=journal, cwd="/w")
    assert plan.text == "half of the next\n\n" + STOPPED_TEXT
    assert plan.thought == "thinking"


def test_everything_shown_was_saved():
    tail = [_user("u1", "hi"), _agent("a1", "a saved reply", rid="r1")]
    journal = JournalRecord(shown=(Shown("message", message_id("r1", "message"), "a saved"),))
    plan = plan_recovery(tail, [], waiting_for_confirmation=False, journal=journal, cwd="/w")
    assert plan.text is None and not plan


def test_the_turns_tail_starts_at_the_last_user_message():
    events = [_user("u1", "a"), _agent("a1", "b"), _user("u2", "c"), _agent("a2", "d")]
    assert [e.id for e in turn_tail(events)] == ["u2", "a2"]
    assert turn_tail([]) == []


# --- the journal ---------------------------------------------------------------------


async def test_the_journal_keeps_what_was_shown_and_approved_until_cleared(tmp_path: Path):
    journal = TurnJournal(tmp_path / "journal.jsonl")
    mid = message_id("r1", "message")
    journal.shown(
        [
            schema.AgentMessageChunk(content=schema.TextContent(text="hel"), message_id=mid),
            schema.ToolCallStart(tool_call_id="c1", title="x"),
            schema.AgentMessageChunk(content=schema.TextContent(text="lo"), message_id=mid),
        ]
    )
    await journal.approved(["c1"])  # returns once written, after what was queued before
    record = await trio.to_thread.run_sync(journal.read)
    assert record.shown == (Shown("message", mid, "hello"),)
    assert record.approved == {"c1"}
    await journal.cleared()
    assert not await trio.to_thread.run_sync(journal.read)
    await journal.aclose()


async def test_the_journal_masks_the_agents_credentials_on_disk_and_in_current(tmp_path: Path):
    # The outbox leaves whole secrets in updates for the connection's writer to mask in the
    # frames (credentials.py, `UpdateMask`): the journal, a file of its own, masks them itself.
    key = "sk-journal-0123456789abcdef"
    journal = TurnJournal(tmp_path / "journal.jsonl", SecretValues([key]))
    mid = message_id("r1", "message")
    journal.shown(
        [schema.AgentMessageChunk(content=schema.TextContent(text=f"k={key}"), message_id=mid)]
    )
    await journal.approved(["c1"])  # written after the shown line
    assert key not in (tmp_path / "journal.jsonl").read_text()
    for record in (journal.current(), await trio.to_thread.run_sync(journal.read)):
        assert record.shown == (Shown("message", mid, f"k={MASK}"),)
    await journal.aclose()


async def test_the_journal_is_not_written_or_read_through_a_symbolic_link(tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text(json.dumps({"shown": "message", "id": "m", "text": "not ours"}) + "\n")
    path = tmp_path / "journal.jsonl"
    path.symlink_to(elsewhere)
    journal = TurnJournal(path)
    assert not await trio.to_thread.run_sync(journal.read)
    await journal.approved(["c1"])  # refused (logged), never appended to `elsewhere`
    await journal.aclose()
    assert "c1" not in elsewhere.read_text()


async def test_a_torn_last_line_is_skipped(tmp_path: Path):
    path = tmp_path / "journal.jsonl"
    good = json.dumps({"shown": "message", "id": "m", "text": "kept"})
    path.write_text(good + "\n" + '{"shown": "message", "id": "m", "te')
    record = await trio.to_thread.run_sync(TurnJournal(path).read)
    assert record.shown == (Shown("message", "m", "kept"),)
