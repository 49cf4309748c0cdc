"""OpenHands conversations (real litellm streaming path) against the scripted server.

These tests double as executable documentation of SDK behaviour the agent relies on: which thread
callbacks run on, what the token callback receives, whether final events repeat streamed text,
and how LLM faults surface (and how to make them fail fast).
"""

from __future__ import annotations

import json
import threading
import time

import pytest
import trio
from openhands.sdk import LLM, Agent, Conversation, Tool
from openhands.sdk.conversation.exceptions import ConversationRunError
from openhands.sdk.security.llm_analyzer import LLMSecurityAnalyzer
from openhands.tools.file_editor import FileEditorTool
from openhands.tools.task_tracker import TaskTrackerTool
from openhands.tools.terminal import TerminalTool
from pydantic import SecretStr

from trio_acp.testing import ScriptedLLM, fast_llm_kwargs, scenario_prompt
from trio_acp.testing.scenarios import DEMO_FILE_NAME

pytestmark = [
    pytest.mark.filterwarnings("ignore:Cost calculation failed"),
    pytest.mark.filterwarnings("ignore::UserWarning:pydantic"),
]


@pytest.fixture(scope="module")
def server():
    with ScriptedLLM() as s:
        yield s


class Run:
    """A conversation plus everything its callbacks saw."""

    def __init__(self, server, tmp_path, **llm_overrides):
        self.events = []  # (thread ident, event)
        self.tokens = []  # (thread ident, ModelResponseStream)
        self.workspace = tmp_path / "ws"
        self.workspace.mkdir()
        kwargs = fast_llm_kwargs(server.base_url, **llm_overrides)
        kwargs["api_key"] = SecretStr(kwargs["api_key"])
        self.llm = LLM(**kwargs)
        agent = Agent(
            llm=self.llm,
            tools=[
                Tool(name=TerminalTool.name, params={"terminal_type": "subprocess"}),
                Tool(name=FileEditorTool.name),
                Tool(name=TaskTrackerTool.name),
            ],
        )
        self.conv = Conversation(
            agent=agent,
            workspace=str(self.workspace),
            persistence_dir=str(tmp_path / "state"),
            visualizer=None,
            callbacks=[lambda e: self.events.append((threading.get_ident(), e))],
            token_callbacks=[lambda c: self.tokens.append((threading.get_ident(), c))],
        )

    def types(self):
        return [type(e).__name__ for _, e in self.events]

    def of(self, name):
        return [e for _, e in self.events if type(e).__name__ == name]

    def deltas(self):
        """(kind, value) per token chunk: reasoning / text / tool (index, id, name, args)."""
        out = []
        for _, chunk in self.tokens:
            for choice in chunk.choices:
                d = choice.delta
                if getattr(d, "reasoning_content", None):
                    out.append(("reasoning", d.reasoning_content))
                if d.content:
                    out.append(("text", d.content))
                for tc in d.tool_calls or []:
                    out.append(("tool", (tc.index, tc.id, tc.function.name, tc.function.arguments)))
        return out

    def run_sync(self):
        t0 = time.monotonic()
        try:
            self.conv.run()
            self.error = None
        except ConversationRunError as e:
            self.error = e
        self.elapsed = time.monotonic() - t0
        return self

    @property
    def status(self):
        return self.conv.state.execution_status.value


@pytest.fixture
def run_factory(server, tmp_path):
    runs = []

    def make(**llm_overrides):
        sub = tmp_path / f"run{len(runs)}"
        sub.mkdir()
        r = Run(server, sub, **llm_overrides)
        runs.append(r)
        return r

    yield make
    for r in runs:
        r.conv.close()


async def test_demo_conversation_from_trio(server, run_factory):
    trio_thread = threading.get_ident()
    r = run_factory()
    server.clear_requests()
    r.conv.send_message(scenario_prompt("demo", "show me", delay_ms=0))
    await trio.to_thread.run_sync(r.conv.run)

    assert r.status == "finished"
    assert r.types() == [
        "SystemPromptEvent",
        "MessageEvent",
        "ActionEvent",
        "ObservationEvent",
        "ActionEvent",
        "ObservationEvent",
        "ActionEvent",
        "ObservationEvent",
        "ActionEvent",
        "ObservationEvent",
    ]
    # send_message's callbacks run on the calling (Trio) thread, everything from run() -- events
    # and token callbacks -- on the worker thread.
    on_trio = [(tid == trio_thread, type(e).__name__) for tid, e in r.events]
    assert on_trio[:2] == [(True, "SystemPromptEvent"), (True, "MessageEvent")]
    assert not any(t for t, _ in on_trio[2:])
    assert r.tokens and not any(tid == trio_thread for tid, _ in r.tokens)

    actions = r.of("ActionEvent")
    observations = r.of("ObservationEvent")
    assert [a.tool_name for a in actions] == ["terminal", "file_editor", "task_tracker", "finish"]
    # the command really ran, the file was really created (in the workspace the terminal reported)
    assert "hello from terminal" in observations[0].observation.text
    created = r.workspace / DEMO_FILE_NAME
    assert created.read_text() == "Hello from the trio-acp demo!\n"
    assert observations[1].observation.path == str(created)
    assert [t.title for t in observations[2].observation.task_list] == [
        "Read the code",
        "Write the tests",
        "Ship it",
    ]
    assert actions[3].action.message.startswith("Demo complete")
    # summaries come from the tool-call "summary" argument; security_risk is dropped without
    # an analyzer
    assert actions[0].summary == "Say hello"
    assert all(a.security_risk.value == "UNKNOWN" for a in actions)

    # streamed deltas: reasoning first, then text, then tool-call fragments (OpenAI shape)
    deltas = r.deltas()
    first_kinds = [k for k, _ in deltas[:30]]
    assert first_kinds.index("reasoning") < first_kinds.index("text") < first_kinds.index("tool")
    reasoning = "".join(v for k, v in deltas if k == "reasoning")
    assert reasoning == "The user wants a demo. I will run a command, write a file and make a plan."
    text = "".join(v for k, v in deltas if k == "text")
    assert text.startswith("Let me show you what I can do. First, a shell command.")
    firsts = [v for k, v in deltas if k == "tool" and v[1] is not None]
    assert [(name, args) for _, _, name, args in firsts] == [
        ("terminal", ""),
        ("file_editor", ""),
        ("task_tracker", ""),
        ("finish", ""),
    ]
    assert [a.tool_call_id for a in actions] == [cid for _, cid, _, _ in firsts]
    # the final events REPEAT the streamed content: ActionEvent.thought holds the streamed text,
    # ActionEvent.reasoning_content the streamed reasoning
    assert [c.text for c in actions[0].thought] == [
        "Let me show you what I can do. First, a shell command."
    ]
    assert actions[0].reasoning_content == reasoning

    # what the model saw: stream with include_usage, our tools, and the growing history
    reqs = server.requests
    assert [q.step for q in reqs] == [0, 1, 2, 3] and {q.scenario for q in reqs} == {"demo"}
    assert all(q.stream and q.body["stream_options"] == {"include_usage": True} for q in reqs)
    assert reqs[0].tool_names == ["terminal", "file_editor", "task_tracker", "finish", "think"]
    assert [m["role"] for m in reqs[1].messages] == ["system", "user", "assistant", "tool"]


def test_plain_reply_repeats_streamed_text_and_second_turn_sees_first(server, run_factory):
    r = run_factory()
    r.conv.send_message("my secret word is [word:pineapple]")
    r.run_sync()
    assert r.status == "finished"
    assert r.types() == ["SystemPromptEvent", "MessageEvent", "MessageEvent"]
    reply = r.of("MessageEvent")[-1]
    streamed = "".join(v for k, v in r.deltas() if k == "text")
    assert reply.source == "agent"
    assert (
        reply.llm_message.content[0].text == streamed == "Echo: my secret word is [word:pineapple]"
    )

    # second prompt in the same conversation: the request carries the first exchange
    server.clear_requests()
    r.conv.send_message(scenario_prompt("remember", "what was my word?"))
    r.run_sync()
    assert r.status == "finished"
    assert r.of("MessageEvent")[-1].llm_message.content[0].text == "You said earlier: pineapple"
    (req,) = server.requests
    assert req.scenario == "remember" and req.step == 0
    assert [m["role"] for m in req.messages] == ["system", "user", "assistant", "user"]


def test_edit_scenario_and_security_analyzer(server, run_factory, tmp_path):
    r = run_factory()
    r.conv.set_security_analyzer(LLMSecurityAnalyzer())  # adds security_risk to tool schemas
    target = r.workspace / "notes.txt"
    server.clear_requests()
    r.conv.send_message(scenario_prompt("edit", path=target))
    r.run_sync()
    assert r.status == "finished", r.error
    assert target.read_text() == "hello trio\n"
    actions = r.of("ActionEvent")
    assert [a.tool_name for a in actions] == ["file_editor", "file_editor", "finish"]
    # the scripted "security_risk": "LOW" is accepted and used once an analyzer is set
    assert [a.security_risk.value for a in actions[:2]] == ["LOW", "LOW"]
    params = {t["function"]["name"]: t["function"]["parameters"] for t in server.bodies[0]["tools"]}
    assert "security_risk" in params["file_editor"]["properties"]
    assert "summary" in params["terminal"]["properties"]


def test_sdk_retry_defaults_are_slow():
    """Why fast_llm_kwargs exists: one HTTP 500 costs minutes with the defaults."""
    llm = LLM(model="openai/scripted", usage_id="x")
    assert (llm.num_retries, llm.retry_min_wait, llm.retry_max_wait, llm.retry_multiplier) == (
        5,
        8,
        64,
        8.0,
    )
    assert llm.timeout == 300 and llm.stream_idle_timeout == 300


def test_http500_fails_fast(server, run_factory):
    r = run_factory()  # num_retries=1: one attempt, no back-off
    server.clear_requests()
    r.conv.send_message("[scenario:error500]")
    r.run_sync()
    assert r.status == "error" and r.elapsed < 5
    assert "InternalServerError" in str(r.error)
    (err,) = r.of("ConversationErrorEvent")
    assert err.code == "LLMServiceUnavailableError"
    assert [q.outcome for q in server.requests] == ["http500"]

    r = run_factory(num_retries=3)  # 3 attempts; waits are 0 with retry_min/max_wait=0
    server.clear_requests()
    r.conv.send_message("[scenario:error500]")
    r.run_sync()
    assert r.status == "error" and r.elapsed < 5
    assert [q.outcome for q in server.requests] == ["http500"] * 3


def test_truncate_and_retry_replays_tokens(server, run_factory):
    r = run_factory(num_retries=2)
    server.clear_requests()
    r.conv.send_message("[scenario:truncate]")
    r.run_sync()
    assert r.status == "error"
    assert "incomplete chunked read" in str(r.error)
    assert r.of("ConversationErrorEvent")[0].code == "LLMServiceUnavailableError"
    assert [q.outcome for q in server.requests] == ["truncate", "truncate"]
    # the token callback saw the partial stream of EACH attempt: a retry replays from the start
    texts = [v for k, v in r.deltas() if k == "text"]
    assert len(texts) == 2 * server.requests[0].chunks_sent
    assert texts[: len(texts) // 2] == texts[len(texts) // 2 :]


def test_stall_gives_up_after_timeout(server, run_factory):
    r = run_factory(timeout=1)  # sync path: LLM.timeout is the httpx read timeout
    server.clear_requests()
    r.conv.send_message("[scenario:stall]")
    r.run_sync()
    assert r.status == "error"
    assert 0.9 < r.elapsed < 5
    assert "timed out" in str(r.error)
    assert r.of("ConversationErrorEvent")[0].code == "LLMServiceUnavailableError"
    assert server.requests[0].outcome == "stall"
    assert [k for k, _ in r.deltas()] == ["text"] * 4  # the chunks sent before the stall


def test_llm_kwargs_helpers(server):
    kw = server.llm_kwargs(timeout=7)
    assert kw["base_url"] == server.base_url and kw["timeout"] == 7 and kw["stream"] is True
    env = server.env()
    assert env["TRIO_ACP_LLM_BASE_URL"] == server.base_url
    assert env["TRIO_ACP_LLM_MODEL"] == "openai/scripted"
    assert json.loads(json.dumps(env)) == env
