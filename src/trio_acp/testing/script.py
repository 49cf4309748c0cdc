"""The script of the scripted LLM: replies, scenarios, and what a scenario sees of a request.

A :class:`Reply` is one assistant reply (= one LLM call; not an ACP prompt turn, which may take
many).  A :class:`Scenario` is the list of steps for one user prompt, each step a fixed reply or a
function of the request.  Selection is *stateless*, so any number of concurrent conversations
work without server-side state:

* the **scenario** is chosen from the text of the LAST user message in the request: a
  ``[scenario:NAME]`` tag picks a named scenario (built-ins in :mod:`.scenarios`, plus any given
  to the server); otherwise the ``rules`` ``[(pattern, scenario)]`` are tried in order (a ``str``
  pattern is a substring test, an ``re.Pattern`` is ``search``-ed, a callable gets the prompt
  text); otherwise the default scenario (``echo``);
* the **step** is the number of assistant messages after that last user message (0 for the first
  LLM call after the prompt, 1 after the first tool round, ...);
* past the end of a scenario the reply is a plain ``"(scenario finished)"`` text message.

Prompts may carry ``[key:value]`` tags (``[path:/abs/file.txt]``, ``[tokens:500]``,
``[delay_ms:20]`` ...) that scenarios read through :class:`RequestContext`.

Token counting (approximate, documented): 1 token = 4 characters, rounded up, per field.
``completion_tokens`` = ceil(len(reasoning)/4) + ceil(len(text)/4) + per tool call
ceil((len(name) + len(arguments))/4); ``prompt_tokens`` = ceil(len(json(messages))/4).
With ``chunk_size=4`` one SSE content chunk is exactly one token (the ``long`` scenario does that).

Faults (``Reply.fault``, carried out by :mod:`.llm_server`): ``"http500"`` (or any ``"httpNNN"``)
answers with that status and an error body shaped like OpenAI's (see :mod:`.openai_wire`;
``Reply.fault_message`` as its message, if given), plus a ``Retry-After`` header when
``Reply.retry_after`` is set; ``"context_length"`` is OpenAI's 400 ``context_length_exceeded``;
``"stall"`` sends ``fault_after`` chunks (default: half) and then sends nothing more, keeping the
connection open until the client goes away or the server stops; ``"truncate"`` sends
``fault_after`` chunks and closes the connection without the terminating chunk and without
``[DONE]`` (non-streaming: half the JSON body, then close); ``"badjson"`` sends ``fault_after``
chunks, then one ``data:`` event that is not JSON, then the rest of the reply; ``"reset"`` resets
the TCP connection (RST) — before any response, or after ``fault_after`` chunks when that is set;
``"html"`` answers HTTP 200 with an HTML page (``text/html``): what a base URL pointing at a web
page, a captive portal or a proxy's login page gives.  ``Reply.fault_times`` makes a fault
transient: it applies to the first N requests with the same messages (a retry sends the same
messages), and the next one gets the reply whole.  ``Reply.fault_body_bytes`` pads an
``httpNNN`` fault's error message to a body of about that many bytes.  ``Reply.response_id`` is
the ``id`` every chunk of the reply carries (default: a fresh ``chatcmpl-…`` per call; some
providers send the same one for every call).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = [
    "CHARS_PER_TOKEN",
    "FINISHED_TEXT",
    "FINISH_REASONS",
    "Pattern",
    "Reply",
    "RequestContext",
    "Scenario",
    "ScenarioRef",
    "Step",
    "ToolCall",
    "Turn",
    "message_text",
    "parse_tags",
    "tokens",
]

#: Reply used once a scenario has run out of steps.
FINISHED_TEXT = "(scenario finished)"

FINISH_REASONS = frozenset({"stop", "tool_calls", "length", "content_filter"})
_FAULT_RE = re.compile(r"^(?:http(\d{3})|stall|truncate|badjson|reset|context_length|html)$")
_TAG_RE = re.compile(r"\[([A-Za-z_][A-Za-z0-9_.-]*):([^\]\n]*)\]")
CHARS_PER_TOKEN = 4


def tokens(n_chars: int) -> int:
    """Approximate tokens in ``n_chars`` characters (4 characters a token, rounded up)."""
    return math.ceil(n_chars / CHARS_PER_TOKEN)


@attrs.frozen
class ToolCall:
    """One tool call in an assistant reply; ``arguments`` is a dict (JSON-encoded) or a raw string."""

    name: str
    arguments: Mapping[str, Any] | str = attrs.field(factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


def _to_tool_calls(value: Iterable[ToolCall | Mapping[str, Any]]) -> tuple[ToolCall, ...]:
    out = []
    for tc in value:
        if isinstance(tc, Mapping):
            tc = ToolCall(tc["name"], tc.get("arguments", {}), tc.get("id"))
        out.append(tc)
    return tuple(out)


def _check_fault(_inst: Any, _attr: Any, value: str | None) -> None:
    if value is not None and not _FAULT_RE.match(value):
        raise ValueError(
            f"unknown fault {value!r} (use 'httpNNN', 'context_length', 'stall', 'truncate', "
            "'badjson', 'reset' or 'html')"
        )


def _check_finish(_inst: Any, _attr: Any, value: str | None) -> None:
    if value is not None and value not in FINISH_REASONS:
        raise ValueError(f"finish_reason must be one of {sorted(FINISH_REASONS)}, not {value!r}")


@attrs.frozen
class Reply:
    """One scripted assistant reply (one LLM call).

    ``finish_reason`` defaults to ``"tool_calls"`` when there are tool calls, else ``"stop"``.
    ``chunk_size`` is the number of characters per streamed piece (reasoning, text and each tool
    call's argument string are split separately); ``chunk_delay`` is slept between chunks and
    ``first_chunk_delay`` before the first one (also applies to non-streaming replies).
    ``fault_after`` is how many SSE chunks ``stall``/``truncate``/``badjson`` send first (default:
    half; ``reset``: none, and no response at all). ``retry_after`` (seconds) is sent as the
    ``Retry-After`` header of an ``httpNNN`` fault. ``fault_times``: the fault applies to the
    first N requests with the same messages only (None: every time). ``fault_body_bytes``: an
    ``httpNNN`` fault's body padded to about this size. ``response_id``: the ``id`` of every
    chunk (None: a fresh one per call).
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_to_tool_calls)
    finish_reason: str | None = attrs.field(default=None, validator=_check_finish)
    chunk_size: int = attrs.field(default=16, validator=attrs.validators.ge(1))
    chunk_delay: float = 0.0
    first_chunk_delay: float = 0.0
    fault: str | None = attrs.field(default=None, validator=_check_fault)
    fault_after: int | None = None
    retry_after: float | None = None
    #: The error message of an ``httpNNN`` fault (some providers quote the request back).
    fault_message: str | None = None
    fault_times: int | None = None
    fault_body_bytes: int | None = None
    response_id: str | None = None

    @property
    def effective_finish_reason(self) -> str:
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    @property
    def http_status(self) -> int | None:
        """The HTTP error status of an ``httpNNN`` (or ``context_length``) fault, else None."""
        if self.fault == "context_length":
            return 400
        m = _FAULT_RE.match(self.fault or "")
        return int(m.group(1)) if m and m.group(1) else None

    def completion_tokens(self) -> int:
        n = tokens(len(self.reasoning)) + tokens(len(self.text))
        for tc in self.tool_calls:
            n += tokens(len(tc.name) + len(tc.arguments_json()))
        return n

    def reasoning_tokens(self) -> int:
        return tokens(len(self.reasoning))


def message_text(message: Mapping[str, Any] | None) -> str:
    """Text of a chat message whose ``content`` is a string, None or a list of content parts."""
    if not message:
        return ""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
            parts.append(part["text"])
    return "\n".join(parts)


def parse_tags(text: str) -> dict[str, str]:
    """``[key:value]`` tags in ``text`` (the last occurrence of each key wins).

    The last wins because the SDK merges consecutive user messages into one (after an
    interrupted turn, the next prompt is appended to the previous one): the newest
    prompt's tags come last.
    """
    tags: dict[str, str] = {}
    for key, value in _TAG_RE.findall(text):
        tags[key] = value.strip()
    return tags


@attrs.frozen
class RequestContext:
    """What a scenario step sees of a chat-completions request."""

    body: Mapping[str, Any]
    step: int
    #: text of the last user message (string content or joined text parts)
    prompt: str
    #: texts of the user messages before the last one, oldest first
    earlier_prompts: tuple[str, ...]
    #: ``[key:value]`` tags of ``prompt``
    tags: Mapping[str, str]

    @property
    def messages(self) -> list[Mapping[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def messages_since_prompt(self) -> list[Mapping[str, Any]]:
        """The messages after the last user message (assistant replies and tool results)."""
        messages = self.messages
        for i in range(len(messages) - 1, -1, -1):
            if isinstance(messages[i], Mapping) and messages[i].get("role") == "user":
                return messages[i + 1 :]
        return messages

    @property
    def model(self) -> str:
        return str(self.body.get("model", "scripted"))

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    def tag(self, key: str, default: str | None = None) -> str | None:
        return self.tags.get(key, default)

    def int_tag(self, key: str, default: int) -> int:
        try:
            return int(self.tags[key])
        except (KeyError, ValueError):
            return default

    def float_tag(self, key: str, default: float) -> float:
        try:
            return float(self.tags[key])
        except (KeyError, ValueError):
            return default

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> RequestContext:
        messages = list(body.get("messages") or [])
        last_user = None
        for i in range(len(messages) - 1, -1, -1):
            if isinstance(messages[i], Mapping) and messages[i].get("role") == "user":
                last_user = i
                break
        after = messages[last_user + 1 :] if last_user is not None else messages
        step = sum(1 for m in after if isinstance(m, Mapping) and m.get("role") == "assistant")
        prompt = message_text(messages[last_user]) if last_user is not None else ""
        earlier = tuple(
            message_text(m)
            for m in messages[: last_user if last_user is not None else 0]
            if isinstance(m, Mapping) and m.get("role") == "user"
        )
        return cls(
            body=body, step=step, prompt=prompt, earlier_prompts=earlier, tags=parse_tags(prompt)
        )


#: The former name of :class:`Reply` (kept so existing scripts keep working).
Turn = Reply

#: A scenario step: a fixed Reply or a function of the request.
Step = Reply | Callable[[RequestContext], Reply]


@attrs.frozen
class Scenario:
    """A named list of steps for one user prompt.

    ``steps`` is a sequence of :data:`Step` or a function ``(ctx) -> sequence of Step`` for
    scenarios whose shape depends on the prompt.
    """

    name: str
    steps: Sequence[Step] | Callable[[RequestContext], Sequence[Step]] = attrs.field(
        converter=lambda s: s if callable(s) else tuple(s)
    )
    description: str = ""

    def steps_for(self, ctx: RequestContext) -> Sequence[Step]:
        return self.steps(ctx) if callable(self.steps) else self.steps

    def reply_for(self, ctx: RequestContext) -> Reply:
        """The reply for the request's step (:data:`FINISHED_TEXT` past the last step)."""
        steps = self.steps_for(ctx)
        if ctx.step >= len(steps):
            return Reply(text=FINISHED_TEXT)
        step = steps[ctx.step]
        return step(ctx) if callable(step) else step


Pattern = str | re.Pattern[str] | Callable[[str], bool]
ScenarioRef = Scenario | str | Sequence[Step]
