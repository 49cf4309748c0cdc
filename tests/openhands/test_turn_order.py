"""Prompt turns in wire order: queueing, cancel-then-prompt, cancel right behind a prompt.

Raw frames over an in-memory stream, so each test controls exactly which frames share a
write (what a pipelining client or a user pressing Esc at once produces). The agent runs
in-process on the scripted model (the SDK imported once for the test session).
"""

from __future__ import annotations

import json
import uuid

import hypothesis
import psutil
import trio
import trio.testing
from hypothesis import strategies as st
from test_agent_in_process import RawClient, env, llm, loader  # noqa: F401  (fixtures)

from trio_acp.connection import open_agent_connection
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.sdk import INTERRUPTION_TEXT
from trio_acp.testing import scenario_prompt


def _prompt(request_id, sid, text):
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "session/prompt",
        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
    }


def _cancel(sid):
    return {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}


async def _write(raw: RawClient, frames: list) -> None:
    """All `frames` in ONE write: the agent's reader sees them in one read."""
    await raw.stream.send_all(b"".join(json.dumps(f).encode() + b"\n" for f in frames))


async def _collect(raw: RawClient, ids: set) -> list:
    """Every frame until each of `ids` has been answered (permission asks are not expected)."""
    frames, pending = [], set(ids)
    while pending:
        frame = await raw.receive()
        frames.append(frame)
        if frame.get("id") in pending and "method" not in frame:
            pending.discard(frame["id"])
    return frames


def _agent_text(frames: list) -> str:
    return "".join(
        f["params"]["update"]["content"].get("text", "")
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


def _position(frames: list, request_id) -> int:
    return next(i for i, f in enumerate(frames) if f.get("id") == request_id and "method" not in f)


async def test_prompts_sent_during_a_turn_are_queued_and_answered_in_order(env, tmp_path):
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = RawClient(client_stream)
    with trio.fail_after(60):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                sid = await raw.open_session(tmp_path)
                await _write(
                    raw,
                    [
                        _prompt("a", sid, scenario_prompt("slow", chunks=15, delay_ms=20)),
                        _prompt("b", sid, scenario_prompt("echo", "second")),
                        _prompt("c", sid, scenario_prompt("echo", "third")),
                    ],
                )
                frames = await _collect(raw, {"a", "b", "c"})
                await client_stream.aclose()
    a, b, c = (_position(frames, i) for i in "abc")
    assert a < b < c, "each prompt is answered in the order it was sent"
    for i in (a, b, c):
        assert frames[i]["result"] == {"stopReason": "end_turn"}
    # Each turn's updates come after the previous response and before its own.
    assert "w0015" in _agent_text(frames[:a]) and "Echo" not in _agent_text(frames[:a])
    assert "second" in _agent_text(frames[a:b]) and "third" not in _agent_text(frames[a:b])
    assert "third" in _agent_text(frames[b:c])
    assert not any(f.get("method") == "session/update" for f in frames[c + 1 :])


async def test_cancel_right_behind_its_prompt_cancels_it_and_the_next_prompt_runs(env, tmp_path):
    # Prompt, cancel and the next prompt in one write: the cancel must reach the first
    # prompt even though its task has not started when the cancel is read, and the
    # prompt after the cancel must run (not be refused as "busy").
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = RawClient(client_stream)
    with trio.fail_after(60):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                sid = await raw.open_session(tmp_path)
                await _write(
                    raw,
                    [
                        _prompt("p1", sid, scenario_prompt("sleep", seconds=30)),
                        _cancel(sid),
                        _prompt("p2", sid, scenario_prompt("echo", "after the cancel")),
                    ],
                )
                frames = await _collect(raw, {"p1", "p2"})
                await client_stream.aclose()
    assert frames[_position(frames, "p1")]["result"] == {"stopReason": "cancelled"}
    assert frames[_position(frames, "p2")]["result"] == {"stopReason": "end_turn"}
    assert _position(frames, "p1") < _position(frames, "p2")
    assert "after the cancel" in _agent_text(frames[_position(frames, "p1") :])
    # The agent runs in this process: its tools are our descendants (other tests, or other
    # test workers, may have a `sleep 30` of their own running elsewhere on the machine).
    sleeping = [
        p for p in psutil.Process().children(recursive=True) if _cmdline(p)[:2] == ["sleep", "30"]
    ]
    assert not sleeping, "the cancelled prompt's tool must never have run to the end"


async def test_the_model_is_told_a_turn_was_interrupted(env, tmp_path, llm):
    # After a mid-stream cancel the next request must not merge the cancelled prompt with
    # the new one: an assistant note marks the interruption (and load replays it).
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = RawClient(client_stream)
    with trio.fail_after(60):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                sid = await raw.open_session(tmp_path)
                await raw.send(_prompt("p1", sid, scenario_prompt("slow", "first question")))
                await raw.until(
                    lambda f: (
                        f.get("method") == "session/update"
                        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
                    )
                )
                await raw.send(_cancel(sid))
                assert (await raw.until(lambda f: f.get("id") == "p1"))["result"] == {
                    "stopReason": "cancelled"
                }
                before = len(llm.requests)
                await raw.send(_prompt("p2", sid, scenario_prompt("echo", "second question")))
                assert (await raw.until(lambda f: f.get("id") == "p2"))["result"] == {
                    "stopReason": "end_turn"
                }
                messages = llm.requests[before].messages
                await client_stream.aclose()
    texts = [(m["role"], json.dumps(m.get("content"))) for m in messages]
    first = next(
        i for i, (role, text) in enumerate(texts) if role == "user" and "first question" in text
    )
    second = next(
        i for i, (role, text) in enumerate(texts) if role == "user" and "second question" in text
    )
    assert first < second, "the cancelled prompt and the new one are separate messages"
    between = texts[first + 1 : second]
    assert any(role == "assistant" and "Interrupted" in text for role, text in between)

    # A new agent process: the replay shows the interruption where it happened.
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = RawClient(client_stream)
    with trio.fail_after(60):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                await raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {"protocolVersion": 1},
                    }
                )
                await raw.until(lambda f: f.get("id") == 1)
                await raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": 2,
                        "method": "session/load",
                        "params": {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []},
                    }
                )
                frames = await _collect(raw, {2})
                await client_stream.aclose()
    replay = [
        (f["params"]["update"]["sessionUpdate"], json.dumps(f["params"]["update"].get("content")))
        for f in frames
        if f.get("method") == "session/update"
    ]
    kinds = [kind for kind, _ in replay]
    note = next(
        i
        for i, (kind, text) in enumerate(replay)
        if kind == "agent_message_chunk" and INTERRUPTION_TEXT[:20] in text
    )
    assert "user_message_chunk" in kinds[:note] and "user_message_chunk" in kinds[note:]


# --- the property: cancels apply to exactly the prompts received before them ------------

# One script: a sequence of prompts ("P") and cancels ("C"), cut into writes.
_OPS = st.lists(st.sampled_from("PC"), min_size=1, max_size=6)


@st.composite
def _scripts(draw):
    ops = draw(_OPS)
    cuts = draw(st.lists(st.integers(1, max(1, len(ops) - 1)), max_size=3, unique=True))
    return ops, sorted(c for c in cuts if c < len(ops))


async def test_property_a_cancel_ends_every_prompt_received_before_it(env, tmp_path):
    """For random interleavings of prompts and cancels, in one or several writes: a prompt
    with a cancel after it answers `cancelled`; a prompt after the last cancel runs.

    Prompts that a cancel follows are slow (seconds of streaming), so they cannot finish
    before the cancel is read; prompts after the last cancel are instant echoes. One agent
    and one session serve every example: each example also checks that the queue is left
    idle and the session usable.
    """
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = RawClient(client_stream)
    counter = iter(range(10**6))

    async def run_example(ops, cuts):
        frames_by_write, expected = [[]], {}
        for index, op in enumerate(ops):
            if index in cuts:
                frames_by_write.append([])
            if op == "C":
                frames_by_write[-1].append(_cancel(sid))
                continue
            request_id = f"x{next(counter)}"
            cancelled = "C" in ops[index + 1 :]
            text = (
                scenario_prompt("slow", chunks=200, delay_ms=50)
                if cancelled
                else scenario_prompt("echo", request_id)
            )
            frames_by_write[-1].append(_prompt(request_id, sid, text))
            expected[request_id] = "cancelled" if cancelled else "end_turn"
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                collected = []

                async def collect():
                    collected.extend(await _collect(raw, set(expected)))

                nursery.start_soon(collect)
                for group in frames_by_write:
                    await _write(raw, group)
                    await trio.sleep(0.01)
        answers = {
            f["id"]: f["result"]["stopReason"]
            for f in collected
            if f.get("id") in expected and "method" not in f
        }
        assert answers == expected, (ops, cuts)

    with trio.fail_after(600):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                sid = await raw.open_session(tmp_path)
                token = trio.lowlevel.current_trio_token()

                @hypothesis.settings(
                    max_examples=25,
                    deadline=None,
                    database=None,
                    suppress_health_check=list(hypothesis.HealthCheck),
                )
                @hypothesis.given(_scripts())
                def check(script):
                    trio.from_thread.run(run_example, *script, trio_token=token)

                await trio.to_thread.run_sync(check)
                await client_stream.aclose()


async def test_closing_a_session_removes_the_file_editors_temporary_history(env, tmp_path):
    # The SDK's file editor makes an `oh_editor_history_*` directory per session and never
    # removes it; a long-running editor agent would pile them up in the temp directory.
    from trio_acp.openhands.permissions.tool_processes import editor_history_dirs

    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = RawClient(client_stream)
    with trio.fail_after(60):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                sid = await raw.open_session(tmp_path)
                await raw.prompt(3, sid, scenario_prompt("edit", path=str(tmp_path / "f.txt")))
                assert (await raw.until(lambda f: f.get("id") == 3))["result"][
                    "stopReason"
                ] == "end_turn"
                dirs = editor_history_dirs(
                    agent._sessions[uuid.UUID(sid)].conversation.sdk_conversation
                )
                assert dirs and all(d.is_dir() for d in dirs)
                await raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": 4,
                        "method": "session/close",
                        "params": {"sessionId": sid},
                    }
                )
                await raw.until(lambda f: f.get("id") == 4)
                await client_stream.aclose()
    assert not any(d.exists() for d in dirs)


def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []
