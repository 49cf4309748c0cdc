"""translate/streams.py: what was streamed per LLM response, and what its durable event adds."""

from __future__ import annotations

from trio_acp import schema
from trio_acp.openhands.translate.streams import (
    CUT_OFF,
    MAX_STREAMS,
    Streams,
    message_id,
    remainder,
    response_text,
)


def _texts(updates) -> list[tuple[str, str, str]]:
    return [(type(u).__name__, u.content.text, u.message_id) for u in updates]


def test_deltas_are_chunks_of_their_responses_message_or_thought():
    streams = Streams()
    (thought,) = streams.delta("r1", "hmm", "thought")
    (text,) = streams.delta("r1", "Hel", "message")
    streams.delta("r1", "lo", "message")
    assert isinstance(thought, schema.AgentThoughtChunk)
    assert isinstance(text, schema.AgentMessageChunk)
    assert (thought.message_id, text.message_id) == (
        message_id("r1", "thought"),
        message_id("r1", "message"),
    )
    stream = streams.claim("r1", "Hello", "hmm")
    assert stream is not None
    assert (stream.streamed("message"), stream.streamed("thought")) == ("Hello", "hmm")


def test_the_durable_event_adds_only_what_was_not_streamed():
    streams = Streams()
    streams.delta("r1", "Hel", "message")
    stream = streams.claim("r1", "Hello", "")
    assert _texts(response_text(stream, "ignored", "Hello", "")) == [
        ("AgentMessageChunk", "lo", message_id("r1", "message"))
    ]
    # All of it streamed: nothing; a final text that disagrees: nothing, never a repeat.
    assert remainder("message", "Hel", "Hel", "m") == []
    assert remainder("message", "Other", "Hel", "m") == []
    # Nothing streamed: all of it, under the ids of the event's key.
    assert _texts(response_text(None, "ev-1", "Hi", "why")) == [
        ("AgentThoughtChunk", "why", message_id("ev-1", "thought")),
        ("AgentMessageChunk", "Hi", message_id("ev-1", "message")),
    ]


def test_a_stream_is_claimed_by_content_once_when_the_ids_differ():
    streams = Streams()
    streams.delta("chunk-id", "Same text", "message")
    first = streams.claim("item-id", "Same text", "")
    assert first is not None and first.rid == "chunk-id"
    assert streams.claim("another-item", "Same text", "") is None
    assert streams.claim(None, "", "") is None


def test_only_the_latest_responses_are_remembered():
    streams = Streams()
    for i in range(MAX_STREAMS + 1):
        streams.delta(f"r{i}", f"text {i}", "message")
    assert streams.claim("r0", "", "") is None  # forgotten: its event would send all of it
    assert streams.claim("r1", "", "") is not None
    assert streams.claim(f"r{MAX_STREAMS}", "", "") is not None


def test_a_repeated_response_id_starts_a_new_message_once_its_first_is_claimed():
    streams = Streams()
    (first,) = streams.delta("x", "One.", "message")
    assert streams.claim("x", "One.", "") is not None
    (second,) = streams.delta("x", "Two.", "message")
    (more,) = streams.delta("x", " More.", "message")
    assert first.message_id == message_id("x", "message")
    assert second.message_id != first.message_id and more.message_id == second.message_id
    claimed = streams.claim("x", "Two. More.", "")
    assert claimed is not None and claimed.streamed("message") == "Two. More."
    # Text no stream carried (a history): the id alone the first time, then with the event's.
    fresh = Streams()
    assert fresh.event_key("x", "ev-1") == "x"
    assert fresh.event_key("x", "ev-2") == "x/ev-2"
    assert fresh.event_key(None, "ev-3") == "ev-3"
    # A live translator that adopted a replay's ids does not reuse them.
    live = Streams()
    live.adopt(fresh)
    (chunk,) = live.delta("x", "Three.", "message")
    assert chunk.message_id != message_id("x", "message")


def test_a_failed_attempt_is_cut_and_the_retry_is_a_new_message():
    streams = Streams()
    (cut,) = streams.delta("x", "Half a rep", "message")
    streams.delta("x", "hm", "thought")
    marks = streams.cut()
    assert _texts(marks) == [
        ("AgentThoughtChunk", CUT_OFF, message_id("x", "thought")),
        ("AgentMessageChunk", CUT_OFF, cut.message_id),
    ]
    assert streams.cut() == []  # once
    (retry,) = streams.delta("x", "Half a reply, whole.", "message")
    assert retry.message_id != cut.message_id
    stream = streams.claim("x", "Half a reply, whole.", "")
    assert stream is not None and stream.streamed("message") == "Half a reply, whole."
    assert response_text(stream, "x", "Half a reply, whole.", "") == []
