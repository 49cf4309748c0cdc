"""Deterministic behaviour on demand, the same way for every agent.

The suite runs trio-acp's scripted OpenAI-compatible server and hands its URL to the agent
(`profiles.py`).  The agent sends our prompts to that "model", and a ``[scenario:NAME]`` tag
in the prompt picks what the model answers.  So an agent that passes prompts to its model
and the model's replies and tool calls back to the client can be made, on demand, to:

- reply with known text (``echo``: ``"Echo: <prompt>"``);
- stream slowly for a long time (``conformance-slow``: 200 chunks 50 ms apart when the
  agent streams; one reply after a 10 s wait when it does not) — for cancellation;
- call a shell tool (``terminal`` with ``[command:touch /abs/marker]``: whether the marker
  file exists afterwards says whether the tool really ran) — for permissions and for
  "no terminal/* calls unless advertised";
- run a long tool (``sleep``);
- write a file (``edit`` with ``[path:/abs/file]``) — for "no fs/* calls unless advertised";
- view an existing file and edit it (``review`` with ``[path:…] [old:…] [new:…]``) — for an
  agent's use of the editor's buffers (``checks/editor.py``).

Tool names are the OpenHands ones (``terminal``, ``file_editor``): an agent with other tool
names runs the text scenarios but not the tool ones, and the checks that need a tool call
say "not tested".  Asking permission is the agent's own decision; `context.py` makes it
happen by choosing a session mode that asks (see ``Context.permission_session``).

Agents that do not talk to a model at all (the suite's own test agents) can read the same
tags from the prompt text.
"""

from __future__ import annotations

from trio_acp.testing.scenarios import scenario_prompt
from trio_acp.testing.scripted_llm import Reply, RequestContext, Scenario, ScriptedLLM

__all__ = [
    "SUITE_SCENARIOS",
    "edit_prompt",
    "review_prompt",
    "echo_prompt",
    "shell_prompt",
    "slow_prompt",
    "start_llm",
]


def _slow(ctx: RequestContext) -> Reply:
    n = max(1, ctx.int_tag("chunks", 200))
    delay = ctx.float_tag("delay_ms", 50.0) / 1000
    text = "".join(f"w{i:04d} " for i in range(1, n + 1))
    # A non-streaming request gets nothing to show for n*delay seconds, then the reply.
    first = 0.0 if ctx.stream else n * delay
    return Reply(text=text, chunk_size=6, chunk_delay=delay, first_chunk_delay=first)


SLOW = Scenario(
    "conformance-slow",
    [_slow],
    "[chunks:200] chunks [delay_ms:50] apart; non-streaming: the whole wait before the reply",
)

SUITE_SCENARIOS = {s.name: s for s in (SLOW,)}


def start_llm() -> ScriptedLLM:
    return ScriptedLLM(scenarios=SUITE_SCENARIOS).start()


def echo_prompt(text: str = "hello") -> str:
    return scenario_prompt("echo", text)


def slow_prompt(chunks: int = 200, delay_ms: int = 50) -> str:
    return scenario_prompt("conformance-slow", "stream slowly", chunks=chunks, delay_ms=delay_ms)


def shell_prompt(command: str) -> str:
    return scenario_prompt("terminal", "run the command", command=command)


def sleep_prompt(seconds: int = 30) -> str:
    return scenario_prompt("sleep", "sleep", seconds=seconds)


def edit_prompt(path: str) -> str:
    return scenario_prompt("edit", "edit the file", path=path)


def review_prompt(path: str, old: str, new: str) -> str:
    """View the existing file `path`, then replace `old` by `new` in it."""
    return scenario_prompt("review", "review the file", path=path, old=old, new=new)
