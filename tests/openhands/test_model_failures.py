"""Model failures, in-process (the SDK imported once for the module): what is retried, how
often, what the user reads, and that the session keeps working.

Every fault is the scripted server's (src/trio_acp/testing/scenarios.py), through the real
litellm streaming path. Back-off waits are set to 0 where the test is not about them, so
the tests are fast; nothing here measures time (bench/ does).
"""

from __future__ import annotations

import asyncio
import json
import os

import pytest
import trio

from _inprocess import loader
from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.sdk import build_llm
from trio_acp.openhands.sdk.error_bodies import MAX_ERROR_BODY
from trio_acp.openhands.setup.settings import load_settings
from trio_acp.openhands.translate.model_failures import (
    LLM_FAILURE_DEFAULTS,
    RETRY_AFTER_CAP,
    chain,
    describe_model_failure,
)
from trio_acp.openhands.translate.streams import CUT_OFF
from trio_acp.rpc import RequestError
from trio_acp.testing import scenario_prompt, scripted_env
from trio_acp.testing.pair import open_in_memory_pair
from trio_acp.testing.scenarios import FLAKY_TEXT


@pytest.fixture
def env(llm, tmp_path):
    e = {k: v for k, v in os.environ.items() if not k.startswith("LLM_")}
    e.update(scripted_env(llm.base_url))
    e.update(
        OPENHANDS_PERSISTENCE_DIR=str(tmp_path / "home"),
        LLM_MAX_INPUT_TOKENS="128000",
        TRIO_ACP_DEFAULT_MODE="always-approve",
        # Our default number of attempts, without the waits between them.
        LLM_RETRY_MIN_WAIT="0",
        LLM_RETRY_MAX_WAIT="0",
        # Bounds the old behaviour of a context window that never fits (a loop).
        TRIO_ACP_MAX_ITERATIONS="30",
    )
    return e


class Client:
    def __init__(self) -> None:
        self.updates: list = []
        self.retrying = trio.Event()

    async def session_update(self, params):
        self.updates.append(params.update)
        if (
            isinstance(params.update, schema.AgentThoughtChunk)
            and "Retrying" in params.update.content.text
        ):
            self.retrying.set()

    async def request_permission(self, params):
        raise AssertionError("no permission requests in these tests")

    def thoughts(self) -> str:
        return "".join(
            u.content.text for u in self.updates if isinstance(u, schema.AgentThoughtChunk)
        )

    def text(self) -> str:
        return "".join(
            u.content.text for u in self.updates if isinstance(u, schema.AgentMessageChunk)
        )


def _text(t: str) -> list:
    return [schema.TextContent(text=t)]


async def _session(conn, cwd) -> str:
    await conn.agent.initialize(protocol_version=1)
    return (await conn.agent.new_session(cwd=str(cwd), mcp_servers=[])).session_id


async def _fails(conn, llm, sid, prompt) -> tuple[RequestError, list[str]]:
    """Run a prompt that must fail; the error and the outcomes of the model calls it made."""
    before = len(llm.requests)
    with pytest.raises(RequestError) as info:
        await conn.agent.prompt(session_id=sid, prompt=_text(prompt))
    return info.value, [r.outcome for r in llm.requests[before:]]


async def _still_works(conn, client, sid, word) -> None:
    # The scenario tag matters: the SDK appends a prompt to an unanswered one, and the
    # scripted server reads the last tag of the merged text.
    response = await conn.agent.prompt(session_id=sid, prompt=_text(scenario_prompt("echo", word)))
    assert response.stop_reason == "end_turn"
    assert word in client.text()


# --- our defaults ------------------------------------------------------------------------


async def test_failure_defaults_apply_unless_the_user_chose(tmp_path):
    sdk = await loader().get()
    home = tmp_path / "oh"
    home.mkdir()
    base = {"OPENHANDS_PERSISTENCE_DIR": str(home), "LLM_MODEL": "openai/x"}

    def llm_for(env, file_llm=None):
        if file_llm is not None:
            (home / "agent_settings.json").write_text(
                json.dumps({"llm": {"model": "openai/x", **file_llm}})
            )
        settings = load_settings({**base, **env})
        return build_llm(sdk, settings.llm, sources=settings.sources)

    ours = llm_for({})
    assert {k: getattr(ours, k) for k in LLM_FAILURE_DEFAULTS} == LLM_FAILURE_DEFAULTS
    # An environment variable wins, even one equal to the SDK's default.
    assert llm_for({"LLM_NUM_RETRIES": "5", "LLM_STREAM_IDLE_TIMEOUT": "300"}).num_retries == 5
    # The OpenHands CLI writes the SDK's defaults into its settings file: not a choice...
    cli = llm_for(
        {}, {"num_retries": 5, "retry_min_wait": 8, "retry_max_wait": 64, "retry_multiplier": 8.0}
    )
    assert (cli.num_retries, cli.retry_min_wait, cli.retry_max_wait) == (4, 2, 10)
    # ...but any other value there is.
    chosen = llm_for({}, {"num_retries": 7, "retry_max_wait": 20})
    assert (chosen.num_retries, chosen.retry_max_wait, chosen.retry_min_wait) == (7, 20, 2)


# --- errors retrying cannot fix ------------------------------------------------------------


async def test_client_errors_fail_at_once_with_what_to_do(env, tmp_path, llm):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)

            err, calls = await _fails(conn, llm, sid, scenario_prompt("error401"))
            assert calls == ["http401"]  # no retry
            assert err.code == -32603
            assert "rejected the API key (HTTP 401)" in err.message and "LLM_API_KEY" in err.message
            assert "Incorrect API key provided" in err.message  # what the provider said
            assert err.data["model"] == {
                "kind": "auth",
                "httpStatus": 401,
                "retryable": False,
                "attempts": 1,
            }

            err, calls = await _fails(conn, llm, sid, scenario_prompt("error400"))
            assert calls == ["http400"]
            assert "rejected the request as invalid (HTTP 400)" in err.message

            err, calls = await _fails(conn, llm, sid, scenario_prompt("error403"))
            assert calls == ["http403"]
            assert "refused access" in err.message and "HTTP 403" in err.message

            err, calls = await _fails(conn, llm, sid, scenario_prompt("error404"))
            assert calls == ["http404"]
            assert (
                "does not know model openai/scripted" in err.message and "LLM_MODEL" in err.message
            )

            assert "Retrying" not in client.thoughts()
            await _still_works(conn, client, sid, "alive")


async def test_a_context_window_condensing_cannot_fix_ends_the_turn(env, tmp_path, llm):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)
            err, calls = await _fails(conn, llm, sid, scenario_prompt("context_too_long"))
            # Overflow, condense, overflow, condense, overflow: then the turn ends (the SDK
            # alone condenses until the iteration limit). Never the same request twice.
            assert calls == ["http400", "complete", "http400", "complete", "http400"]
            assert err.data["model"]["kind"] == "context_window"
            assert "context window" in err.message and "new session" in err.message
            await _still_works(conn, client, sid, "fits")


# --- retryable errors ----------------------------------------------------------------------


async def test_a_500_is_retried_a_bounded_number_of_times_with_notes(env, tmp_path, llm):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)
            err, calls = await _fails(conn, llm, sid, scenario_prompt("error500"))
            attempts = LLM_FAILURE_DEFAULTS["num_retries"]
            assert calls == ["http500"] * attempts
            notes = client.thoughts()
            for n in range(2, attempts + 1):
                assert (
                    f"the provider had an error (HTTP 500). Retrying now, attempt {n} of {attempts}."
                    in notes
                )
            assert f"attempt {attempts + 1}" not in notes
            assert f"failed (HTTP 500) after {attempts} attempts" in err.message
            assert err.data["model"] == {
                "kind": "server",
                "httpStatus": 500,
                "retryable": True,
                "attempts": attempts,
            }
            await _still_works(conn, client, sid, "recovered")


async def test_retry_after_is_honoured_up_to_its_bound(env, tmp_path, llm):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)
            # Within the bound: the note says the provider's wait, not our (zero) back-off.
            err, calls = await _fails(conn, llm, sid, scenario_prompt("error429", retry_after=1))
            assert calls == ["http429"] * 4
            assert (
                "rate-limiting requests (HTTP 429). Retrying in 1 s, attempt 2 of 4."
                in client.thoughts()
            )
            assert "rate-limiting requests (HTTP 429) after 4 attempts" in err.message
            # Beyond it: no retry at all, and the message says how long the provider asks for.
            big = int(RETRY_AFTER_CAP * 10)
            err, calls = await _fails(conn, llm, sid, scenario_prompt("error429", retry_after=big))
            assert calls == ["http429"]
            assert f"asks to wait {big} s" in err.message and "try again later" in err.message
            await _still_works(conn, client, sid, "patient")


async def test_broken_streams_end_the_turn_clearly_and_the_session_survives(env, tmp_path, llm):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)
            cases = [
                ("truncate", "truncate", "the connection closed in the middle of the stream"),
                ("badjson", "badjson", "stream contained malformed data"),
                ("reset", "reset", "could not reach the model provider"),
                ("reset] [after:3", "reset", "the connection closed in the middle of the stream"),
            ]
            for scenario, outcome, words in cases:
                err, calls = await _fails(conn, llm, sid, f"[scenario:{scenario}]")
                assert calls == [outcome] * 4, scenario
                assert words in err.message and "after 4 attempts" in err.message, err.message
                assert err.data["model"]["retryable"] is True
                await _still_works(conn, client, sid, f"after-{outcome}")


async def test_a_stalled_stream_times_out_and_is_retried_once(env, tmp_path, llm):
    env["LLM_STREAM_IDLE_TIMEOUT"] = "1"
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)
            err, calls = await _fails(conn, llm, sid, scenario_prompt("stall"))
            assert calls == ["stall", "stall"]
            assert "Retrying now, attempt 2 of 2." in client.thoughts()
            assert "sent nothing for 1 s (LLM_STREAM_IDLE_TIMEOUT) after 2 attempts" in err.message
            assert err.data["model"]["kind"] == "timeout"
            await _still_works(conn, client, sid, "unstuck")


# --- cancel --------------------------------------------------------------------------------


async def test_cancel_during_the_back_off_answers_at_once(env, tmp_path, llm):
    # A back-off of ten minutes: the turn can only end before it if the cancel cut it short.
    env.update(LLM_RETRY_MIN_WAIT="600", LLM_RETRY_MAX_WAIT="600")
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)
            before = len(llm.requests)
            result = {}
            with trio.fail_after(120):  # a hang guard only; the wait it would otherwise be is 600 s
                async with trio.open_nursery() as nursery:

                    async def prompt():
                        result["r"] = await conn.agent.prompt(
                            session_id=sid, prompt=_text(scenario_prompt("error500"))
                        )

                    nursery.start_soon(prompt)
                    await client.retrying.wait()
                    assert "Retrying in 600 s, attempt 2 of 4" in client.thoughts()
                    await conn.agent.cancel(session_id=sid)
            assert result["r"].stop_reason == "cancelled"
            assert [r.outcome for r in llm.requests[before:]] == [
                "http500"
            ]  # the retry never happened
            await _still_works(conn, client, sid, "after-cancel")
            assert [r.outcome for r in llm.requests[before:]] == ["http500", "complete"]


# --- what the client shows of a fault (issue: model faults as the user sees them) ----------


def _messages(client: Client) -> list[tuple[str, str]]:
    """The agent's messages as the client groups them: (messageId, text), in order."""
    texts: dict[str, str] = {}
    for u in client.updates:
        if isinstance(u, schema.AgentMessageChunk):
            texts[u.message_id] = texts.get(u.message_id, "") + u.content.text
    return list(texts.items())


@pytest.mark.parametrize("repeated_id", [False, True], ids=["fresh-ids", "repeated-id"])
async def test_a_retried_stream_shows_its_cut_text_as_such_and_one_answer(
    env, tmp_path, llm, repeated_id
):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)
            before = len(llm.requests)
            tags = {"times": 2, **({"id": "x"} if repeated_id else {})}
            response = await conn.agent.prompt(
                session_id=sid, prompt=_text(scenario_prompt("flaky_stream", **tags))
            )
            assert response.stop_reason == "end_turn"
            assert [r.outcome for r in llm.requests[before:]] == [
                "truncate",
                "truncate",
                "complete",
            ]
            # Three messages (ACP cannot take text back): the two cut attempts, each closed
            # with a mark saying so, and the answer, whole, in a message of its own.
            (cut1, text1), (cut2, text2), (answer, text3) = _messages(client)
            assert len({cut1, cut2, answer}) == 3
            for cut in (text1, text2):
                assert cut.endswith(CUT_OFF)
                assert FLAKY_TEXT.startswith(cut.removesuffix(CUT_OFF))
            assert text3 == FLAKY_TEXT
            # Between them, the notes that say why and which attempt comes.
            kinds = [
                "cut"
                if isinstance(u, schema.AgentMessageChunk) and CUT_OFF in u.content.text
                else "note"
                if isinstance(u, schema.AgentThoughtChunk)
                else "text"
                for u in client.updates
            ]
            assert kinds.index("note") > kinds.index("cut")
            notes = client.thoughts()
            assert "the reply was cut off mid-stream. Retrying now, attempt 2 of 4." in notes
            assert "the reply was cut off mid-stream. Retrying now, attempt 3 of 4." in notes


async def test_message_ids_are_unique_when_the_provider_repeats_response_ids(env, tmp_path, llm):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)
            for n in range(4):
                await conn.agent.prompt(
                    session_id=sid, prompt=_text(scenario_prompt("same_id", f"turn {n}"))
                )
            messages = _messages(client)
            assert len(messages) == 4  # one message per reply, four ids
            for n, (_, text) in enumerate(messages):
                assert text.startswith("Echo: ") and f"turn {n}" in text
                assert f"turn {n - 1}" not in text


async def test_an_html_page_is_a_model_error_not_a_reply(env, tmp_path, llm):
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)
            err, calls = await _fails(conn, llm, sid, scenario_prompt("html"))
            # One call, not retried, and no second call on "corrective feedback".
            assert calls == ["html"]
            assert err.code == -32603
            assert "was not a model reply" in err.message and "LLM_BASE_URL" in err.message
            assert err.data["model"]["kind"] == "not_a_reply"
            assert err.data["model"]["retryable"] is False
            assert client.text() == ""
            await _still_works(conn, client, sid, "after-html")


async def test_an_html_page_is_a_model_error_without_streaming_too(env, tmp_path, llm):
    # LLM_STREAM=false: litellm reports the page as an invalid reply with a made-up
    # HTTP 500, which the SDK would retry as a server error (4 calls, kind "server").
    env["LLM_STREAM"] = "false"
    client = Client()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            sid = await _session(conn, tmp_path)
            err, calls = await _fails(conn, llm, sid, scenario_prompt("html"))
            assert calls == ["html"]
            assert "was not a model reply" in err.message and "LLM_BASE_URL" in err.message
            assert err.data["model"]["kind"] == "not_a_reply"
            assert err.data["model"]["retryable"] is False
            assert client.thoughts() == ""  # no "retrying" note
            await _still_works(conn, client, sid, "after-html")


async def test_what_is_read_of_an_error_body_is_bounded(llm):
    # A 256 KiB HTTP 500 body (the was 5 MiB: litellm's secret redaction ran over
    # all of it several times per attempt, 37 s between two attempts 2 s apart).
    sdk = await loader().get()
    model = build_llm(
        sdk,
        {"model": "openai/scripted", "base_url": llm.base_url, "api_key": "k", "num_retries": 1},
    )
    message = sdk.Message(
        role="user", content=[sdk.TextContent(text=scenario_prompt("error500_big", bytes=262144))]
    )

    def call() -> BaseException:
        try:
            asyncio.run(model.acompletion([message], on_token=lambda chunk: None))
        except Exception as exc:
            return exc
        raise AssertionError("the call did not fail")

    error = await trio.to_thread.run_sync(call)
    assert [r.outcome for r in llm.requests[-1:]] == ["http500"]
    text = " ".join(str(e) for e in chain(error))
    assert "The server had an error while processing your request" in text  # what it said
    for exc in chain(error):
        assert len(str(exc)) < MAX_ERROR_BODY + 2048, type(exc).__name__
    failure = describe_model_failure(error)
    assert failure is not None and failure.kind == "server" and failure.http_status == 500
