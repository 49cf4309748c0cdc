"""A small ACP agent for testing the conformance suite: conforming by default, broken on demand.

    python conformance/tests/agents/faulty_agent.py [--fault NAME]

Without ``--fault`` it passes every check of the suite, capabilities included (load, resume,
close, list, delete, modes, config options, permissions, image/audio/resource prompts).  Each
fault (``FAULTS``) breaks one rule, so that a test can show that the check for that rule
fails.  It reads the suite's ``[scenario:NAME]`` prompt tags itself instead of asking a model
(``echo``, ``conformance-slow``, ``terminal``, ``sleep``, ``edit``, ``review``), which keeps
it fast. Files and commands go through the client when it offers ``fs/*`` / ``terminal``.

It is raw JSON-RPC on purpose (not trio-acp's typed stack, which would refuse to break most
of these rules): every fault is one ``if FAULT == ...`` at the place the rule lives.
Sessions persist as JSON files under ``$OPENHANDS_PERSISTENCE_DIR/faulty-agent/`` so that a
second process can load or resume them.
"""

from __future__ import annotations

import argparse
import contextvars
import json
import os
import re
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import trio

from trio_acp.v2.stream import negotiated_stream

#: fault name → what it breaks (the check it is meant to fail is in the suite's tests).
FAULTS = {
    "junk-stdout": "prints a banner line on stdout",
    "latin1-stdout": "writes frames in Latin-1, not UTF-8",
    "small-frames": "dies on input lines over 64 KiB",
    "no-exit-on-eof": "keeps running after stdin EOF",
    "int-id-as-string": "answers integer ids as strings",
    "string-id-mangled": "changes string ids in responses",
    "answer-notifications": "answers notifications with an error (id null)",
    "unknown-method-code": "answers unknown methods with -32603",
    "invalid-params-code": "answers invalid params with -32603",
    "wedge-after-error": "stops answering after it sent an error",
    "die-on-garbage": "exits on a line that is not JSON",
    "parse-error-code": "answers invalid JSON with -32603",
    "multiline-error": "error messages span lines",
    "version-string": 'answers protocolVersion "1" (a string)',
    "echo-version": "echoes any requested protocolVersion",
    "require-client-caps": "rejects initialize without clientCapabilities",
    "no-agent-info": "sends no agentInfo",
    "terminal-auth": "offers a terminal auth method to any client",
    "auth-required-no-methods": "session/new answers -32000 with no auth methods",
    "same-session-id": "returns the same session id every time",
    "unknown-session-ok": "answers prompts for unknown sessions",
    "bad-stop-reason": 'ends turns with stopReason "done"',
    "wrong-session-id": "sends turn updates with another session's id",
    "reject-text": "rejects text prompts",
    "reject-resource-link": "rejects resource_link blocks",
    "thought-not-message": "sends the reply as agent_thought_chunk",
    "reject-image": "advertises image but rejects it",
    "reject-embedded": "advertises embeddedContext but rejects it",
    "reject-audio": "advertises audio but rejects it",
    "reject-meta": "rejects requests carrying _meta",
    "ext-not-answered": "never answers _ extension requests",
    "ext-unknown-result": "answers unknown _ methods with a result",
    "cancel-end-turn": "ends a cancelled turn with end_turn",
    "updates-after-cancel": "sends an update after the cancelled turn's response",
    "wedge-after-cancel": "a cancelled session refuses later prompts",
    "slow-cancel": "takes 3 s to answer a cancel",
    "cancel-waits-for-tool": "a cancel waits for the running tool to finish",
    "perm-dup-options": "permission options share an optionId",
    "perm-allow-ignored": "does not run an allowed tool",
    "perm-reject-runs": "runs a rejected tool",
    "perm-cancel-runs": "runs the tool on a cancelled outcome and ends with end_turn",
    "perm-unrenderable": "asks permission for a tool call it never described (no title, no kind)",
    "bad-current-mode": "currentModeId is not an available mode",
    "set-mode-fails": "session/set_mode always fails",
    "set-mode-unknown-ok": "session/set_mode accepts unknown modes",
    "bad-config-current": "a config option's currentValue is not one of its values",
    "config-partial": "set_config_option returns only the changed option",
    "boolean-config": "sends a boolean config option to any client",
    "load-replay-after": "replays a loaded session after the response",
    "load-no-user": "does not replay user messages",
    "load-unknown-ok": "loads unknown sessions as empty",
    "resume-replays": "replays history on session/resume",
    "close-keeps-session": "session/close does not free the session",
    "close-no-cancel": "session/close does not cancel the running turn",
    "list-missing": "session/list lists nothing",
    "delete-keeps": "session/delete keeps the session",
    "fs-without-cap": "calls fs/write_text_file without the client capability",
    "terminal-without-cap": "calls terminal/create without the client capability",
    "elicit-without-cap": "calls elicitation/create without the client capability",
    "late-updates": "sends an update after a turn's response",
    "update-before-new": "sends available_commands_update before the session/new response",
    "schema-violation": "sends a text content block without text",
    "custom-root-key": "adds a custom key at the root of the initialize result",
    "cancel-misses-early": "a cancel only reaches a turn that has already started",
    "refuse-while-busy": "refuses a prompt while a turn runs (-32600) instead of queueing it",
    "queue-unordered": "runs queued prompts newest first",
    "mode-not-saved": "a loaded or resumed session is back in the default mode",
    "write-with-read-only": "calls fs/write_text_file when only fs.readTextFile is advertised",
    "edit-on-disk": "writes edits to the disk although the client offers fs/write_text_file",
    "read-disk": "reads the disk although the client offers fs/read_text_file",
    "no-release": "never releases the terminals it creates",
    "terminal-not-embedded": "does not embed its client terminal in the tool call",
    "cancel-no-kill": "a cancel leaves the client terminal running and unreleased",
}

#: Faults of the v2 connection (the frames trio-acp's v2 gateway writes, broken on their way
#: out, `V2Faults`); the v1 faults above reach a v2 client through the gateway too.
V2_FAULTS = {
    "v2-init-error": "answers a v2 initialize with an error",
    "v2-version-3": "answers protocolVersion 3 to a request for 2",
    "v2-echo-version": "answers a v2 initialize with 65535",
    "v2-no-downgrade": "answers a request for version 1 with 3",
    "v2-no-info": "sends no info in the v2 initialize result",
    "v2-boolean-caps": "spells a v2 capability as true",
    "v2-init-invalid": "an auth method without methodId in the v2 initialize result",
    "v2-empty-session-id": "answers a v2 session/new with an empty sessionId",
    "v2-no-message-id": "answers a v2 prompt without a messageId",
    "v2-same-message-id": "answers every v2 prompt with the same messageId",
    "v2-no-user-message": "never reports the inserted user message",
    "v2-no-running": "never reports running",
    "v2-no-idle": "never reports the idle that ends a turn",
    "v2-chunk-no-message-id": "message chunks without a messageId",
    "v2-perm-no-title": "asks permission with an empty title",
    "v2-no-requires-action": "never reports requires_action",
    "v2-tool-no-id": "tool call updates with an empty toolCallId",
    "v2-list-null": "session/list answers sessions: null",
    "v2-late-replay": "sends an update of a resumed session after the resume's answer",
    "v2-new-replay-id": "replays a user message under a new messageId",
    "v2-v1-update": "sends v1's current_mode_update and tool_call to a v2 client",
    "v2-fs-call": "calls fs/read_text_file on a v2 client",
    "v2-cancel-error": "answers tool_call/cancel with an error",
    "v2-cancel-unknown-ok": "accepts tool_call/cancel and terminal/cancel of unknown items",
    "v2-terminal-relative-cwd": "announces a terminal with a relative cwd",
    "v2-terminal-bad-base64": "sends terminal output that is not base64",
}
FAULTS.update(V2_FAULTS)

FAULT: str | None = None

#: The JSON-RPC id of the request a handler task serves.
REQUEST_ID: contextvars.ContextVar[Any] = contextvars.ContextVar("request_id", default=None)
#: The session a prompt was addressed to when it was read: a session/close read right behind
#: the prompt may run before the prompt's handler task and drop the session, and the prompt
#: must then end "cancelled", not fail as addressed to an unknown session.
READ_SESSION: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "read_session", default=None
)

_TAG_RE = re.compile(r"\[([A-Za-z_][A-Za-z0-9_.-]*):([^\]\n]*)\]")
MODES = [
    {"id": "auto", "name": "Auto", "description": "Runs tools without asking"},
    {"id": "ask", "name": "Ask", "description": "Asks permission before running a tool"},
]
STORE = Path(os.environ.get("OPENHANDS_PERSISTENCE_DIR") or tempfile.gettempdir()) / "faulty-agent"


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message: str) -> RpcError:
    return RpcError(-32603 if FAULT == "invalid-params-code" else -32602, message)


class Session:
    def __init__(self, sid: str, cwd: str) -> None:
        self.id = sid
        self.cwd = cwd
        self.mode = "auto"
        self.model = "small"
        self.history: list[tuple[str, ...]] = []
        self.scope: trio.CancelScope | None = None
        self.busy = False
        # Prompts in the order they were read; one turn at a time. A cancel marks every
        # prompt read before it (tickets are registered by the reader, in wire order).
        self.tickets: list[dict[str, Any]] = []
        self.running: dict[str, Any] | None = None
        self.changed = trio.Event()

    def receive(self, key: Any) -> dict[str, Any]:
        # refuse-while-busy: judged when the prompt is read, as an agent without a queue
        # does (a turn still winding down after a cancel counts as running).
        refused = FAULT == "refuse-while-busy" and (self.running is not None or bool(self.tickets))
        ticket = {"key": key, "cancelled": False, "refused": refused}
        self.tickets.append(ticket)
        return ticket

    def take(self, key: Any) -> dict[str, Any]:
        return next((t for t in self.tickets if t["key"] == key), None) or self.receive(key)

    def cancel_all(self) -> None:
        if FAULT != "cancel-misses-early":
            for ticket in self.tickets:
                ticket["cancelled"] = True
        if self.scope is not None and FAULT != "perm-cancel-runs":
            self.scope.cancel()
        self.poke()

    def poke(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def wait_turn(self, ticket: dict[str, Any]) -> bool:
        while not ticket["cancelled"]:
            live = [t for t in self.tickets if not t["cancelled"]]
            head = (live[-1] if FAULT == "queue-unordered" else live[0]) if live else None
            if self.running is None and head is ticket:
                self.tickets.remove(ticket)
                self.running = ticket
                return True
            await self.changed.wait()
        return False

    def release(self, ticket: dict[str, Any]) -> None:
        if self.running is ticket:
            self.running = None
        elif ticket in self.tickets:
            self.tickets.remove(ticket)
        self.poke()

    def save(self) -> None:
        STORE.mkdir(parents=True, exist_ok=True)
        data = {
            "sessionId": self.id,
            "cwd": self.cwd,
            "history": self.history,
            "mode": "auto" if FAULT == "mode-not-saved" else self.mode,
        }
        (STORE / f"{self.id}.json").write_text(json.dumps(data), encoding="utf-8")

    @classmethod
    def load(cls, sid: str) -> Session | None:
        try:
            uuid.UUID(sid)
            data = json.loads((STORE / f"{sid}.json").read_text(encoding="utf-8"))
        except (ValueError, OSError):
            return None
        session = cls(sid, data["cwd"])
        session.history = [tuple(x) for x in data["history"]]  # type: ignore[misc]
        session.mode = data.get("mode", "auto")
        return session

    def modes(self) -> dict[str, Any]:
        current = "turbo" if FAULT == "bad-current-mode" else self.mode
        return {"currentModeId": current, "availableModes": MODES}

    def config_options(self) -> list[dict[str, Any]]:
        options = [
            {
                "id": "mode",
                "name": "Mode",
                "category": "mode",
                "type": "select",
                "currentValue": "none" if FAULT == "bad-config-current" else self.mode,
                "options": [{"value": m["id"], "name": m["name"]} for m in MODES],
            },
            {
                "id": "model",
                "name": "Model",
                "category": "model",
                "type": "select",
                "currentValue": self.model,
                "options": [
                    {"value": "small", "name": "Small"},
                    {"value": "large", "name": "Large"},
                ],
            },
        ]
        if FAULT == "boolean-config":
            options.append({"id": "fast", "name": "Fast", "type": "boolean", "currentValue": False})
        return options


class Agent:
    def __init__(self, nursery: trio.Nursery, out: trio.abc.SendStream) -> None:
        self.nursery = nursery
        self.out = out
        self.lock = trio.Lock()
        self.sessions: dict[str, Session] = {}
        self.pending: dict[int, tuple[trio.Event, list[Any]]] = {}
        self.next_id = 0
        self.wedged = False
        self.client_caps: dict[str, Any] = {}

    # --- wire -------------------------------------------------------------------------

    async def write(self, msg: dict[str, Any]) -> None:
        text = json.dumps(msg, ensure_ascii=False)
        data = (
            text.encode("latin-1", "replace") if FAULT == "latin1-stdout" else text.encode("utf-8")
        )
        async with self.lock:
            await self.out.send_all(data + b"\n")

    async def notify(self, method: str, params: Any) -> None:
        await self.write({"jsonrpc": "2.0", "method": method, "params": params})

    async def update(self, session: Session, update: dict[str, Any]) -> None:
        sid = "not-" + session.id if FAULT == "wrong-session-id" else session.id
        await self.notify("session/update", {"sessionId": sid, "update": update})

    async def say(
        self,
        session: Session,
        text: str,
        kind: str = "agent_message_chunk",
        message_id: str | None = None,
    ) -> None:
        if FAULT == "thought-not-message" and kind == "agent_message_chunk":
            kind = "agent_thought_chunk"
        update = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
        if message_id is not None:
            update["messageId"] = message_id
        await self.update(session, update)

    async def call(self, method: str, params: Any) -> dict[str, Any]:
        self.next_id += 1
        rid = self.next_id
        event, slot = trio.Event(), []
        self.pending[rid] = (event, slot)
        await self.write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        try:
            await event.wait()
        finally:
            self.pending.pop(rid, None)
        return slot[0]

    async def reply(self, rid: Any, *, result: Any = None, error: RpcError | None = None) -> None:
        if FAULT == "int-id-as-string" and isinstance(rid, int):
            rid = str(rid)
        if FAULT == "string-id-mangled" and isinstance(rid, str):
            rid = rid + "-x"
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        if error is not None:
            message = (
                error.message.replace(" ", "\n", 1) if FAULT == "multiline-error" else error.message
            )
            msg["error"] = {"code": error.code, "message": message}
            if FAULT == "wedge-after-error":
                self.wedged = True
        else:
            msg["result"] = result
        await self.write(msg)

    # --- dispatch ---------------------------------------------------------------------

    async def handle_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            msg = json.loads(line)
        except ValueError:
            if FAULT == "die-on-garbage":
                sys.exit(3)
            code = -32603 if FAULT == "parse-error-code" else -32700
            await self.write(
                {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": "Parse error"}}
            )
            return
        if not isinstance(msg, dict):
            await self.write(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32600, "message": "Invalid request"},
                }
            )
            return
        if "method" in msg and "id" in msg:
            session = None
            if msg["method"] == "session/prompt" and isinstance(msg.get("params"), dict):
                # Registered now, in wire order: a cancel (or close) read right behind it
                # finds it.
                session = self.sessions.get(msg["params"].get("sessionId"))
                if session is not None:
                    session.receive(json.dumps(msg["id"]))
            self.nursery.start_soon(self.handle_request, msg, session)
        elif "method" in msg:
            if FAULT == "answer-notifications":
                await self.write(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": -32600, "message": "Not a request"},
                    }
                )
            await self.handle_notification(msg["method"], msg.get("params") or {})
        elif msg.get("id") in self.pending:
            event, slot = self.pending[msg["id"]]
            slot.append(msg)
            event.set()

    async def handle_request(self, msg: dict[str, Any], session: Session | None = None) -> None:
        if self.wedged:
            return
        method, rid, params = msg["method"], msg["id"], msg.get("params")
        REQUEST_ID.set(json.dumps(rid))
        READ_SESSION.set(session)
        if params is None:
            params = {}
        if method.startswith("_") and FAULT == "ext-not-answered":
            return
        if method.startswith("_") and FAULT == "ext-unknown-result":
            await self.reply(rid, result={})
            return
        handler = getattr(self, "m_" + method.replace("/", "_"), None)
        if handler is None:
            code = -32603 if FAULT == "unknown-method-code" else -32601
            await self.reply(rid, error=RpcError(code, f"Method not found: {method}"))
            return
        if not isinstance(params, dict):
            await self.reply(rid, error=invalid("params must be an object"))
            return
        if FAULT == "reject-meta" and (
            "_meta" in params
            or any(isinstance(b, dict) and "_meta" in b for b in params.get("prompt") or [])
        ):
            await self.reply(rid, error=RpcError(-32602, "unexpected _meta"))
            return
        after = None
        try:
            out = await handler(params)
            if isinstance(out, tuple):
                out, after = out
        except RpcError as exc:
            await self.reply(rid, error=exc)
            return
        await self.reply(rid, result=out)
        if after is not None:
            await after()

    async def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/cancel" and isinstance(params, dict):
            session = self.sessions.get(params.get("sessionId"))
            if session is not None:
                session.cancel_all()

    # --- initialize and sessions ------------------------------------------------------

    async def m_initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(params.get("protocolVersion"), int):
            raise invalid("protocolVersion must be an integer")
        if FAULT == "require-client-caps" and "clientCapabilities" not in params:
            raise invalid("clientCapabilities is required")
        self.client_caps = params.get("clientCapabilities") or {}
        version: Any = 1
        if FAULT == "echo-version":
            version = params["protocolVersion"]
        elif FAULT == "version-string":
            version = "1"
        result: dict[str, Any] = {
            "protocolVersion": version,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": True, "embeddedContext": True},
                "sessionCapabilities": {"close": {}, "list": {}, "resume": {}, "delete": {}},
                "_meta": {"faultyAgent": {"promptQueueing": True}},
            },
            "authMethods": [],
        }
        if FAULT != "no-agent-info":
            result["agentInfo"] = {"name": "faulty-agent", "version": "0.1.0"}
        if FAULT == "terminal-auth":
            result["authMethods"] = [
                {"id": "login", "name": "Log in", "type": "terminal", "args": ["--login"]}
            ]
        if FAULT == "custom-root-key":
            result["agentName"] = "faulty-agent"
        return result

    def _cwd(self, params: dict[str, Any], *, mcp_required: bool = True) -> str:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd):
            raise invalid("cwd must be an absolute path")
        if mcp_required and not isinstance(params.get("mcpServers"), list):
            raise invalid("mcpServers must be an array")
        return cwd

    def _session(self, params: dict[str, Any]) -> Session:
        session = self.sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
        if session is None:
            raise RpcError(-32002, f"unknown session: {params.get('sessionId')!r}")
        return session

    async def m_session_new(self, params: dict[str, Any]):
        if FAULT == "auth-required-no-methods":
            raise RpcError(-32000, "Authentication required")
        cwd = self._cwd(params)
        sid = (
            "00000000-0000-4000-8000-000000000001"
            if FAULT == "same-session-id"
            else str(uuid.uuid4())
        )
        session = Session(sid, cwd)
        self.sessions[sid] = session
        session.save()
        commands = {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "help", "description": "Show help"}],
        }
        if FAULT == "update-before-new":
            await self.update(session, commands)
            return {
                "sessionId": sid,
                "modes": session.modes(),
                "configOptions": session.config_options(),
            }

        async def after() -> None:
            await self.update(session, commands)

        return {
            "sessionId": sid,
            "modes": session.modes(),
            "configOptions": session.config_options(),
        }, after

    async def _replay(self, session: Session) -> None:
        for role, text, *mid in session.history:
            if role == "user":
                if FAULT != "load-no-user":
                    keep = mid and FAULT != "v2-new-replay-id"
                    await self.say(session, text, "user_message_chunk", mid[0] if keep else None)
            else:
                await self.say(session, text)

    async def m_session_load(self, params: dict[str, Any]):
        self._cwd(params)
        session = Session.load(str(params.get("sessionId")))
        if session is None:
            if FAULT != "load-unknown-ok":
                raise RpcError(-32002, f"unknown session: {params.get('sessionId')!r}")
            session = Session(str(params.get("sessionId")), str(params["cwd"]))
        self.sessions[session.id] = session
        if FAULT == "load-replay-after":

            async def after() -> None:
                await self._replay(session)

            return {}, after
        await self._replay(session)
        return {"modes": session.modes(), "configOptions": session.config_options()}

    async def m_session_resume(self, params: dict[str, Any]):
        self._cwd(params, mcp_required=False)
        session = Session.load(str(params.get("sessionId")))
        if session is None:
            raise RpcError(-32002, f"unknown session: {params.get('sessionId')!r}")
        self.sessions[session.id] = session
        if FAULT == "resume-replays":
            await self._replay(session)
        return {"modes": session.modes(), "configOptions": session.config_options()}

    async def m_session_close(self, params: dict[str, Any]):
        session = self._session(params)
        if FAULT != "close-no-cancel":
            session.cancel_all()
        if FAULT != "close-keeps-session":
            self.sessions.pop(session.id, None)
        return {}

    async def m_session_list(self, params: dict[str, Any]):
        sessions = []
        if FAULT != "list-missing" and STORE.is_dir():
            for path in sorted(STORE.glob("*.json")):
                data = json.loads(path.read_text(encoding="utf-8"))
                if params.get("cwd") in (None, data["cwd"]):
                    sessions.append({"sessionId": data["sessionId"], "cwd": data["cwd"]})
        return {"sessions": sessions}

    async def m_session_delete(self, params: dict[str, Any]):
        sid = str(params.get("sessionId"))
        if FAULT != "delete-keeps":
            self.sessions.pop(sid, None)
            try:
                uuid.UUID(sid)
                (STORE / f"{sid}.json").unlink(missing_ok=True)
            except ValueError:
                pass
        return {}

    async def m_session_set_mode(self, params: dict[str, Any]):
        session = self._session(params)
        mode = params.get("modeId")
        if FAULT == "set-mode-fails":
            raise RpcError(-32603, "cannot change modes")
        if mode not in [m["id"] for m in MODES] and FAULT != "set-mode-unknown-ok":
            raise invalid(f"unknown mode {mode!r}")
        session.mode = str(mode)
        session.save()
        return {}

    async def m_session_set_config_option(self, params: dict[str, Any]):
        session = self._session(params)
        config_id, value = params.get("configId"), params.get("value")
        if config_id == "mode" and value in [m["id"] for m in MODES]:
            session.mode = value
            session.save()
        elif config_id == "model" and value in ("small", "large"):
            session.model = value
        else:
            raise invalid(f"bad config option {config_id}={value!r}")
        options = session.config_options()
        if FAULT == "config-partial":
            options = [o for o in options if o["id"] == config_id]
        return {"configOptions": options}

    # --- prompt turns -----------------------------------------------------------------

    async def m_session_prompt(self, params: dict[str, Any]):
        session = READ_SESSION.get() or self.sessions.get(params.get("sessionId"))  # type: ignore[arg-type]
        if session is None:
            if FAULT == "unknown-session-ok":
                return {"stopReason": "end_turn"}
            raise RpcError(-32002, f"unknown session: {params.get('sessionId')!r}")
        # The reader queued this prompt; whatever happens now, it leaves the queue.
        ticket = session.take(REQUEST_ID.get())
        try:
            blocks = params.get("prompt")
            if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
                raise invalid("prompt must be an array of content blocks")
            rejected = {
                "reject-text": "text",
                "reject-resource-link": "resource_link",
                "reject-image": "image",
                "reject-embedded": "resource",
                "reject-audio": "audio",
            }.get(FAULT or "")
            for block in blocks:
                if block.get("type") not in ("text", "resource_link", "image", "audio", "resource"):
                    raise invalid(f"unknown content type {block.get('type')!r}")
                if block.get("type") == rejected:
                    raise invalid(f"{rejected} content is not supported")
            if session.busy or ticket.get("refused"):
                raise RpcError(-32600, "a turn is already running")
            if not await session.wait_turn(ticket):
                return {"stopReason": "cancelled"}
            meta = params.get("_meta")
            ours = meta.get("trioAcp") if isinstance(meta, dict) else None
            mid = ours.get("messageId") if isinstance(ours, dict) else None
            return await self._turn(session, blocks, mid if isinstance(mid, str) else None)
        finally:
            session.release(ticket)

    async def _turn(self, session: Session, blocks: list[dict[str, Any]], mid: str | None = None):
        text = " ".join(
            b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)
        )
        # The message id the v2 gateway answered the prompt with, replayed with it.
        session.history.append(("user", text, mid) if mid else ("user", text))
        reason = "end_turn"
        with trio.CancelScope() as scope:
            session.scope = scope
            reason = await self._run(session, text)
        session.scope = None
        if scope.cancelled_caught:
            reason = "cancelled"
            if FAULT == "slow-cancel":
                await trio.sleep(3)
            if FAULT == "cancel-end-turn":
                reason = "end_turn"
        if FAULT == "wedge-after-cancel" and reason == "cancelled":
            session.busy = True
        session.save()
        if FAULT == "bad-stop-reason":
            reason = "done"

        async def after() -> None:
            if (FAULT == "updates-after-cancel" and reason == "cancelled") or (
                FAULT == "late-updates" and reason != "cancelled"
            ):
                await self.say(session, "one more thing")

        return {"stopReason": reason}, after

    async def _run(self, session: Session, text: str) -> str:
        tags = {k: v.strip() for k, v in _TAG_RE.findall(text)}
        scenario = tags.get("scenario", "echo")
        if FAULT == "elicit-without-cap":
            self.nursery.start_soon(
                self.call,
                "elicitation/create",
                {
                    "sessionId": session.id,
                    "mode": "form",
                    "message": "Your name?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                    },
                },
            )
        if FAULT == "schema-violation":
            await self.update(
                session, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text"}}
            )
        if scenario == "conformance-slow":
            n, delay = int(tags.get("chunks", 200)), float(tags.get("delay_ms", 50)) / 1000
            for i in range(1, n + 1):
                await self.say(session, f"w{i:04d} ")
                await trio.sleep(delay)
            return "end_turn"
        if scenario in ("terminal", "sleep"):
            command = (
                tags.get("command", "echo hello")
                if scenario == "terminal"
                else f"sleep {tags.get('seconds', 30)}"
            )
            return await self._tool(session, "execute", command)
        if scenario == "edit":
            return await self._tool(session, "edit", tags.get("path", ""))
        if scenario == "review":
            return await self._review(session, tags)
        reply = f"Echo: {text}"
        session.history.append(("agent", reply))
        half = len(reply) // 2
        await self.say(session, reply[:half])
        await self.say(session, reply[half:])
        return "end_turn"

    async def _tool(self, session: Session, kind: str, what: str) -> str:
        call_id = f"call-{uuid.uuid4().hex[:8]}"
        if not (FAULT == "perm-unrenderable" and session.mode == "ask"):
            await self.update(
                session,
                {
                    "sessionUpdate": "tool_call",
                    "toolCallId": call_id,
                    "title": f"{kind}: {what}",
                    "kind": kind,
                    "status": "pending",
                },
            )
        if session.mode == "ask":
            options = [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {
                    "optionId": "allow" if FAULT == "perm-dup-options" else "always",
                    "name": "Always allow",
                    "kind": "allow_always",
                },
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ]
            params = {
                "sessionId": session.id,
                "toolCall": {"toolCallId": call_id},
                "options": options,
            }
            answer = await self.call("session/request_permission", params)
            outcome = (answer.get("result") or {}).get("outcome") or {}
            if outcome.get("outcome") == "cancelled":
                if FAULT == "perm-cancel-runs":
                    await self._execute(session, call_id, kind, what)
                    return "end_turn"
                return "cancelled"
            allowed = outcome.get("optionId") in ("allow", "always")
            if FAULT == "perm-allow-ignored":
                allowed = False
            if FAULT == "perm-reject-runs":
                allowed = True
            if not allowed:
                await self.update(
                    session,
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call_id,
                        "status": "failed",
                    },
                )
                await self.say(session, "The command was rejected.")
                return "end_turn"
        await self._execute(session, call_id, kind, what)
        await self.say(session, "Done.")
        return "end_turn"

    def _offers(self, *path: str) -> bool:
        node: Any = self.client_caps
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return node is True

    async def _review(self, session: Session, tags: dict[str, str]) -> str:
        """View a file (the editor's buffer when offered), then replace [old] by [new]."""
        path = tags.get("path", "")
        call_id = f"call-{uuid.uuid4().hex[:8]}"
        if self._offers("fs", "readTextFile") and FAULT != "read-disk":
            answer = await self.call("fs/read_text_file", {"sessionId": session.id, "path": path})
            text = (answer.get("result") or {}).get("content", "")
        else:
            text = Path(path).read_text(encoding="utf-8")
        view = {"type": "content", "content": {"type": "text", "text": text}}
        await self.update(
            session,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": f"Read {path}",
                "kind": "read",
                "status": "completed",
                "content": [view],
            },
        )
        new_text = text.replace(tags.get("old", ""), tags.get("new", ""), 1)
        await self._write(session, path, new_text)
        await self.say(session, "Edited.")
        return "end_turn"

    async def _write(self, session: Session, path: str, text: str) -> None:
        through_editor = self._offers("fs", "writeTextFile") or (
            FAULT == "write-with-read-only" and self._offers("fs", "readTextFile")
        )
        if through_editor and FAULT != "edit-on-disk":
            params = {"sessionId": session.id, "path": path, "content": text}
            await self.call("fs/write_text_file", params)
        else:
            Path(path).write_text(text, encoding="utf-8")

    async def _in_terminal(self, session: Session, call_id: str, command: str) -> None:
        """Run `command` in a client terminal: create, embed, wait, output, release."""
        # Shielded: a cancel while the client creates the terminal must still find it to
        # kill and release (below), or a slow client leaves it behind (ACP-EDITOR-006).
        with trio.CancelScope(shield=True):
            created = await self.call(
                "terminal/create",
                {"sessionId": session.id, "command": "bash", "args": ["-c", command]},
            )
        ids = {"sessionId": session.id, "terminalId": (created.get("result") or {})["terminalId"]}
        try:
            if FAULT != "terminal-not-embedded":
                content = [{"type": "terminal", "terminalId": ids["terminalId"]}]
                update = {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": call_id,
                    "content": content,
                }
                await self.update(session, update)
            await self.call("terminal/wait_for_exit", ids)
            await self.call("terminal/output", ids)
        except BaseException:
            if FAULT != "cancel-no-kill":
                with trio.CancelScope(shield=True):
                    await self.call("terminal/kill", ids)
                    await self.call("terminal/release", ids)
            raise
        if FAULT != "no-release":
            await self.call("terminal/release", ids)

    async def _execute(self, session: Session, call_id: str, kind: str, what: str) -> None:
        await self.update(
            session,
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"},
        )
        if kind == "execute" and self._offers("terminal"):
            with trio.CancelScope(shield=FAULT == "cancel-waits-for-tool"):
                await self._in_terminal(session, call_id, what)
        elif kind == "execute":
            if FAULT == "terminal-without-cap":
                await self.call("terminal/create", {"sessionId": session.id, "command": what})
            # Zed's terminal `_meta`, when asked for (the v2 gateway asks: its terminals).
            meta = self.client_caps.get("_meta") if isinstance(self.client_caps, dict) else None
            live = isinstance(meta, dict) and meta.get("terminal_output") is True
            if live:
                info = {"terminal_id": call_id, "cwd": session.cwd}
                await self.update(
                    session,
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call_id,
                        "content": [{"type": "terminal", "terminalId": call_id}],
                        "_meta": {"terminal_info": info},
                    },
                )
            if what.startswith("touch "):
                Path(what[6:].strip()).touch()
            elif what.startswith("sleep "):
                with trio.CancelScope(shield=FAULT == "cancel-waits-for-tool"):
                    await trio.sleep(float(what[6:]))
            if live:
                for end in (
                    {"terminal_output": {"terminal_id": call_id, "data": f"ran {what}\n"}},
                    {"terminal_exit": {"terminal_id": call_id, "exit_code": 0, "signal": None}},
                ):
                    await self.update(
                        session,
                        {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "_meta": end},
                    )
        elif kind == "edit" and what:
            if FAULT == "fs-without-cap":
                await self.call(
                    "fs/write_text_file",
                    {"sessionId": session.id, "path": what, "content": "hello world\n"},
                )
            await self._write(session, what, "hello world\n")
        await self.update(
            session,
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed"},
        )


class V2Faults(trio.abc.Stream):
    """The client's stream, with the frames written to it broken as the v2 fault says."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.resumes: dict[str, Any] = {}  # request id -> session id
        self.requested: Any = None  # the protocolVersion of the last initialize
        self.cancels: set[str] = set()  # ids of tool_call/cancel and terminal/cancel

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        data = await self.inner.receive_some(max_bytes)
        for line in bytes(data).splitlines():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("method") == "initialize":
                asked = msg.get("params") if isinstance(msg.get("params"), dict) else {}
                self.requested = asked.get("protocolVersion")
            if isinstance(msg, dict) and msg.get("method") in (
                "tool_call/cancel",
                "terminal/cancel",
            ):
                self.cancels.add(json.dumps(msg.get("id")))
            if isinstance(msg, dict) and msg.get("method") == "session/resume":
                resumed = msg.get("params") if isinstance(msg.get("params"), dict) else {}
                self.resumes[json.dumps(msg.get("id"))] = resumed.get("sessionId")
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        out = []
        for line in bytes(data).splitlines():
            try:
                msg = json.loads(line)
            except ValueError:
                out.append(line)
                continue
            out += [json.dumps(m).encode() for m in self.broken(msg)]
        await self.inner.send_all(b"".join(x + b"\n" for x in out))

    def broken(self, msg: dict[str, Any]) -> list[dict[str, Any]]:
        result = msg.get("result") if isinstance(msg.get("result"), dict) else None
        params = msg.get("params") if isinstance(msg.get("params"), dict) else {}
        update = params.get("update") if isinstance(params.get("update"), dict) else {}
        kind, state = update.get("sessionUpdate"), update.get("state")
        if result is not None and "protocolVersion" in result:
            if FAULT == "echo-version":  # whichever protocol answered it
                result["protocolVersion"] = self.requested
            elif result["protocolVersion"] == 1:
                if FAULT == "v2-no-downgrade":
                    result["protocolVersion"] = 3
            elif FAULT == "v2-init-error":
                return [
                    {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32603, "message": "no"}}
                ]
            elif FAULT == "v2-version-3":
                result["protocolVersion"] = 3
            elif FAULT == "v2-echo-version":
                result["protocolVersion"] = 65535
            elif FAULT == "v2-no-info":
                result.pop("info", None)
            elif FAULT == "v2-boolean-caps":
                result["capabilities"]["session"]["prompt"]["image"] = True
            elif FAULT == "v2-init-invalid":
                result["authMethods"] = [{"type": "agent", "name": "No id"}]
        if json.dumps(msg.get("id")) in self.cancels and "method" not in msg:
            if FAULT == "v2-cancel-error" and result is not None:
                return [
                    {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32603, "message": "no"}}
                ]
            if FAULT == "v2-cancel-unknown-ok" and "error" in msg:
                return [{"jsonrpc": "2.0", "id": msg["id"], "result": {}}]
        if result is not None and "sessionId" in result and FAULT == "v2-empty-session-id":
            result["sessionId"] = ""
        if result is not None and "messageId" in result:
            if FAULT == "v2-no-message-id":
                del result["messageId"]
            elif FAULT == "v2-same-message-id":
                result["messageId"] = "the-same"
        if result is not None and "sessions" in result and FAULT == "v2-list-null":
            result["sessions"] = None
        if (
            result is not None
            and FAULT == "v2-late-replay"
            and json.dumps(msg.get("id")) in self.resumes
        ):
            sid = self.resumes[json.dumps(msg.get("id"))]
            late = {"sessionUpdate": "session_info_update", "title": "late"}
            return [
                msg,
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {"sessionId": sid, "update": late},
                },
            ]
        if msg.get("method") == "session/request_permission" and FAULT == "v2-perm-no-title":
            params["title"] = ""
        if (FAULT, kind) == ("v2-no-user-message", "user_message"):
            return []
        if (FAULT, state) in (
            ("v2-no-running", "running"),
            ("v2-no-requires-action", "requires_action"),
        ):
            return []
        if (FAULT, state) == ("v2-no-idle", "idle"):
            return []
        if FAULT == "v2-chunk-no-message-id" and kind == "agent_message_chunk":
            update.pop("messageId", None)
        if kind == "tool_call_update" and FAULT in (
            "v2-terminal-relative-cwd",
            "v2-terminal-bad-base64",
        ):
            terminal = (
                {"sessionUpdate": "terminal_update", "terminalId": "t-fault", "cwd": "relative"}
                if FAULT == "v2-terminal-relative-cwd"
                else {
                    "sessionUpdate": "terminal_output_chunk",
                    "terminalId": "t-fault",
                    "data": "%%",
                }
            )
            return [
                msg,
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {**params, "update": terminal},
                },
            ]
        if kind == "tool_call_update":
            if FAULT == "v2-tool-no-id":
                update["toolCallId"] = ""
            elif FAULT == "v2-v1-update":
                update["sessionUpdate"] = "tool_call"
        if (FAULT, state) == ("v2-v1-update", "running"):
            mode = {"sessionUpdate": "current_mode_update", "currentModeId": "ask"}
            v1 = {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {**params, "update": mode},
            }
            return [msg, v1]
        if (FAULT, state) == ("v2-fs-call", "running"):
            call = {"sessionId": params.get("sessionId"), "path": "/etc/hostname"}
            return [
                msg,
                {"jsonrpc": "2.0", "id": "v2-fs", "method": "fs/read_text_file", "params": call},
            ]
        return [msg]

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def serve() -> None:
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    if FAULT == "junk-stdout":
        await stdout.send_all(b"faulty-agent 0.1.0 starting\n")
    client: trio.abc.Stream = trio.StapledStream(stdout, stdin)
    if FAULT in V2_FAULTS or FAULT == "echo-version":
        client = V2Faults(client)
    # A client that asks for ACP v2 gets it through trio-acp's gateway (docs/v2.md), in
    # front of this v1 agent.
    async with negotiated_stream(client) as stream, trio.open_nursery() as nursery:
        agent = Agent(nursery, stream)
        buffer = bytearray()
        while True:
            data = await stream.receive_some(1 << 16)
            if not data:
                break
            buffer += data
            while (nl := buffer.find(b"\n")) >= 0:
                line = bytes(buffer[:nl])
                del buffer[: nl + 1]
                if FAULT == "small-frames" and len(line) > 65536:
                    sys.exit(4)  # what a 64 KiB readline limit does to a connection
                await agent.handle_line(line)
            if FAULT == "small-frames" and len(buffer) > 65536:
                sys.exit(4)
        if FAULT == "no-exit-on-eof":
            await trio.sleep_forever()
        nursery.cancel_scope.cancel()


def main() -> None:
    global FAULT
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault", choices=sorted(FAULTS))
    FAULT = parser.parse_args().fault
    trio.run(serve)


if __name__ == "__main__":
    main()
