"""kill -9 of `python -m trio_acp` mid-turn, then a new process loads the session, under the
official Python client: what the client is shown must say what is known (issue 22, item 2).

Each kill happens at a deterministic point: once the command's marker file exists (the
command did run), or once the scripted model has streamed a known prefix and stalled.

- an approved command that ran before the kill: its tool call replays `failed`, saying it
  was interrupted and may have finished — never "not approved; nothing was run";
- a command that ran without asking (always-approve): the same, and the next prompt does
  not run it again (the SDK executes every action left without a result);
- a command still waiting for approval at the kill: rejected, "nothing was run";
- text the user saw stream before the kill: replayed as the agent's message it was,
  marked `_meta.trioAcp.interrupted = "stopped"`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

import psutil
import pytest

acp = pytest.importorskip("acp")

from _oh_harness import TIMEOUT, Client, Wire, agent_env, new_session, trio_acp_agent  # noqa: E402
from acp.schema import TextContentBlock  # noqa: E402

from trio_acp.openhands.sessions.journal import JOURNAL_FILE  # noqa: E402
from trio_acp.openhands.translate.interruptions import (  # noqa: E402
    NOT_APPROVED,
    STOPPED_TEXT,
    TOOL_STOPPED,
)
from trio_acp.testing import ScriptedLLM, scenario_prompt  # noqa: E402
from trio_acp.testing.script import Reply, Scenario  # noqa: E402

# Two agent processes per test (the SDK's import in each): minutes on a loaded machine.
pytestmark = pytest.mark.timeout(600)

WORDS = 300
STALL_AFTER = 150  # SSE chunks the model sends before it stalls (one word each)
SEEN = "w0100 "  # the client has read this far when the agent is killed
STALLED = Scenario(
    "stalled_long",
    [
        Reply(
            text="".join(f"w{i:04d} " for i in range(WORDS)),
            chunk_size=6,
            fault="stall",
            fault_after=STALL_AFTER,
        )
    ],
    "a long reply that stalls after STALL_AFTER chunks",
)


def _blocks(text: str) -> list:
    return [TextContentBlock(type="text", text=text)]


def _run(scenario, **kwargs):
    with (
        ScriptedLLM(scenarios=[STALLED]) as llm,
        tempfile.TemporaryDirectory() as home,
        tempfile.TemporaryDirectory() as ws,
    ):
        return asyncio.run(scenario(llm, home, os.path.realpath(ws), **kwargs))


async def _until(condition, what: str, timeout: float = TIMEOUT) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def _killed_mid_turn(env, ws: str, prompt: str, point, client: Client | None = None) -> str:
    """A session whose agent is killed (SIGKILL) mid-prompt once `point(client)` holds;
    returns its id. What the killed agent started is ended too (issue 22.3 is another's)."""
    client = client if client is not None else Client()
    left: list[psutil.Process] = []
    stack = contextlib.AsyncExitStack()
    conn, process = await stack.enter_async_context(trio_acp_agent(client, Wire(), env))
    try:
        sid = (await new_session(conn, ws)).session_id
        turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=_blocks(prompt)))
        await _until(lambda: point(client), "the kill point")
        left = psutil.Process(process.pid).children(recursive=True)
        process.kill()
        await process.wait()
        with contextlib.suppress(BaseException):  # the connection died with the agent
            await asyncio.wait_for(turn, 5)
    finally:
        with contextlib.suppress(Exception):  # closing the connection to a killed agent
            await stack.aclose()
        for child in left:
            with contextlib.suppress(psutil.Error):
                child.kill()
    return sid


async def _load(env, ws: str, sid: str, then: str | None = None):
    client, wire = Client(), Wire()
    async with trio_acp_agent(client, wire, env) as (conn, _):
        await asyncio.wait_for(conn.load_session(cwd=ws, session_id=sid, mcp_servers=[]), TIMEOUT)
        replay = [f["params"]["update"] for d, f in wire.frames if _is_update(d, f)]
        answer = None
        if then is not None:
            answer = await asyncio.wait_for(
                conn.prompt(session_id=sid, prompt=_blocks(then)), TIMEOUT
            )
            later = [f["params"]["update"] for d, f in wire.frames if _is_update(d, f)]
            # Nothing the next turn shows takes the interrupted call back.
            assert "Not approved" not in json.dumps(later[len(replay) :])
    return replay, answer


def _is_update(direction: str, frame: dict) -> bool:
    return direction == "from_agent" and frame.get("method") == "session/update"


def _tool_calls(replay: list[dict]) -> list[dict]:
    return [u for u in replay if u["sessionUpdate"] == "tool_call"]


def _texts(update: dict) -> str:
    return " ".join(c.get("content", {}).get("text", "") for c in update.get("content") or [] if c)


async def _ran_then_killed(llm, home, ws, *, mode: str):
    env = {**agent_env(llm, home), "TRIO_ACP_DEFAULT_MODE": mode}
    marker = Path(ws) / "ran"
    prompt = scenario_prompt("terminal", "run it", command=f"touch {marker} && sleep 60")
    sid = await _killed_mid_turn(env, ws, prompt, lambda _: marker.exists())
    marker.unlink()  # did it run again?
    replay, answer = await _load(env, ws, sid, then=scenario_prompt("echo", "still there?"))
    return replay, answer, marker.exists()


@pytest.mark.parametrize("mode", ["always-ask", "always-approve"])
def test_a_command_that_ran_before_the_kill_replays_as_interrupted(mode):
    replay, answer, ran_again = _run(_ran_then_killed, mode=mode)
    (call,) = _tool_calls(replay)
    assert call["status"] == "failed", call
    assert TOOL_STOPPED in _texts(call)
    assert "Not approved" not in _texts(call)
    assert answer.stop_reason == "end_turn"
    assert not ran_again  # the next prompt did not run the interrupted command again


class _NeverAnswers(Client):
    """A user who never answers the permission question (killed meanwhile)."""

    asked = False

    async def request_permission(self, *args, **kwargs):
        self.asked = True
        await asyncio.Event().wait()


async def _asked_then_killed(llm, home, ws):
    env = {**agent_env(llm, home), "TRIO_ACP_DEFAULT_MODE": "always-ask"}
    marker = Path(ws) / "ran"
    prompt = scenario_prompt("terminal", "touch it", command=f"touch {marker}")
    sid = await _killed_mid_turn(env, ws, prompt, lambda c: c.asked, _NeverAnswers())
    replay, answer = await _load(env, ws, sid, then=scenario_prompt("echo", "still there?"))
    return replay, answer, marker.exists()


def test_a_command_still_waiting_for_approval_at_the_kill_replays_as_never_run():
    replay, answer, ran = _run(_asked_then_killed)
    (call,) = _tool_calls(replay)
    assert call["status"] == "failed", call
    assert NOT_APPROVED in _texts(call)
    assert answer.stop_reason == "end_turn"
    assert not ran


async def _streamed_then_killed(llm, home, ws):
    env = {**agent_env(llm, home), "TRIO_ACP_DEFAULT_MODE": "always-approve"}
    seen_at: list[float] = []

    def point(client: Client) -> bool:
        if SEEN not in client.text():
            return False
        # What the client read reaches the session's journal a moment after it is sent
        # (written off the Trio thread): the kill comes once it is there (or 10 s later,
        # without a journal).
        seen_at.append(time.monotonic())
        journals = list(Path(home).rglob(JOURNAL_FILE))
        written = any(SEEN.encode() in j.read_bytes() for j in journals)
        return written or time.monotonic() - seen_at[0] > 10

    sid = await _killed_mid_turn(env, ws, scenario_prompt("stalled_long", "talk"), point)
    replay, _ = await _load(env, ws, sid)
    return replay


def test_text_streamed_before_the_kill_is_replayed_as_the_agents_interrupted_message():
    replay = _run(_streamed_then_killed)
    agent = [u for u in replay if u["sessionUpdate"] == "agent_message_chunk"]
    text = "".join(u["content"].get("text", "") for u in agent)
    prefix = "".join(f"w{i:04d} " for i in range(101))
    assert prefix in text  # everything the client had read, w0000 .. w0100
    (last,) = [u for u in agent if prefix[:20] in u["content"].get("text", "")]
    assert last["content"]["text"].endswith(STOPPED_TEXT)
    assert last.get("_meta") == {"trioAcp": {"interrupted": "stopped"}}
    users = [u for u in replay if u["sessionUpdate"] == "user_message_chunk"]
    assert all("w0001" not in u["content"].get("text", "") for u in users)


# --- issue 26.6: the note a cancel leaves is not the user's words --------------------------


async def _cancelled_then_loaded(llm, home, ws):
    env = agent_env(llm, home)
    client, wire = Client(), Wire()
    async with trio_acp_agent(client, wire, env) as (conn, _):
        sid = (await new_session(conn, ws)).session_id
        slow = asyncio.create_task(
            conn.prompt(session_id=sid, prompt=_blocks(scenario_prompt("slow", chunks=400)))
        )
        await _until(lambda: "w0001" in client.text(), "the reply streaming")
        await conn.cancel(session_id=sid)
        cancelled = await asyncio.wait_for(slow, TIMEOUT)
        after = await asyncio.wait_for(
            conn.prompt(session_id=sid, prompt=_blocks(scenario_prompt("echo", "next one"))),
            TIMEOUT,
        )
    replay, _ = await _load(env, ws, sid)
    return cancelled, after, replay


def test_a_cancelled_turns_note_replays_as_the_agents_marked_never_as_the_users():
    cancelled, after, replay = _run(_cancelled_then_loaded)
    assert (cancelled.stop_reason, after.stop_reason) == ("cancelled", "end_turn")
    users = [
        u["content"].get("text", "") for u in replay if u["sessionUpdate"] == "user_message_chunk"
    ]
    assert len(users) == 2 and "next one" in users[1]
    assert not any("interrupted" in u.lower() for u in users)
    marked = [u for u in replay if (u.get("_meta") or {}).get("trioAcp", {}).get("interrupted")]
    assert [(u["sessionUpdate"], u["_meta"]["trioAcp"]["interrupted"]) for u in marked] == [
        ("agent_message_chunk", "cancelled")
    ]
