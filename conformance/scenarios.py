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

The tool scenarios call the agent's *own* tools: the model picks them from the ``tools``
the agent offers in each request (``agent_tools.py``: a shell tool, a multi-command editor
or write / edit / read tools, recognised by name and parameter shape) and builds the
arguments for their schemas.  OpenHands agents get ``terminal`` and ``file_editor`` calls
exactly as before, and ``finish`` to end the turn; an agent without a ``finish`` tool gets
a closing text reply.  An agent that offers no tool of a kind gets a text reply saying so,
and the checks that need that tool say "not tested".  Asking permission is the agent's own
decision; `context.py` makes it happen by choosing a session mode that asks (see
``Context.permission_session``).

Agents that do not talk to a model at all (the suite's own test agents) can read the same
tags from the prompt text.
"""

from __future__ import annotations

from trio_acp.testing.scenarios import scenario_prompt
from trio_acp.testing.scripted_llm import Reply, RequestContext, Scenario, ScriptedLLM, ToolCall

from .agent_tools import AgentTools, Call, pick_tools

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


# --- the tool scenarios, on the agent's own tools ---------------------------------------


def _tools(ctx: RequestContext) -> AgentTools:
    return pick_tools(ctx.body.get("tools"))


def _reply(call: Call | None, text: str, missing: str) -> Reply:
    """A reply making `call`, or a text reply saying which tool the agent lacks."""
    if call is None:
        return Reply(text=missing)
    return Reply(text=text, tool_calls=[ToolCall(call.name, call.arguments)])


def _closing(tools: AgentTools, message: str) -> Reply:
    # OpenHands agents end a turn only on their `finish` tool; others on a text reply.
    done = tools.done(message)
    return _reply(done, "", message) if done is not None else Reply(text=message)


def _no_tool(tools: AgentTools, kind: str) -> str:
    return f"The agent offers no {kind} tool (its tools: {tools.describe()})."


def _shell_steps(ctx: RequestContext, command: str, text: str, done: str) -> list[Reply]:
    tools = _tools(ctx)
    summary = "Sleep" if command.startswith("sleep ") else "Run a shell command"
    return [
        _reply(tools.run(command, summary), text, _no_tool(tools, "shell")),
        _closing(tools, done),
    ]


def _terminal(ctx: RequestContext) -> list[Reply]:
    command = ctx.tag("command", "echo hello from terminal") or "echo hello from terminal"
    return _shell_steps(ctx, command, "I'll run a command.", "I ran the command in the terminal.")


def _sleep(ctx: RequestContext) -> list[Reply]:
    command = f"sleep {ctx.int_tag('seconds', 30)}"
    return _shell_steps(ctx, command, "Sleeping for a while.", "Done sleeping.")


def _edit(ctx: RequestContext) -> list[Reply]:
    path = ctx.tag("path")
    if not path:
        return [Reply(text="The edit scenario needs an absolute path: add [path:/abs/file.txt].")]
    tools = _tools(ctx)
    missing = _no_tool(tools, "file")
    return [
        _reply(tools.create(path, "hello world\n", f"Create {path}"), f"Creating {path}.", missing),
        _reply(tools.replace(path, "world", "trio", "hello trio\n", f"Edit {path}"), "", missing),
        _closing(tools, f"Created and edited {path}."),
    ]


def _review(ctx: RequestContext) -> list[Reply]:
    # An edit of a file that already exists: the view shows what the agent reads (the
    # editor's buffer, when files go through the editor), the replacement what it writes.
    path = ctx.tag("path")
    if not path:
        return [Reply(text="The review scenario needs an absolute path: add [path:/abs/file].")]
    old, new = ctx.tag("old", "world") or "world", ctx.tag("new", "trio") or "trio"
    tools = _tools(ctx)
    view = tools.view(path, f"Read {path}")
    # Without a read tool the edit comes first (the agent's own edit tool reads the file).
    steps = [_reply(view, f"Reading {path}.", "")] if view is not None else []
    # Rewriting the whole file would need its text: only a real replacement edits it.
    edit = tools.replace(path, old, new, "", f"Edit {path}") if tools.edit or tools.editor else None
    steps.append(_reply(edit, "", _no_tool(tools, "edit")))
    steps.append(_closing(tools, f"Edited {path}."))
    return steps


TERMINAL = Scenario(
    "terminal", _terminal, "the agent's shell tool runs [command:…], then the turn ends"
)
SLEEP = Scenario("sleep", _sleep, "the agent's shell tool runs `sleep [seconds:30]`")
EDIT = Scenario("edit", _edit, "the agent's file tools create [path:…], then replace world → trio")
REVIEW = Scenario(
    "review", _review, "the agent's file tools view [path:…], then replace [old:…] → [new:…]"
)

SUITE_SCENARIOS = {s.name: s for s in (SLOW, TERMINAL, SLEEP, EDIT, REVIEW)}


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
