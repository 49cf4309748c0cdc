"""The scripted LLM's HTTP server: OpenAI's chat-completions API on a daemon thread.

:class:`ScriptedLLM` answers each request with the reply its script gives (see :mod:`.script`),
encoded by :mod:`.openai_wire`, carrying out the reply's fault if it has one, and logs every
request as a :class:`RequestRecord`.  It also answers the OpenHands critic's ``/classify``
(any path ending so, e.g. ``/vllm/classify``), scripted by :mod:`.critic_wire`, logging each
request in :attr:`ScriptedLLM.critic_requests`.  It serves from a plain thread
(``http.server``), so sync tests, Trio tests and subprocess agents can all use it.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

from trio_acp.testing.critic_wire import classification_payload, critic_step
from trio_acp.testing.llm_env import DEFAULT_MODEL, fast_llm_kwargs, scripted_env
from trio_acp.testing.openai_wire import (
    BROKEN_EVENT,
    DONE_EVENT,
    HTML_PAGE,
    completion_payload,
    new_call_ids,
    openai_error_body,
    padded,
    sse_event,
    stream_chunks,
)
from trio_acp.testing.scenarios import BUILTIN_SCENARIOS
from trio_acp.testing.script import Pattern, Reply, RequestContext, Scenario, ScenarioRef
from trio_acp.testing.script_file import load_script_file

__all__ = ["RequestRecord", "ScriptedLLM"]


@attrs.define
class RequestRecord:
    """One chat-completions request as seen by the server."""

    index: int
    body: dict[str, Any]
    scenario: str
    step: int
    prompt: str
    #: the scripted reply (None until the scenario produced it)
    reply: Reply | None
    started: float
    finished: float | None = None
    #: "running", "complete", "disconnected", "http<NNN>", "stall", "truncate", "badjson", "reset", "html",
    #: "stopped",
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


class _ClientGone(Exception):
    pass


class _Stopping(Exception):
    pass


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

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.owner.verbose:
            sys.stderr.write(f"scripted-llm: {self.address_string()} - {format % args}\n")

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
        self._send_json(
            status, {"error": {"message": message, "type": type_, "param": None, "code": None}}
        )

    def _fault_status(self, body: Mapping[str, Any], record: RequestRecord, reply: Reply) -> bool:
        """Answer an ``httpNNN``/``context_length`` fault; False if the reply has none."""
        status = reply.http_status
        if status is None:
            return False
        owner = self.server.owner
        owner._end(record, f"http{status}")
        payload = openai_error_body(
            status,
            str(body.get("model", owner.model_name)),
            context_length=reply.fault == "context_length",
        )
        if reply.fault_message:  # some providers quote the request (a key, even) back
            payload["error"]["message"] = reply.fault_message
        data = json.dumps(padded(payload, reply.fault_body_bytes)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if reply.retry_after is not None:
            self.send_header("Retry-After", f"{reply.retry_after:g}")
        self.end_headers()
        self._write(data)
        return True

    def _fault_html(self, record: RequestRecord, reply: Reply) -> bool:
        """Answer an ``html`` fault (HTTP 200, a web page); False if the reply has none."""
        if reply.fault != "html":
            return False
        self.server.owner._end(record, "html")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(HTML_PAGE)))
        self.end_headers()
        self._write(HTML_PAGE)
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

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path in ("/v1/models", "/models"):
            model = self.server.owner.model_name
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": model, "object": "model", "created": 0, "owned_by": "trio-acp"}
                    ],
                },
            )
        elif path in ("/v1/model/info", "/model/info"):
            self._send_json(200, {"data": []})
        elif path in ("", "/health", "/v1"):
            self._send_json(200, {"status": "ok"})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path.endswith("/classify"):  # the critic's API (critic_wire.py)
            self._classify(raw)
            return
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
            assert record.reply is not None
            if body.get("stream"):
                self._stream(body, record, record.reply)
            else:
                self._complete(body, record, record.reply)
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

    def _classify(self, raw: bytes) -> None:
        owner = self.server.owner
        try:
            body = json.loads(raw or b"{}")
            step = critic_step(str(body.get("input", "")))
        except (ValueError, AttributeError) as e:
            self._error(400, f"invalid classify request: {e}")
            return
        auth = self.headers.get("Authorization") or ""
        with owner._lock:
            owner.critic_requests.append(
                {
                    "body": body,
                    "api_key": auth[7:] if auth.startswith("Bearer ") else None,
                    "step": step,
                }
            )
            owner._lock.notify_all()
        status = step.http_status
        if status is not None:
            self._send_json(status, openai_error_body(status, str(body.get("model", "critic"))))
        elif step.fault == "stall":
            try:
                self._hold_open()
            except (_ClientGone, _Stopping):
                self.close_connection = True
        else:
            self._send_json(200, classification_payload(step, str(body.get("model", "critic"))))

    def _complete(self, body: Mapping[str, Any], record: RequestRecord, reply: Reply) -> None:
        owner = self.server.owner
        self._sleep(reply.first_chunk_delay)
        if self._fault_status(body, record, reply) or self._fault_html(record, reply):
            return
        if reply.fault == "reset":
            owner._end(record, "reset")
            self._reset()
            return
        if reply.fault == "stall":
            owner._end(record, "stall", finished=False)
            self._hold_open()
        payload = completion_payload(body, reply, owner.model_name, new_call_ids(reply))
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if reply.fault == "truncate":
            owner._end(record, "truncate")
            self._write(data[: len(data) // 2])
            self._abort()
            return
        if reply.fault == "badjson":
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

    def _stream(self, body: Mapping[str, Any], record: RequestRecord, reply: Reply) -> None:
        owner = self.server.owner
        self._sleep(reply.first_chunk_delay)
        if self._fault_status(body, record, reply) or self._fault_html(record, reply):
            return
        if reply.fault == "reset" and reply.fault_after is None:
            owner._end(record, "reset")
            self._reset()
            return
        chunks, n_deltas = stream_chunks(body, reply, owner.model_name, new_call_ids(reply))
        fault_after = None
        if reply.fault in ("stall", "truncate", "badjson", "reset"):
            fault_after = reply.fault_after if reply.fault_after is not None else n_deltas // 2
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
                if reply.fault != "badjson":
                    break
                self._write_chunk(BROKEN_EVENT)
                record.chunks_sent += 1
            event = sse_event(chunk)
            if reply.chunk_delay > 0 or fault_after is not None:
                if i:
                    self._sleep(reply.chunk_delay)
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
        if reply.fault == "stall":
            owner._end(record, "stall", finished=False)
            self._hold_open()
        if reply.fault == "truncate":
            owner._end(record, "truncate")
            self._abort()
            return
        if reply.fault == "reset":
            owner._end(record, "reset")
            self._reset()
            return
        owner._end(
            record, "badjson" if reply.fault == "badjson" else "complete"
        )  # before the last write: see _complete
        self._write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(DONE_EVENT), DONE_EVENT))


class ScriptedLLM:
    """A scripted OpenAI-compatible server on a daemon thread (usage: :mod:`trio_acp.testing.scripted_llm`).

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
        # How many requests with these messages met their reply's fault (`Reply.fault_times`).
        self._faults_met: dict[str, int] = {}
        #: every `/classify` (critic) request: its JSON body, bearer key and scripted step
        self.critic_requests: list[dict[str, Any]] = []
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
                raise KeyError(
                    f"unknown scenario {ref!r}; known: {sorted(self.scenarios)}"
                ) from None
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

    def reply_for(self, body: Mapping[str, Any]) -> Reply:
        scenario, ctx = self.select(body)
        return scenario.reply_for(ctx)

    # -- request log --------------------------------------------------------------------------

    def _begin(
        self,
        body: dict[str, Any],
        api_key: str | None = None,
        *,
        headers: dict[str, str] | None = None,
    ) -> RequestRecord:
        scenario, ctx = self.select(body)
        with self._lock:
            record = RequestRecord(
                index=len(self._records),
                body=body,
                scenario=scenario.name,
                step=ctx.step,
                prompt=ctx.prompt,
                reply=None,
                started=time.monotonic(),
                api_key=api_key,
                headers=headers or {},
            )
            self._records.append(record)
            self._lock.notify_all()
        try:
            record.reply = self._transient(body, scenario.reply_for(ctx))
        except Exception:
            self._end(record, "error")
            raise
        return record

    def _transient(self, body: Mapping[str, Any], reply: Reply) -> Reply:
        """The reply without its fault once it met ``fault_times`` requests with these messages."""
        if reply.fault is None or reply.fault_times is None:
            return reply
        key = json.dumps(body.get("messages"), sort_keys=True)
        with self._lock:
            met = self._faults_met.get(key, 0)
            if met >= reply.fault_times:
                return attrs.evolve(reply, fault=None)
            self._faults_met[key] = met + 1
        return reply

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
            self._faults_met.clear()

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
                    if len(self._records) >= n and (predicate is None or predicate(self._records)):
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
