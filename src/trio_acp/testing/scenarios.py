"""Built-in scenarios of the scripted LLM.

A prompt selects one with a ``[scenario:NAME]`` tag (e.g. ``"[scenario:terminal] run it"``);
without a tag the server's rules and then its default (``echo``) apply.  Scenarios read optional
``[key:value]`` tags from the prompt:

==========  =================================================================================
echo        default. One text reply ``"Echo: <prompt>"``.
slow        A long text reply streamed slowly: ``[chunks:N]`` (200) chunks ``[delay_ms:N]``
            (50) apart — for cancel tests.  Text pieces are ``"w0001 "``, ``"w0002 "`` ...
terminal    ``terminal`` tool call running ``[command:...]`` (``echo hello from terminal``),
            then ``finish``.
sleep       ``terminal`` running ``sleep [seconds:N]`` (30) — for cancel-mid-tool tests — then
            ``finish``.
edit        ``file_editor`` create of ``[path:/abs/file]`` with ``"hello world\\n"``, then
            str_replace ``world`` → ``trio``, then ``finish``.  Without a path: a text reply
            asking for one.
plan        ``task_tracker`` plan with 3 tasks, then ``finish``.
demo        reasoning + streamed text + ``terminal`` echo, then ``file_editor`` create of
            ``[path:/abs/file]`` (default: ``trio-acp-demo.txt`` in the working directory the
            terminal result reported, else ``/tmp/trio-acp-demo/trio-acp-demo.txt``), then
            ``task_tracker`` plan, then ``finish``.  ``[delay_ms:N]`` (10) between chunks.
long        One text reply of ``[tokens:N]`` (20,000) tokens in 4-character chunks (one chunk =
            one token: ``"000 001 002 ..."`` modulo 1,000) — the streaming benchmark.
            ``long_scenario(tokens, chunk_size)`` builds other sizes.
error500    HTTP 500 on every call.
errorNNN    ``error400``, ``error401``, ``error403``, ``error404``, ``error502``, ``error503``: that
            status on every call, with OpenAI's error body for it (401: ``invalid_api_key``, 404:
            ``model_not_found`` ...).
error429    HTTP 429 ``rate_limit_exceeded`` with ``Retry-After: [retry_after:N]`` (1) seconds.
context_too_long
            HTTP 400 ``context_length_exceeded`` (OpenAI's "maximum context length" error) on every
            call that offers tools (the agent's); a call without tools (a condenser's summary)
            gets a short summary.
stall       Streams half of a text reply, then stalls (connection kept open).
truncate    Streams half of a text reply, then closes the connection without ``[DONE]``.
badjson     Streams half of a text reply, then one ``data:`` event that is not JSON, then the rest.
reset       Resets the TCP connection (RST) without a response; with ``[after:N]``, after N
            chunks of a streamed reply.
flaky_stream
            Streams half of a text reply, then closes the connection, on the first
            ``[times:N]`` (1) attempts of a call; the next attempt streams all of it.
            ``[id:X]``: every chunk's response id is X (as some providers do).
same_id     ``echo``, every chunk's response id ``[id:X]`` (``x``), whatever the call.
html        HTTP 200 with an HTML page (``text/html``) on every call: a base URL that points at a
            web page, or a network's sign-in page.
error500_big
            HTTP 500 with an error body of ``[bytes:N]`` (5 MiB) on the first ``[times:N]``
            (every) attempts of a call; then ``echo``.
delegate    The ``task`` tool: a sub-agent (``[agent:general-purpose]``) is given the prompt
            ``[scenario:<[sub:terminal]>]`` plus this prompt's ``[command:...]`` /
            ``[seconds:...]`` tags, so its own LLM calls (same server, ``stream: false``,
            its own history) play that scenario; then ``finish`` quoting the task's result.
remember    Multi-turn memory proof: the reply quotes the ``[word:X]`` tag of the most recent
            EARLIER user message that has one (else that message's last word):
            ``"You said earlier: X"``.
==========  =================================================================================

Tool calls carry ``"summary"`` and ``"security_risk": "LOW"`` (the SDK always pops
``security_risk`` and ignores it unless a security analyzer is set; ``summary`` becomes the
ActionEvent summary).
"""

from __future__ import annotations

import re

from trio_acp.testing.script import Reply, RequestContext, Scenario, ToolCall, message_text

__all__ = [
    "BUILTIN_SCENARIOS",
    "DELEGATE",
    "DEMO",
    "ECHO",
    "EDIT",
    "REVIEW",
    "BADJSON",
    "CONTEXT_TOO_LONG",
    "ERROR400",
    "ERROR401",
    "ERROR403",
    "ERROR404",
    "ERROR429",
    "ERROR500",
    "ERROR502",
    "ERROR503",
    "RESET",
    "LONG",
    "PLAN",
    "REMEMBER",
    "SLEEP",
    "SLOW",
    "STALL",
    "TERMINAL",
    "TRUNCATE",
    "DEMO_DEFAULT_PATH",
    "DEMO_FILE_NAME",
    "finish",
    "long_scenario",
    "long_text",
    "scenario_prompt",
]

DEMO_FILE_NAME = "trio-acp-demo.txt"
DEMO_DEFAULT_PATH = f"/tmp/trio-acp-demo/{DEMO_FILE_NAME}"


def scenario_prompt(name: str, text: str = "", **tags: object) -> str:
    """A prompt selecting scenario ``name`` with extra ``[key:value]`` tags."""
    parts = [f"[scenario:{name}]"] + [f"[{k}:{v}]" for k, v in tags.items()]
    if text:
        parts.append(text)
    return " ".join(parts)


def finish(message: str, **reply_kwargs: object) -> Reply:
    """A reply calling the SDK's built-in ``finish`` tool."""
    return Reply(tool_calls=[ToolCall("finish", {"message": message})], **reply_kwargs)  # type: ignore[arg-type]


def _tool(name: str, summary: str, risk: str = "LOW", **args: object) -> ToolCall:
    return ToolCall(name, {**args, "summary": summary, "security_risk": risk})


# -- echo ---------------------------------------------------------------------------------------

ECHO = Scenario(
    "echo",
    [lambda ctx: Reply(text=f"Echo: {ctx.prompt}")],
    "text reply echoing the prompt",
)

# -- slow ---------------------------------------------------------------------------------------


def _slow(ctx: RequestContext) -> Reply:
    n = max(1, ctx.int_tag("chunks", 200))
    delay = ctx.float_tag("delay_ms", 50.0) / 1000
    text = "".join(f"w{i:04d} " for i in range(1, n + 1))
    return Reply(text=text, chunk_size=6, chunk_delay=delay)


SLOW = Scenario("slow", [_slow], "long text streamed slowly ([chunks:200] [delay_ms:50])")

# -- terminal / sleep ---------------------------------------------------------------------------

TERMINAL = Scenario(
    "terminal",
    [
        lambda ctx: Reply(
            text="I'll run a command.",
            tool_calls=[
                _tool(
                    "terminal",
                    "Run a shell command",
                    # [risk:HIGH] makes the model rate its command risky (for llm-approve).
                    risk=ctx.tag("risk", "LOW") or "LOW",
                    command=ctx.tag("command", "echo hello from terminal"),
                )
            ],
        ),
        finish("I ran the command in the terminal."),
    ],
    "terminal tool call ([command:echo hello from terminal]) then finish",
)

SLEEP = Scenario(
    "sleep",
    [
        lambda ctx: Reply(
            text="Sleeping for a while.",
            tool_calls=[_tool("terminal", "Sleep", command=f"sleep {ctx.int_tag('seconds', 30)}")],
        ),
        finish("Done sleeping."),
    ],
    "terminal `sleep [seconds:30]` then finish",
)

# -- edit ---------------------------------------------------------------------------------------


def _edit_steps(ctx: RequestContext) -> list[Reply]:
    path = ctx.tag("path")
    if not path:
        return [Reply(text="The edit scenario needs an absolute path: add [path:/abs/file.txt].")]
    return [
        Reply(
            text=f"Creating {path}.",
            tool_calls=[
                _tool(
                    "file_editor",
                    f"Create {path}",
                    command="create",
                    path=path,
                    file_text="hello world\n",
                )
            ],
        ),
        Reply(
            tool_calls=[
                _tool(
                    "file_editor",
                    f"Edit {path}",
                    command="str_replace",
                    path=path,
                    old_str="world",
                    new_str="trio",
                )
            ]
        ),
        finish(f"Created and edited {path}."),
    ]


EDIT = Scenario("edit", _edit_steps, "file_editor create + str_replace on [path:/abs/file]")


def _review_steps(ctx: RequestContext) -> list[Reply]:
    # An edit of a file that already exists: the view shows what the agent reads (the
    # editor's buffer, when files go through the editor), the replacement what it writes.
    path = ctx.tag("path")
    if not path:
        return [Reply(text="The review scenario needs an absolute path: add [path:/abs/file].")]
    old, new = ctx.tag("old", "world") or "world", ctx.tag("new", "trio") or "trio"
    return [
        Reply(
            text=f"Reading {path}.",
            tool_calls=[_tool("file_editor", f"Read {path}", command="view", path=path)],
        ),
        Reply(
            tool_calls=[
                _tool(
                    "file_editor",
                    f"Edit {path}",
                    command="str_replace",
                    path=path,
                    old_str=old,
                    new_str=new,
                )
            ]
        ),
        finish(f"Edited {path}."),
    ]


REVIEW = Scenario(
    "review", _review_steps, "file_editor view + str_replace [old:world] → [new:trio] on [path:…]"
)

# -- plan ---------------------------------------------------------------------------------------

PLAN_TASKS = [
    {"title": "Read the code", "notes": "", "status": "done"},
    {"title": "Write the tests", "notes": "pytest", "status": "in_progress"},
    {"title": "Ship it", "notes": "", "status": "todo"},
]

PLAN = Scenario(
    "plan",
    [
        Reply(
            text="Here is my plan.",
            tool_calls=[
                _tool("task_tracker", "Plan the work", command="plan", task_list=PLAN_TASKS)
            ],
        ),
        finish("Planned 3 tasks."),
    ],
    "task_tracker plan with 3 tasks then finish",
)

# -- demo ---------------------------------------------------------------------------------------


_CWD_RE = re.compile(r"\[Current working directory: ([^\]\n]+)\]")


def _workspace_from_history(ctx: RequestContext) -> str | None:
    """The terminal's working directory, as reported in a tool result of this prompt's turns."""
    for message in ctx.messages_since_prompt:
        if message.get("role") == "tool":
            m = _CWD_RE.search(message_text(message))
            if m:
                return m.group(1).strip()
    return None


def _demo_steps(ctx: RequestContext) -> list[Reply]:
    delay = ctx.float_tag("delay_ms", 10.0) / 1000
    path = ctx.tag("path")
    if not path:
        cwd = _workspace_from_history(ctx)
        path = f"{cwd.rstrip('/')}/{DEMO_FILE_NAME}" if cwd else DEMO_DEFAULT_PATH
    return [
        Reply(
            reasoning="The user wants a demo. I will run a command, write a file and make a plan.",
            text="Let me show you what I can do. First, a shell command.",
            tool_calls=[_tool("terminal", "Say hello", command="echo hello from terminal")],
            chunk_size=8,
            chunk_delay=delay,
        ),
        Reply(
            text="Now I'll create a file.",
            tool_calls=[
                _tool(
                    "file_editor",
                    f"Create {path}",
                    command="create",
                    path=path,
                    file_text="Hello from the trio-acp demo!\n",
                )
            ],
            chunk_size=8,
            chunk_delay=delay,
        ),
        Reply(
            text="And a plan.",
            tool_calls=[
                _tool("task_tracker", "Plan the demo", command="plan", task_list=PLAN_TASKS)
            ],
            chunk_size=8,
            chunk_delay=delay,
        ),
        finish("Demo complete: ran a command, created a file and made a plan.", chunk_size=8),
    ]


DEMO = Scenario(
    "demo", _demo_steps, "reasoning + text + terminal + file_editor + task_tracker + finish"
)

# -- long ---------------------------------------------------------------------------------------


def long_text(tokens: int) -> str:
    """``tokens`` 4-character tokens: ``"000 001 ... 999 000 ..."``."""
    return "".join(f"{i % 1000:03d} " for i in range(tokens))


def long_scenario(tokens: int = 20_000, chunk_size: int = 4, chunk_delay: float = 0.0) -> Scenario:
    """A single text reply of ``tokens`` tokens (4 chars each), ``chunk_size`` chars per chunk."""
    return Scenario(
        "long",
        [Reply(text=long_text(tokens), chunk_size=chunk_size, chunk_delay=chunk_delay)],
        f"{tokens}-token text reply",
    )


LONG = Scenario(
    "long",
    [
        lambda ctx: Reply(
            text=long_text(max(1, ctx.int_tag("tokens", 20_000))),
            chunk_size=max(1, ctx.int_tag("chunk_size", 4)),
            chunk_delay=ctx.float_tag("delay_ms", 0.0) / 1000,
        )
    ],
    "[tokens:20000]-token text reply in [chunk_size:4]-char chunks",
)

# -- faults -------------------------------------------------------------------------------------

ERROR500 = Scenario("error500", [Reply(fault="http500")], "HTTP 500 on every call")

STALL = Scenario(
    "stall",
    [
        Reply(
            text="I am going to stop talking in the middle of this sentence.",
            chunk_size=8,
            fault="stall",
        )
    ],
    "half a reply, then silence with the connection open",
)

TRUNCATE = Scenario(
    "truncate",
    [
        Reply(
            text="This reply is cut off in the middle of the stream.",
            chunk_size=8,
            fault="truncate",
        )
    ],
    "half a reply, then the connection closes without [DONE]",
)


def _http_error(status: int) -> Scenario:
    return Scenario(
        f"error{status}",
        [Reply(fault=f"http{status}")],
        f"HTTP {status} on every call (OpenAI's body)",
    )


ERROR400, ERROR401, ERROR403, ERROR404, ERROR502, ERROR503 = (
    _http_error(status) for status in (400, 401, 403, 404, 502, 503)
)

ERROR429 = Scenario(
    "error429",
    [lambda ctx: Reply(fault="http429", retry_after=ctx.float_tag("retry_after", 1.0))],
    "HTTP 429 rate_limit_exceeded with Retry-After: [retry_after:1]",
)


def _context_too_long(ctx: RequestContext) -> list[Reply]:
    # The agent's calls (they offer tools) overflow; a summarizing condenser's call (no
    # tools, a short prompt) fits, as it would with a real model: the agent then condenses,
    # overflows again, and has nothing left to condense.
    if not ctx.body.get("tools"):
        return [
            Reply(
                text="Summary: the user asked for something too long. [scenario:context_too_long]"
            )
        ]
    return [Reply(fault="context_length")]


CONTEXT_TOO_LONG = Scenario(
    "context_too_long",
    _context_too_long,
    "HTTP 400 context_length_exceeded on every agent call (a condenser's summary call works)",
)

BADJSON = Scenario(
    "badjson",
    [
        Reply(
            text="One of the chunks of this reply is not valid JSON at all.",
            chunk_size=8,
            fault="badjson",
        )
    ],
    "half a reply, one event that is not JSON, then the rest",
)


def _reset(ctx: RequestContext) -> Reply:
    after = ctx.tags.get("after")
    return Reply(
        text="This connection is reset by the peer in the middle of the reply.",
        chunk_size=8,
        fault="reset",
        fault_after=ctx.int_tag("after", 0) if after is not None else None,
    )


RESET = Scenario("reset", [_reset], "TCP reset before any response ([after:N]: after N chunks)")

#: The text of the ``flaky_stream`` scenario's reply.
FLAKY_TEXT = "The quick brown fox jumps over the lazy dog; this reply is streamed in full once."


def _flaky_stream(ctx: RequestContext) -> Reply:
    return Reply(
        text=FLAKY_TEXT,
        chunk_size=8,
        fault="truncate",
        fault_times=max(0, ctx.int_tag("times", 1)),
        response_id=ctx.tag("id"),
    )


FLAKY_STREAM = Scenario(
    "flaky_stream",
    [_flaky_stream],
    "half a reply and a closed connection on the first [times:1] attempts, then all of it",
)

SAME_ID = Scenario(
    "same_id",
    [lambda ctx: Reply(text=f"Echo: {ctx.prompt}", chunk_size=8, response_id=ctx.tag("id", "x"))],
    "echo, every chunk's response id [id:x]",
)

HTML = Scenario("html", [Reply(fault="html")], "HTTP 200 with an HTML page on every call")


def _error500_big(ctx: RequestContext) -> Reply:
    times = ctx.tags.get("times")
    return Reply(
        text=f"Echo: {ctx.prompt}",
        fault="http500",
        fault_body_bytes=max(0, ctx.int_tag("bytes", 5 * 1024 * 1024)),
        fault_times=ctx.int_tag("times", 0) if times is not None else None,
    )


ERROR500_BIG = Scenario(
    "error500_big",
    [_error500_big],
    "HTTP 500 with a [bytes:5 MiB] body on the first [times:N] (every) attempts, then echo",
)

# -- delegate (sub-agents) ---------------------------------------------------------------------

#: Tags of the delegating prompt handed on to the sub-agent's.
_SUB_TAGS = ("command", "seconds", "risk")


def _delegate_first(ctx: RequestContext) -> Reply:
    sub = ctx.tag("sub", "terminal") or "terminal"
    tags = " ".join(f"[{k}:{ctx.tags[k]}]" for k in _SUB_TAGS if k in ctx.tags)
    return Reply(
        text="I'll hand this to a sub-agent.",
        tool_calls=[
            _tool(
                "task",
                "Delegate to a sub-agent",
                description=ctx.tag("description", "Run a command") or "Run a command",
                prompt=f"[scenario:{sub}] {tags} Do this and report back.",
                subagent_type=ctx.tag("agent", "general-purpose") or "general-purpose",
            )
        ],
    )


def _delegate_report(ctx: RequestContext) -> Reply:
    results = [m for m in ctx.messages_since_prompt if m.get("role") == "tool"]
    text = message_text(results[-1]) if results else "(no result)"
    return finish(f"The sub-agent reported: {' '.join(text.split())}")


DELEGATE = Scenario(
    "delegate",
    [_delegate_first, _delegate_report],
    "task tool call: a sub-agent plays [sub:terminal] with this prompt's tags, then finish",
)

# -- remember -----------------------------------------------------------------------------------

_WORD_RE = re.compile(r"[A-Za-z0-9_'-]+")


def _remember(ctx: RequestContext) -> Reply:
    for earlier in reversed(ctx.earlier_prompts):
        m = re.search(r"\[word:([^\]\n]*)\]", earlier)
        if m:
            return Reply(text=f"You said earlier: {m.group(1).strip()}")
    for earlier in reversed(ctx.earlier_prompts):
        words = _WORD_RE.findall(re.sub(r"\[[^\]]*\]", " ", earlier))
        if words:
            return Reply(text=f"You said earlier: {words[-1]}")
    return Reply(text="I don't remember anything earlier.")


REMEMBER = Scenario("remember", [_remember], "quote [word:X] from an earlier user message")


BUILTIN_SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        ECHO,
        SLOW,
        TERMINAL,
        SLEEP,
        EDIT,
        REVIEW,
        PLAN,
        DEMO,
        LONG,
        ERROR500,
        ERROR400,
        ERROR401,
        ERROR403,
        ERROR404,
        ERROR429,
        ERROR502,
        ERROR503,
        CONTEXT_TOO_LONG,
        STALL,
        TRUNCATE,
        BADJSON,
        RESET,
        FLAKY_STREAM,
        SAME_ID,
        HTML,
        ERROR500_BIG,
        REMEMBER,
        DELEGATE,
    )
}
