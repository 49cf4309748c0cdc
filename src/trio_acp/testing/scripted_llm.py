"""A scripted, OpenAI-compatible chat-completions server for offline tests, benchmarks and demos.

There is no API key and no internet where trio-acp is tested, so every test drives the *real*
litellm / OpenHands streaming path against this server on 127.0.0.1.

Usage
=====

From sync code or pytest::

    with ScriptedLLM() as llm:
        llm.base_url            # "http://127.0.0.1:PORT/v1"
        ...                     # LLM(model="openai/scripted", base_url=llm.base_url, api_key="x", stream=True)
        llm.requests            # what the model saw (RequestRecord list, thread-safe snapshot)

From Trio: ``async with ScriptedLLM() as llm:`` (closing runs in a worker thread) and
``await llm.await_requests(n)``.

From another process (the agent under test as a subprocess)::

    python -m trio_acp.testing.scripted_llm --port 0 [--scenarios FILE.json]

prints the base URL on stdout line 1 and serves until killed (SIGTERM/SIGINT; or stdin EOF with
``--exit-on-stdin-close``).  ``llm.env()`` gives the environment variables a subprocess agent
reads (``TRIO_ACP_LLM_BASE_URL``, ``TRIO_ACP_LLM_MODEL``, ``TRIO_ACP_LLM_API_KEY`` plus the
OpenHands-style ``LLM_BASE_URL``/``LLM_MODEL``/``LLM_API_KEY`` and the litellm/OpenHands quiet
flags).

Scripts
=======

A :class:`Turn` is one assistant reply (= one LLM call).  A :class:`Scenario` is the list of
turns for one user prompt.  Selection is *stateless*, so any number of concurrent
conversations work without server-side state:

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

Streaming follows OpenAI: ``data: {chunk}\\n\\n`` events over chunked transfer encoding, the first
delta carries ``role``; then ``reasoning_content`` pieces, then ``content`` pieces, then tool
calls (first fragment: ``index``, ``id``, ``type="function"``, ``function.name``,
``function.arguments=""``; following fragments: ``index`` + argument string pieces), a last chunk
with an empty delta and ``finish_reason``, a usage chunk (``choices: []``) when
``stream_options.include_usage`` is set, and ``data: [DONE]``.

Token counting (approximate, documented): 1 token = 4 characters, rounded up, per field.
``completion_tokens`` = ceil(len(reasoning)/4) + ceil(len(text)/4) + per tool call
ceil((len(name) + len(arguments))/4); ``prompt_tokens`` = ceil(len(json(messages))/4).
With ``chunk_size=4`` one SSE content chunk is exactly one token (the ``long`` scenario does that).

Faults (``Turn.fault``): ``"http500"`` (or any ``"httpNNN"``) answers with that status and an
error body shaped like OpenAI's (``{"error": {"message", "type", "param", "code"}}``, with
OpenAI's ``type``/``code`` for 400, 401, 403, 404, 429, 500, 502, 503; ``Turn.fault_message``
as its message, if given), plus a ``Retry-After``
header when ``Turn.retry_after`` is set; ``"context_length"`` is OpenAI's 400
``context_length_exceeded``; ``"stall"`` sends ``fault_after`` chunks (default: half) and then sends
nothing more, keeping the connection open until the client goes away or the server stops;
``"truncate"`` sends ``fault_after`` chunks and closes the connection without the terminating
chunk and without ``[DONE]`` (non-streaming: half the JSON body, then close); ``"badjson"`` sends
``fault_after`` chunks, then one ``data:`` event that is not JSON, then the rest of the reply;
``"reset"`` resets the TCP connection (RST) — before any response, or after ``fault_after``
chunks when that is set.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import select
import signal
import socket
import string
import struct
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

# ``python -m trio_acp.testing.scripted_llm`` imports this module through the package first;
# runpy then warns that it is already in sys.modules.  Harmless here: silence just that warning.
warnings.filterwarnings(
    "ignore",
    message=r"'trio_acp\.testing\.scripted_llm' found in sys\.modules",
    category=RuntimeWarning,
)

__all__ = [
    "DEFAULT_MODEL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "FINISHED_TEXT",
    "RequestContext",
    "RequestRecord",
    "Scenario",
    "ScriptedLLM",
    "ToolCall",
    "Turn",
    "fast_llm_kwargs",
    "load_script_file",
    "message_text",
    "openai_error_body",
    "parse_tags",
    "scripted_env",
]

#: Model name to use with litellm / OpenHands: ``LLM(model=DEFAULT_MODEL, base_url=...)``.
DEFAULT_MODEL = "openai/scripted"
#: Environment variables through which a subprocess agent gets the scripted server.
ENV_BASE_URL = "TRIO_ACP_LLM_BASE_URL"
ENV_MODEL = "TRIO_ACP_LLM_MODEL"
ENV_API_KEY = "TRIO_ACP_LLM_API_KEY"
#: Reply used once a scenario has run out of turns.
FINISHED_TEXT = "(scenario finished)"

FINISH_REASONS = frozenset({"stop", "tool_calls", "length", "content_filter"})
_FAULT_RE = re.compile(r"^(?:http(\d{3})|stall|truncate|badjson|reset|context_length)$")
_TAG_RE = re.compile(r"\[([A-Za-z_][A-Za-z0-9_.-]*):([^\]\n]*)\]")
CHARS_PER_TOKEN = 4


def _tokens(n_chars: int) -> int:
    return math.ceil(n_chars / CHARS_PER_TOKEN)


# --------------------------------------------------------------------------------------------
# Script model
# --------------------------------------------------------------------------------------------


@attrs.frozen
class ToolCall:
    """One tool call in an assistant turn; ``arguments`` is a dict (JSON-encoded) or a raw string."""

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
            "'badjson' or 'reset')"
        )


def _check_finish(_inst: Any, _attr: Any, value: str | None) -> None:
    if value is not None and value not in FINISH_REASONS:
        raise ValueError(f"finish_reason must be one of {sorted(FINISH_REASONS)}, not {value!r}")


@attrs.frozen
class Turn:
    """One scripted assistant reply (one LLM call).

    ``finish_reason`` defaults to ``"tool_calls"`` when there are tool calls, else ``"stop"``.
    ``chunk_size`` is the number of characters per streamed piece (reasoning, text and each tool
    call's argument string are split separately); ``chunk_delay`` is slept between chunks and
    ``first_chunk_delay`` before the first one (also applies to non-streaming replies).
    ``fault_after`` is how many SSE chunks ``stall``/``truncate``/``badjson`` send first (default:
    half; ``reset``: none, and no response at all). ``retry_after`` (seconds) is sent as the
    ``Retry-After`` header of an ``httpNNN`` fault.
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
        n = _tokens(len(self.reasoning)) + _tokens(len(self.text))
        for tc in self.tool_calls:
            n += _tokens(len(tc.name) + len(tc.arguments_json()))
        return n

    def reasoning_tokens(self) -> int:
        return _tokens(len(self.reasoning))


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
        """The messages after the last user message (assistant turns and tool results)."""
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
        return cls(body=body, step=step, prompt=prompt, earlier_prompts=earlier, tags=parse_tags(prompt))


#: A scenario step: a fixed Turn or a function of the request.
Step = Turn | Callable[[RequestContext], Turn]


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

    def turn_for(self, ctx: RequestContext) -> Turn:
        steps = self.steps_for(ctx)
        if ctx.step >= len(steps):
            return Turn(text=FINISHED_TEXT)
        step = steps[ctx.step]
        return step(ctx) if callable(step) else step


Pattern = str | re.Pattern[str] | Callable[[str], bool]
ScenarioRef = Scenario | str | Sequence[Step]


# --------------------------------------------------------------------------------------------
# Scenario files (JSON)
# --------------------------------------------------------------------------------------------


def _template_turn(raw: Mapping[str, Any]) -> Step:
    """A step from a JSON turn dict; ``${prompt}``, ``${step}`` and ``${<tag>}`` are substituted."""
    turn = Turn(**raw)

    def subst(value: Any, mapping: Mapping[str, str]) -> Any:
        if isinstance(value, str):
            return string.Template(value).safe_substitute(mapping)
        if isinstance(value, Mapping):
            return {k: subst(v, mapping) for k, v in value.items()}
        if isinstance(value, list):
            return [subst(v, mapping) for v in value]
        return value

    def render(ctx: RequestContext) -> Turn:
        mapping = {**ctx.tags, "prompt": ctx.prompt, "step": str(ctx.step)}
        return attrs.evolve(
            turn,
            text=subst(turn.text, mapping),
            reasoning=subst(turn.reasoning, mapping),
            tool_calls=[
                ToolCall(tc.name, subst(tc.arguments, mapping), tc.id) for tc in turn.tool_calls
            ],
        )

    return render


@attrs.frozen
class ScriptFile:
    scenarios: dict[str, Scenario]
    rules: list[tuple[Pattern, ScenarioRef]]
    default: str | None


def load_script_file(path: str | os.PathLike[str]) -> ScriptFile:
    """Load scenarios and rules from JSON::

        {"default": "echo",
         "scenarios": {"greet": [{"text": "Hi ${name}!"},
                                 {"tool_calls": [{"name": "finish", "arguments": {"message": "bye"}}]}]},
         "rules": [{"match": "hello", "scenario": "greet"}, {"regex": "^bye\\\\b", "scenario": "echo"}]}

    Turn dicts take the :class:`Turn` fields.  Strings in turns may use ``${prompt}``, ``${step}``
    and ``${TAG}`` for any ``[TAG:value]`` of the prompt.
    """
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    scenarios = {
        name: Scenario(name, [_template_turn(t) for t in turns])
        for name, turns in (data.get("scenarios") or {}).items()
    }
    rules: list[tuple[Pattern, ScenarioRef]] = []
    for rule in data.get("rules") or []:
        pattern: Pattern
        if "regex" in rule:
            pattern = re.compile(rule["regex"])
        else:
            pattern = rule["match"]
        rules.append((pattern, rule["scenario"]))
    return ScriptFile(scenarios=scenarios, rules=rules, default=data.get("default"))


# --------------------------------------------------------------------------------------------
# Request log
# --------------------------------------------------------------------------------------------


@attrs.define
class RequestRecord:
    """One chat-completions request as seen by the server."""

    index: int
    body: dict[str, Any]
    scenario: str
    step: int
    prompt: str
    turn: Turn | None
    started: float
    finished: float | None = None
    #: "running", "complete", "disconnected", "http<NNN>", "stall", "truncate", "badjson", "reset", "stopped",
    #: "error" (the scenario or the server failed)
    outcome: str = "running"
    chunks_sent: int = 0
    #: the bearer token of the request's Authorization header (which key the client sent)
    api_key: str | None = None
    #: The request's HTTP headers, names in lower case (``authorization``: the key the client sent).
    headers: dict[str, str] = attrs.field(factory=dict)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools the request offered the model."""
        return [
            t.get("function", {}).get("name", "")
            for t in self.body.get("tools") or []
            if isinstance(t, Mapping)
        ]


# --------------------------------------------------------------------------------------------
# HTTP server
# --------------------------------------------------------------------------------------------


#: OpenAI's error ``type``/``code``/message per status, so clients classify them as they would
#: the real service's (``{"error": {"message", "type", "param", "code"}}``).
_OPENAI_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request (scripted HTTP 400 fault)."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: scri****pted. You can find your API key at "
        "https://platform.openai.com/account/api-keys. (scripted HTTP 401 fault)",
    ),
    403: (
        "request_forbidden",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported (scripted HTTP 403 fault).",
    ),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it. "
        "(scripted HTTP 404 fault)",
    ),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests (scripted HTTP 429 fault). Please try again later.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request (scripted HTTP 500 fault).",
    ),
    502: ("server_error", None, "Bad gateway (scripted HTTP 502 fault)."),
    503: (
        "server_error",
        None,
        "The engine is currently overloaded, please try again later (scripted HTTP 503 fault).",
    ),
}

_CONTEXT_LENGTH_MESSAGE = (
    "This model's maximum context length is 128000 tokens. However, your messages resulted "
    "in {tokens} tokens. Please reduce the length of the messages. (scripted fault)"
)


def openai_error_body(status: int, model: str = "scripted", *, context_length: bool = False) -> dict[str, Any]:
    """The JSON error body OpenAI sends for ``status`` (``context_length``: the 400 for a too-long prompt)."""
    if context_length:
        return {
            "error": {
                "message": _CONTEXT_LENGTH_MESSAGE.format(tokens=131072),
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    type_, code, message = _OPENAI_ERRORS.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None, f"scripted HTTP {status} fault")
    )
    return {"error": {"message": message.format(model=model), "type": type_, "param": None, "code": code}}


class _ClientGone(Exception):
    pass


class _Stopping(Exception):
    pass


def _split(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _deltas(turn: Turn, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The streamed deltas of a turn (without the final finish_reason chunk)."""
    deltas: list[dict[str, Any]] = []
    for piece in _split(turn.reasoning, turn.chunk_size):
        deltas.append({"reasoning_content": piece})
    for piece in _split(turn.text, turn.chunk_size):
        deltas.append({"content": piece})
    for i, (tc, call_id) in enumerate(zip(turn.tool_calls, ids, strict=True)):
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tc.name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in _split(tc.arguments_json(), turn.chunk_size):
            deltas.append({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
    if deltas:
        deltas[0] = {"role": "assistant", **deltas[0]}
    else:
        deltas.append({"role": "assistant", "content": ""})
    return deltas


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], owner: ScriptedLLM) -> None:
        self.owner = owner
        self.stopping = threading.Event()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(addr, _Handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._conns_lock:
                self._conns.discard(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)) or self.stopping.is_set():
            return  # clients hanging up (or us shutting down) are normal here
        if self.owner.verbose or not isinstance(exc, OSError):
            super().handle_error(request, client_address)

    def close_connections(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY: small SSE writes must not wait for ACKs
    server: _Server
    server_version = "ScriptedLLM/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if self.server.owner.verbose:
            sys.stderr.write("scripted-llm: %s - %s\n" % (self.address_string(), format % args))

    # -- helpers ------------------------------------------------------------------------------

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status: int, message: str, type_: str = "invalid_request_error") -> None:
        self._send_json(status, {"error": {"message": message, "type": type_, "param": None, "code": None}})

    def _fault_status(self, body: Mapping[str, Any], record: RequestRecord, turn: Turn) -> bool:
        """Answer an ``httpNNN``/``context_length`` fault; False if the turn has none."""
        status = turn.http_status
        if status is None:
            return False
        owner = self.server.owner
        owner._end(record, f"http{status}")
        payload = openai_error_body(
            status, str(body.get("model", owner.model_name)), context_length=turn.fault == "context_length"
        )
        if turn.fault_message:  # some providers quote the request (a key, even) back
            payload["error"]["message"] = turn.fault_message
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if turn.retry_after is not None:
            self.send_header("Retry-After", f"{turn.retry_after:g}")
        self.end_headers()
        self._write(data)
        return True

    def _reset(self) -> None:
        """Reset the connection (RST, not FIN): what a crashed proxy or a dropped NAT entry looks like."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _sleep(self, seconds: float) -> None:
        if seconds > 0 and self.server.stopping.wait(seconds):
            raise _Stopping

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as e:  # BrokenPipe, ConnectionReset, shut down by close()
            raise _ClientGone from e

    def _write_chunk(self, data: bytes) -> None:
        self._write(b"%x\r\n%s\r\n" % (len(data), data))

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _hold_open(self) -> None:
        """Stall: keep the connection open until the client leaves or the server stops."""
        while not self.server.stopping.is_set():
            if self._client_gone():
                raise _ClientGone
            self.server.stopping.wait(0.05)
        raise _Stopping

    # -- endpoints ----------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            model = self.server.owner.model_name
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [{"id": model, "object": "model", "created": 0, "owned_by": "trio-acp"}],
                },
            )
        elif path in ("/v1/model/info", "/model/info"):
            self._send_json(200, {"data": []})
        elif path in ("", "/health", "/v1"):
            self._send_json(200, {"status": "ok"})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}")
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
        except ValueError as e:
            self._error(400, f"invalid JSON body: {e}")
            return
        owner = self.server.owner
        try:
            auth = self.headers.get("Authorization") or ""
            record = owner._begin(
                body,
                api_key=auth[7:] if auth.startswith("Bearer ") else None,
                headers={k.lower(): v for k, v in self.headers.items()},
            )
        except Exception as e:  # a broken scenario: tell the client, don't kill the thread
            self._error(500, f"scripted scenario failed: {type(e).__name__}: {e}", "server_error")
            return
        try:
            assert record.turn is not None
            if body.get("stream"):
                self._stream(body, record, record.turn)
            else:
                self._complete(body, record, record.turn)
        except (_ClientGone, _Stopping) as e:
            # a stall keeps its "stall" outcome; otherwise say why the reply ended early
            if record.outcome in ("running", "complete"):
                owner._end(record, "disconnected" if isinstance(e, _ClientGone) else "stopped")
            else:
                owner._end(record, record.outcome)
            self.close_connection = True
        except Exception:
            owner._end(record, "error")
            raise

    def _usage(self, body: Mapping[str, Any], turn: Turn) -> dict[str, Any]:
        prompt = _tokens(len(json.dumps(body.get("messages") or [])))
        completion = turn.completion_tokens()
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "completion_tokens_details": {"reasoning_tokens": turn.reasoning_tokens()},
            "prompt_tokens_details": {"cached_tokens": 0},
        }

    def _complete(self, body: Mapping[str, Any], record: RequestRecord, turn: Turn) -> None:
        owner = self.server.owner
        self._sleep(turn.first_chunk_delay)
        if self._fault_status(body, record, turn):
            return
        if turn.fault == "reset":
            owner._end(record, "reset")
            self._reset()
            return
        if turn.fault == "stall":
            owner._end(record, "stall", finished=False)
            self._hold_open()
        ids = [tc.id or f"call_{uuid.uuid4().hex[:24]}" for tc in turn.tool_calls]
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.reasoning:
            message["reasoning_content"] = turn.reasoning
        if turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": tc.name, "arguments": tc.arguments_json()},
                }
                for tc, call_id in zip(turn.tool_calls, ids, strict=True)
            ]
        payload = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", owner.model_name),
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": turn.effective_finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": self._usage(body, turn),
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if turn.fault == "truncate":
            owner._end(record, "truncate")
            self._write(data[: len(data) // 2])
            self._abort()
            return
        if turn.fault == "badjson":
            # Same length, so the body arrives whole and only the parse fails.
            data = b"{" + b"x" * (len(data) - 1)
            owner._end(record, "badjson")
            self._write(data)
            return
        # recorded before the last write, so a client that got the reply sees it logged
        owner._end(record, "complete")
        self._write(data)

    def _abort(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _stream(self, body: Mapping[str, Any], record: RequestRecord, turn: Turn) -> None:
        owner = self.server.owner
        self._sleep(turn.first_chunk_delay)
        if self._fault_status(body, record, turn):
            return
        if turn.fault == "reset" and turn.fault_after is None:
            owner._end(record, "reset")
            self._reset()
            return
        ids = [tc.id or f"call_{uuid.uuid4().hex[:24]}" for tc in turn.tool_calls]
        deltas = _deltas(turn, ids)
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", owner.model_name),
            "system_fingerprint": None,
        }
        chunks = [
            {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None, "logprobs": None}]}
            for d in deltas
        ]
        chunks.append(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {},
                        "finish_reason": turn.effective_finish_reason,
                        "logprobs": None,
                    }
                ],
            }
        )
        opts = body.get("stream_options") or {}
        if isinstance(opts, Mapping) and opts.get("include_usage"):
            # OpenAI: a last chunk with empty choices carries the usage
            chunks.append({**base, "choices": [], "usage": self._usage(body, turn)})
        else:
            # not asked for: attach it to the finish chunk (some providers do; litellm uses it)
            chunks[-1]["usage"] = self._usage(body, turn)
        fault_after = None
        if turn.fault in ("stall", "truncate", "badjson", "reset"):
            fault_after = turn.fault_after if turn.fault_after is not None else len(deltas) // 2
            fault_after = max(0, min(fault_after, len(chunks)))

        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        # Without delays, SSE events are coalesced into ~32 KiB writes (benchmarks measure the
        # client, not this server's syscalls); with delays each event is written and flushed.
        pending: list[bytes] = []
        pending_size = 0
        for i, chunk in enumerate(chunks):
            if i == fault_after:
                if turn.fault != "badjson":
                    break
                self._write_chunk(b'data: {"id": "chatcmpl-broken", "choices": [{"delta": {"content": "x"\n\n')
                record.chunks_sent += 1
            event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
            if turn.chunk_delay > 0 or fault_after is not None:
                if i:
                    self._sleep(turn.chunk_delay)
                self._write_chunk(event)
                record.chunks_sent += 1
                continue
            pending.append(event)
            pending_size += len(event)
            if pending_size >= 32768:
                self._write_chunk(b"".join(pending))
                record.chunks_sent += len(pending)
                pending, pending_size = [], 0
        if pending:
            self._write_chunk(b"".join(pending))
            record.chunks_sent += len(pending)
        if turn.fault == "stall":
            owner._end(record, "stall", finished=False)
            self._hold_open()
        if turn.fault == "truncate":
            owner._end(record, "truncate")
            self._abort()
            return
        if turn.fault == "reset":
            owner._end(record, "reset")
            self._reset()
            return
        owner._end(record, "badjson" if turn.fault == "badjson" else "complete")  # before the last write: see _complete
        done = b"data: [DONE]\n\n"
        self._write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))


# --------------------------------------------------------------------------------------------
# Public server object
# --------------------------------------------------------------------------------------------


class ScriptedLLM:
    """A scripted OpenAI-compatible server on a daemon thread (see the module docstring).

    ``rules``: ``[(pattern, scenario)]`` tried in order after the ``[scenario:NAME]`` tag;
    ``scenario`` is a :class:`Scenario`, a scenario name, or a list of steps.
    ``default``: scenario used when nothing matches (name or Scenario; ``"echo"``).
    ``scenarios``: extra named scenarios (selectable by ``[scenario:NAME]`` and by name in rules),
    added to / overriding the built-ins of :mod:`trio_acp.testing.scenarios`.
    """

    def __init__(
        self,
        rules: Iterable[tuple[Pattern, ScenarioRef]] = (),
        *,
        default: ScenarioRef | None = None,
        scenarios: Mapping[str, Scenario] | Iterable[Scenario] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str = "scripted",
        verbose: bool = False,
    ) -> None:
        from trio_acp.testing.scenarios import BUILTIN_SCENARIOS

        self.scenarios: dict[str, Scenario] = dict(BUILTIN_SCENARIOS)
        if isinstance(scenarios, Mapping):
            self.scenarios.update(scenarios)
        elif scenarios is not None:
            self.scenarios.update({s.name: s for s in scenarios})
        self._rules: list[tuple[Pattern, Scenario]] = []
        for pattern, ref in rules:
            self.add_rule(pattern, ref)
        self.default = self._resolve(default if default is not None else "echo")
        self.host = host
        self.model_name = model_name
        self.verbose = verbose
        self._requested_port = port
        self._lock = threading.Condition()
        self._records: list[RequestRecord] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], **kwargs: Any) -> ScriptedLLM:
        """A server scripted by a JSON file (see :func:`load_script_file`)."""
        script = load_script_file(path)
        scenarios = {**dict(kwargs.pop("scenarios", None) or {}), **script.scenarios}
        llm = cls(scenarios=scenarios, **kwargs)
        for pattern, ref in script.rules:
            llm.add_rule(pattern, ref)
        if script.default is not None:
            llm.default = llm._resolve(script.default)
        return llm

    # -- scripting ----------------------------------------------------------------------------

    def _resolve(self, ref: ScenarioRef) -> Scenario:
        if isinstance(ref, Scenario):
            return ref
        if isinstance(ref, str):
            try:
                return self.scenarios[ref]
            except KeyError:
                raise KeyError(f"unknown scenario {ref!r}; known: {sorted(self.scenarios)}") from None
        return Scenario("(anonymous)", ref)

    def add_rule(self, pattern: Pattern, scenario: ScenarioRef) -> None:
        """Append a rule (checked after ``[scenario:NAME]`` tags and earlier rules)."""
        self._rules.append((pattern, self._resolve(scenario)))

    def add_scenario(self, scenario: Scenario) -> None:
        self.scenarios[scenario.name] = scenario

    def select(self, body: Mapping[str, Any]) -> tuple[Scenario, RequestContext]:
        """The scenario and context the server would use for this request body."""
        ctx = RequestContext.from_body(body)
        name = ctx.tags.get("scenario")
        if name and name in self.scenarios:
            return self.scenarios[name], ctx
        for pattern, scenario in self._rules:
            if isinstance(pattern, str):
                hit = pattern in ctx.prompt
            elif isinstance(pattern, re.Pattern):
                hit = pattern.search(ctx.prompt) is not None
            else:
                hit = bool(pattern(ctx.prompt))
            if hit:
                return scenario, ctx
        return self.default, ctx

    def turn_for(self, body: Mapping[str, Any]) -> Turn:
        scenario, ctx = self.select(body)
        return scenario.turn_for(ctx)

    # -- request log --------------------------------------------------------------------------

    def _begin(
        self, body: dict[str, Any], api_key: str | None = None, *, headers: dict[str, str] | None = None
    ) -> RequestRecord:
        scenario, ctx = self.select(body)
        with self._lock:
            record = RequestRecord(
                index=len(self._records),
                body=body,
                scenario=scenario.name,
                step=ctx.step,
                prompt=ctx.prompt,
                turn=None,
                started=time.monotonic(),
                api_key=api_key,
                headers=headers or {},
            )
            self._records.append(record)
            self._lock.notify_all()
        try:
            record.turn = scenario.turn_for(ctx)
        except Exception:
            self._end(record, "error")
            raise
        return record

    def _end(self, record: RequestRecord, outcome: str, *, finished: bool = True) -> None:
        with self._lock:
            record.outcome = outcome
            if finished:
                record.finished = time.monotonic()
            self._lock.notify_all()

    @property
    def requests(self) -> list[RequestRecord]:
        """Snapshot of every chat-completions request so far (oldest first)."""
        with self._lock:
            return [attrs.evolve(r) for r in self._records]

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of every chat-completions request so far."""
        with self._lock:
            return [r.body for r in self._records]

    def clear_requests(self) -> None:
        with self._lock:
            self._records.clear()

    def wait_for_requests(
        self,
        n: int,
        timeout: float = 10.0,
        predicate: Callable[[list[RequestRecord]], bool] | None = None,
    ) -> list[RequestRecord]:
        """Block until ``n`` requests were received (and ``predicate(records)``), or TimeoutError."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                if len(self._records) >= n and (predicate is None or predicate(self._records)):
                    return [attrs.evolve(r) for r in self._records]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self._records)} request(s) received, wanted {n}")
                self._lock.wait(left)

    async def await_requests(
        self,
        n: int,
        timeout: float = 10.0,
        predicate: Callable[[list[RequestRecord]], bool] | None = None,
    ) -> list[RequestRecord]:
        """Trio: wait until ``n`` requests were received (polls every 10 ms)."""
        import trio

        with trio.fail_after(timeout):
            while True:
                with self._lock:
                    if len(self._records) >= n and (
                        predicate is None or predicate(self._records)
                    ):
                        return [attrs.evolve(r) for r in self._records]
                await trio.sleep(0.01)

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedLLM is not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` (no path)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://HOST:PORT/v1``."""
        return f"{self.url}/v1"

    def env(self, model: str = DEFAULT_MODEL) -> dict[str, str]:
        """Environment variables that point a subprocess agent at this server."""
        return scripted_env(self.base_url, model)

    def llm_kwargs(self, **overrides: Any) -> dict[str, Any]:
        """Keyword arguments for ``openhands.sdk.LLM`` against this server (see fast_llm_kwargs)."""
        return fast_llm_kwargs(self.base_url, **overrides)

    def start(self) -> ScriptedLLM:
        if self._server is not None:
            return self
        self._server = _Server((self.host, self._requested_port), self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ScriptedLLM:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, end stalled streams and close open connections.  Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stopping.set()
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> ScriptedLLM:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        import trio

        await trio.to_thread.run_sync(self.close)

    def __repr__(self) -> str:
        where = self.base_url if self._server is not None else "stopped"
        return f"<ScriptedLLM {where} requests={len(self._records)}>"


def scripted_env(base_url: str, model: str = DEFAULT_MODEL, api_key: str = "scripted") -> dict[str, str]:
    """Environment for a subprocess agent using the scripted server at ``base_url``."""
    return {
        ENV_BASE_URL: base_url,
        ENV_MODEL: model,
        ENV_API_KEY: api_key,
        "LLM_BASE_URL": base_url,
        "LLM_MODEL": model,
        "LLM_API_KEY": api_key,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENHANDS_SUPPRESS_BANNER": "1",
    }


def fast_llm_kwargs(base_url: str, **overrides: Any) -> dict[str, Any]:
    """``openhands.sdk.LLM(**fast_llm_kwargs(url))``: streaming, and failing fast on faults.

    The SDK defaults (``num_retries=5``, ``retry_min_wait=8``, ``retry_multiplier=8``,
    ``retry_max_wait=64``, ``timeout=300``) turn one HTTP 500 into minutes of back-off.  Here:
    ``num_retries=1`` (tenacity ``stop_after_attempt``: 1 = a single attempt), no waits,
    ``timeout=5`` (seconds; httpx read timeout, so a stalled stream fails after 5 s).
    """
    kwargs: dict[str, Any] = {
        "model": DEFAULT_MODEL,
        "base_url": base_url,
        "api_key": "scripted",
        "usage_id": "agent",
        "stream": True,
        "num_retries": 1,
        "retry_min_wait": 0,
        "retry_max_wait": 0,
        "retry_multiplier": 0,
        "timeout": 5,
    }
    kwargs.update(overrides)
    return kwargs


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trio_acp.testing.scripted_llm",
        description="Serve a scripted OpenAI-compatible LLM; prints the base URL on stdout line 1.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port (default)")
    parser.add_argument("--scenarios", help="JSON file with extra scenarios/rules/default")
    parser.add_argument("--default", help="default scenario name (default: echo)")
    parser.add_argument("--model-name", default="scripted", help="name listed by /v1/models")
    parser.add_argument("--verbose", action="store_true", help="log requests to stderr")
    parser.add_argument(
        "--exit-on-stdin-close",
        action="store_true",
        help="also exit when stdin reaches EOF (the parent went away)",
    )
    parser.add_argument("--list", action="store_true", help="list scenario names and exit")
    args = parser.parse_args(argv)

    kwargs: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "model_name": args.model_name,
        "verbose": args.verbose,
    }
    llm = ScriptedLLM.from_file(args.scenarios, **kwargs) if args.scenarios else ScriptedLLM(**kwargs)
    if args.default:
        llm.default = llm._resolve(args.default)
    if args.list:
        for name, sc in sorted(llm.scenarios.items()):
            print(f"{name}\t{sc.description}")
        return 0

    done = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with llm:
        print(llm.base_url, flush=True)
        if args.exit_on_stdin_close:

            def watch_stdin() -> None:
                try:
                    while sys.stdin.buffer.read1(65536):
                        pass
                except (OSError, ValueError):
                    pass
                done.set()

            threading.Thread(target=watch_stdin, daemon=True).start()
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    from trio_acp.testing.scripted_llm import main as _main  # the package's copy of this module

    sys.exit(_main())
