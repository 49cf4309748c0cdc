"""The streaming fast path (sdk/fast_stream.py) against litellm's path, on every scripted
scenario: the same ACP updates from the token chunks, the same final message and raw
response, the same usage in the SDK's metrics, the same errors (class, words, what the
failure policy reads of them) and the same model calls (retries).

Each scenario runs once with ``TRIO_ACP_FAST_STREAM=0`` (litellm's path, the reference)
and once with the fast path, on the SDK's `LLM.acompletion`, the call the agent makes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from typing import Any

import pytest
from test_models_auth_fork import with_raw

from _inprocess import agent_env
from trio_acp.openhands.sdk import build_llm, import_sdk
from trio_acp.openhands.sdk.chat_stream import Chunk
from trio_acp.openhands.sdk.fast_stream import FAST_STREAM_ENV
from trio_acp.openhands.translate.model_failures import chain, describe_model_failure
from trio_acp.openhands.translate.translator import Translator
from trio_acp.testing import ScriptedLLM, scenario_prompt

# What differs between two calls: tool-call and response ids, timestamps, the port.
_VOLATILE = re.compile(r"(call_[0-9a-f]{24}|chatcmpl-[0-9a-f]{32}|[0-9a-f-]{36}|127\.0\.0\.1:\d+)")

SCENARIOS = [
    ("echo", {}),
    ("demo", {}),  # reasoning, text, a tool call
    ("terminal", {}),
    ("plan", {}),
    ("edit", {"path": "/tmp/fast-stream-edit.txt"}),
    ("long", {"tokens": 1500}),
    ("long", {"tokens": 300, "chunk_size": 1}),
    ("same_id", {"id": "x"}),
    ("remember", {}),
    ("delegate", {}),
    ("error400", {}),
    ("error401", {}),
    ("error403", {}),
    ("error404", {}),
    ("error429", {"retry_after": 0}),
    ("error500", {}),
    ("error502", {}),
    ("error503", {}),
    ("context_too_long", {}),
    ("error500_big", {"bytes": 65536}),
    ("truncate", {}),
    ("badjson", {}),
    ("reset", {}),
    ("reset", {"after": 3}),
    ("flaky_stream", {"times": 2}),
    ("flaky_stream", {"times": 1, "id": "x"}),
    ("html", {}),
    ("stall", {}),
]


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return _VOLATILE.sub("<id>", value)
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k not in ("created", "created_at")}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def _updates(chunks: list[Any]) -> list[Any]:
    translator = Translator("/")
    out = []
    for chunk in chunks:
        out += translator.token(chunk)
    return [_scrub(repr(u)) for u in out]


def _call(llm_server: ScriptedLLM, name: str, tags: dict[str, object]) -> dict[str, Any]:
    sdk = import_sdk()
    model = build_llm(
        sdk,
        {
            "model": "openai/scripted",
            "base_url": llm_server.base_url,
            "api_key": "k",
            "stream": True,
            "usage_id": "agent",
            "num_retries": 3,
            "retry_min_wait": 0,
            "retry_max_wait": 0,
            "retry_multiplier": 0,
            "timeout": 30,
            # Short only where the idle timeout is the scenario: elsewhere a loaded machine's
            # 1 s pause between two chunks retried the call on one path and not the other.
            "stream_idle_timeout": 1 if name == "stall" else 30,
        },
    )
    message = sdk.Message(
        role="user", content=[sdk.TextContent(text=scenario_prompt(name, **tags))]
    )
    chunks: list[Any] = []
    before = len(llm_server.requests)
    out: dict[str, Any] = {}
    try:
        response = asyncio.run(model.acompletion([message], on_token=chunks.append))
    except Exception as exc:
        failure = describe_model_failure(exc)
        out["error"] = [(type(e).__name__, _scrub(str(e))) for e in chain(exc)]
        out["failure"] = None if failure is None else _scrub(repr(failure))
    else:
        raw = response.raw_response.model_dump()
        out["message"] = _scrub(response.message.model_dump())
        out["raw"] = _scrub(raw)
    out["updates"] = _updates(chunks)
    out["fast"] = any(isinstance(c, Chunk) for c in chunks)  # popped by the test
    # How many calls (the retries must match). Not how each ended: a call the client stops
    # reading after the error ends "disconnected" or whole as the server's writes and the
    # client's close race, on either path (seen under load in CI).
    out["calls"] = len(llm_server.requests[before:])
    usage = model.metrics.accumulated_token_usage
    out["usage"] = None if usage is None else _scrub(usage.model_dump())
    out["cost"] = model.metrics.accumulated_cost
    return out


@pytest.mark.parametrize(
    ("name", "tags"), SCENARIOS, ids=[f"{n}-{'-'.join(map(str, t.values()))}" for n, t in SCENARIOS]
)
def test_the_fast_path_answers_as_litellms(monkeypatch, name, tags):
    # A server per path: a transient fault counts the requests with the same messages.
    monkeypatch.setenv(FAST_STREAM_ENV, "0")
    with ScriptedLLM() as llm:
        slow = _call(llm, name, tags)
    monkeypatch.setenv(FAST_STREAM_ENV, "1")
    with ScriptedLLM() as llm:
        fast = _call(llm, name, tags)
    assert slow.pop("fast") is False
    # Every scenario that streams a chunk streams it through the fast path.
    assert fast.pop("fast") is bool(fast["updates"])
    assert fast == slow


# --- interruptions: a callback's error and a cancel, at a chunk chosen exactly ------------


class Stop(Exception):
    pass


def _model(sdk: Any, base_url: str) -> Any:
    return build_llm(
        sdk,
        {
            "model": "openai/scripted",
            "base_url": base_url,
            "api_key": "k",
            "stream": True,
            "usage_id": "agent",
            "num_retries": 1,
            "timeout": 30,
        },
    )


async def _ended(llm: ScriptedLLM) -> str:
    """How the call's request ended at the server, seen from inside the caller's loop (an
    `asyncio.run` that ends closes what was left open: too late to count)."""
    # The server notices a closed connection at its next write (50 ms apart here).
    async with asyncio.timeout(20):
        while llm.requests[-1].finished is None:
            await asyncio.sleep(0.05)
    return llm.requests[-1].outcome


@pytest.mark.parametrize("at", [1, 2, 5])
@pytest.mark.parametrize("how", ["raise", "cancel"])
def test_an_interrupted_stream_closes_its_connection_and_raises_as_is(monkeypatch, at, how):
    monkeypatch.setenv(FAST_STREAM_ENV, "1")
    sdk = import_sdk()
    seen: list[Any] = []

    def on_token(chunk: Any) -> None:
        seen.append(chunk)
        if len(seen) == at:
            if how == "raise":
                raise Stop
            task = asyncio.current_task()
            assert task is not None
            task.cancel()

    async def call(model: Any) -> tuple[type[BaseException], str]:
        message = sdk.Message(role="user", content=[sdk.TextContent(text=scenario_prompt("slow"))])
        try:
            await model.acompletion([message], on_token=on_token)
        except (Stop, asyncio.CancelledError) as exc:
            task = asyncio.current_task()
            assert task is not None
            task.uncancel()
            return type(exc), await _ended(llm)
        raise AssertionError("the call was not interrupted")

    with ScriptedLLM() as llm:
        raised, outcome = asyncio.run(call(_model(sdk, llm.base_url)))
        assert raised is (Stop if how == "raise" else asyncio.CancelledError)
        assert outcome == "disconnected"  # closed at once, not left to a collector
        assert len(seen) == at  # nothing after the interruption
        assert isinstance(seen[0], Chunk)
        assert len(llm.requests) == 1  # not retried


# --- the agent: what the client is sent -----------------------------------------------------


def _merged(frames: list[dict[str, Any]], cwd: str) -> list[str]:
    """The session updates, consecutive chunks of one message merged (how many chunks an
    update carries depends on thread timing, not on the path), ids and paths scrubbed."""
    out: list[dict[str, Any]] = []
    for frame in frames:
        if frame.get("method") != "session/update":
            continue
        update = dict(frame["params"]["update"])
        last = out[-1] if out else None
        if (
            last is not None
            and update["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")
            and last["sessionUpdate"] == update["sessionUpdate"]
            and last.get("messageId") == update.get("messageId")
        ):
            last["content"] = {
                **last["content"],
                "text": last["content"]["text"] + update["content"]["text"],
            }
            continue
        out.append(update)
    return [_scrub(json.dumps(u, sort_keys=True).replace(cwd, "<cwd>")) for u in out]


async def _agent_turns(tmp_path: Any, prompts: list[str], fast: bool) -> list[Any]:
    os.environ[FAST_STREAM_ENV] = "1" if fast else "0"
    cwd = tmp_path / ("fast" if fast else "slow")
    cwd.mkdir()
    turns: list[Any] = []
    async with ScriptedLLM() as llm:
        env = agent_env(
            llm, cwd / ".home", LLM_NUM_RETRIES="4", LLM_RETRY_MIN_WAIT="0", LLM_RETRY_MAX_WAIT="0"
        )

        async def body(raw: Any, agent: Any) -> None:
            await raw.initialize({"plan": {}})  # the unstable schema: PromptResponse.usage
            sid = (await raw.new_session(cwd))["sessionId"]
            for text in prompts:
                result, frames = await raw.prompt(sid, text)
                turns.append((result, _merged(frames, str(cwd))))

        await with_raw(env, body)
        turns.append([r.outcome for r in llm.requests])
    return turns


async def test_the_client_is_sent_the_same_on_both_paths(tmp_path, monkeypatch):
    monkeypatch.setenv(FAST_STREAM_ENV, "0")  # restored after the test
    prompts = [
        scenario_prompt("demo"),
        scenario_prompt("long", tokens=500),
        scenario_prompt("flaky_stream", times=2),
        scenario_prompt("remember"),
    ]
    slow = await _agent_turns(tmp_path, prompts, fast=False)
    fast = await _agent_turns(tmp_path, prompts, fast=True)
    assert fast == slow
    assert [result["stopReason"] for result, _ in slow[:-1]] == ["end_turn"] * 4
    assert all(result["usage"]["outputTokens"] > 0 for result, _ in slow[:-1])
