"""Pure: a v2 client on the v1 agent, frame by frame (sans-io).

`Gateway` sits between a client that negotiated ACP v2 and trio-acp's v1 agent, which is
left exactly as it is.  Each frame from either side goes in; what to send each side comes
out (`Out`), in order.  It holds what the translation needs to remember:

- the method of every request in flight, so a result is reshaped for the method that
  asked for it;
- per session, the v2 turn: v2 answers `session/prompt` as soon as the prompt is accepted
  (with the user message's id) and reports the work with `state_update`s.  The gateway
  answers the prompt itself, reports the user message and `running`, and hands the agent a
  v1 prompt under an id of its own; the v1 answer (its stop reason, or an error) becomes
  the idle `state_update`.  A permission question in between is framed by
  `requires_action` and `running`;
- prompts sent while a turn runs: accepted at once and queued here, each inserted (its
  `user_message`, then `running`) when the turn before it ends, so the agent still sees
  one v1 prompt at a time.  `session/cancel` drops the queued ones (v2: a cancel covers
  "prompts not yet inserted") and cancels the running turn the v1 way.

No I/O and no Trio: `stream.py` is the driver.  docs/v2.md is the user-facing account.
"""

from __future__ import annotations

import itertools
import json
from collections import deque

import attrs

from . import frames
from .frames import Json, obj

__all__ = ["Gateway", "Out"]

#: JSON-RPC error codes the gateway answers with itself.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

#: v1 message chunks and the v2 whole-message update of the same message.
_WHOLE_MESSAGE = {
    "user_message_chunk": "user_message",
    "agent_message_chunk": "agent_message",
    "agent_thought_chunk": "agent_thought",
}

#: v1 updates v2 takes as they are.
_SAME_UPDATES = frozenset({"session_info_update", "usage_update"})

#: Agent-to-client notifications v2 defines (besides `session/update`).
_V2_AGENT_NOTIFICATIONS = frozenset({"$/cancel_request"})


@attrs.define
class Out:
    """What one frame in produced: frames for the client, frames for the agent."""

    to_client: list[Json] = attrs.field(factory=list)
    to_agent: list[Json] = attrs.field(factory=list)


@attrs.define
class _Prompt:
    internal_id: str
    session_id: str
    message_id: str
    prompt: list[object]
    meta: object = None


@attrs.define
class _Session:
    id: str
    running: _Prompt | None = None
    queue: deque[_Prompt] = attrs.field(factory=deque)
    #: The agent's permission requests this session's client has not answered yet.
    asking: set[str] = attrs.field(factory=set)
    #: Message ids already announced with a whole-message update.
    messages: set[str] = attrs.field(factory=set)
    #: The commands went out in the session/new or resume answer: the agent's own
    #: announcement of the same list, right after it, is not sent again.
    commands_answered: bool = False


@attrs.define
class _Call:
    method: str
    session_id: str | None = None


def _key(request_id: object) -> str:
    # JSON-RPC ids are strings or numbers: 1 and "1" are different requests.
    return json.dumps(request_id, sort_keys=True)


def _result(request_id: object, result: Json) -> Json:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: object, code: int, message: str) -> Json:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _update(session_id: str, update: Json) -> Json:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session_id, "update": update},
    }


def _state(session_id: str, state: str, **fields: object) -> Json:
    return _update(session_id, {"sessionUpdate": "state_update", "state": state, **fields})


class Gateway:
    """One v2 connection's translation state.  Feed it every frame, in wire order.

    ``available_commands``: the agent's slash commands in v2's spelling, when they are the
    same for every session.  v2 answers session/new and resume with them; the v1 agent
    announces them in an update after its answer, which a v2 client would see as a late
    update of the session it just resumed.
    """

    def __init__(self, *, available_commands: list[object] | None = None) -> None:
        self._commands = available_commands
        self._ids = itertools.count(1)
        self._client_calls: dict[str, _Call] = {}
        self._agent_calls: dict[str, _Call] = {}
        self._prompts: dict[str, _Prompt] = {}
        self._sessions: dict[str, _Session] = {}

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    # -- from the client -----------------------------------------------------------------

    def from_client(self, frame: Json) -> Out:
        out = Out()
        method = frame.get("method")
        if isinstance(method, str):
            params = obj(frame.get("params")) or {}
            if "id" in frame:
                self._client_request(out, frame["id"], method, params, frame)
            else:
                self._client_notification(out, method, params, frame)
        elif "id" in frame:
            self._client_answer(out, frame)
        else:
            out.to_agent.append(frame)  # not JSON-RPC: the agent answers it
        return out

    def _client_request(
        self, out: Out, rid: object, method: str, params: Json, frame: Json
    ) -> None:
        def forward(v1_method: str, v1_params: Json, session_id: str | None = None) -> None:
            self._client_calls[_key(rid)] = _Call(method, session_id)
            out.to_agent.append(
                {"jsonrpc": "2.0", "id": rid, "method": v1_method, "params": v1_params}
            )

        if method == "initialize":
            forward("initialize", frames.initialize_request(params))
        elif method == "auth/login":
            forward("authenticate", params)
        elif method == "auth/logout":
            forward("logout", params)
        elif method == "session/new":
            forward("session/new", frames.session_request(params))
        elif method == "session/resume":
            sid = params.get("sessionId")
            v1 = frames.session_request(params)
            replay = obj(params.get("replayFrom"))
            # v2 resumes with or without the history; v1 has a method for each.
            if replay is not None and replay.get("type") == "start":
                forward("session/load", v1, sid if isinstance(sid, str) else None)
            else:
                forward("session/resume", v1, sid if isinstance(sid, str) else None)
        elif method == "session/set_config_option":
            forward(method, frames.set_config_option_request(params))
        elif method in ("session/close", "session/delete"):
            sid = params.get("sessionId")
            session = self._sessions.get(sid) if isinstance(sid, str) else None
            if session is not None:
                session.queue.clear()  # closing cancels the work, queued prompts included
            forward(method, params, sid if isinstance(sid, str) else None)
        elif method == "session/prompt":
            self._prompt(out, rid, params, frame)
        elif method in ("tool_call/cancel", "terminal/cancel"):
            # No tool call or terminal of a v2 session advertises `capabilities.cancel`,
            # and the draft answers -32602 to a cancel of one that does not.
            out.to_client.append(
                _error(rid, INVALID_PARAMS, f"{method}: this item cannot be cancelled")
            )
        elif method in frames.V1_ONLY_METHODS:
            out.to_client.append(_error(rid, METHOD_NOT_FOUND, f"{method} is not an ACP v2 method"))
        else:
            # session/list, extension methods, and whatever the agent should refuse itself.
            self._client_calls[_key(rid)] = _Call(method)
            out.to_agent.append(frame)

    def _client_notification(self, out: Out, method: str, params: Json, frame: Json) -> None:
        if method == "session/cancel":
            sid = params.get("sessionId")
            session = self._sessions.get(sid) if isinstance(sid, str) else None
            if session is not None:
                session.queue.clear()
        out.to_agent.append(frame)

    def _client_answer(self, out: Out, frame: Json) -> None:
        call = self._agent_calls.pop(_key(frame["id"]), None)
        if call is None or call.method != "session/request_permission":
            out.to_agent.append(frame)
            return
        result = obj(frame.get("result"))
        if result is not None:
            outcome = obj(result.get("outcome")) or {}
            if outcome.get("outcome") not in ("selected", "cancelled"):
                # A custom outcome the v1 agent cannot read: not approved (fail closed).
                frame = {**frame, "result": {**result, "outcome": {"outcome": "cancelled"}}}
        out.to_agent.append(frame)
        self._answered(out, call.session_id, _key(frame["id"]))

    def _answered(self, out: Out, session_id: str | None, key: str) -> None:
        session = self._sessions.get(session_id) if session_id is not None else None
        if session is None or key not in session.asking:
            return
        session.asking.discard(key)
        if not session.asking and session.running is not None:
            out.to_client.append(_state(session.id, "running"))

    # -- prompts -------------------------------------------------------------------------

    def _prompt(self, out: Out, rid: object, params: Json, frame: Json) -> None:
        sid = params.get("sessionId")
        blocks = params.get("prompt")
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is None or not isinstance(blocks, list):
            # Not a prompt this connection can accept (an unknown session, malformed
            # params): the agent refuses it, before anything is inserted, and its error
            # is the v2 answer too.
            self._client_calls[_key(rid)] = _Call("session/prompt")
            out.to_agent.append(frame)
            return
        prompt = _Prompt(
            internal_id=self._new_id("trio-acp-v2-prompt"),
            session_id=session.id,
            message_id=self._new_id("user-message"),
            prompt=blocks,
            meta=params.get("_meta"),
        )
        out.to_client.append(_result(rid, {"messageId": prompt.message_id}))
        if session.running is None:
            self._start(out, session, prompt)
        else:
            session.queue.append(prompt)

    def _start(self, out: Out, session: _Session, prompt: _Prompt) -> None:
        session.running = prompt
        self._prompts[prompt.internal_id] = prompt
        session.messages.add(prompt.message_id)
        out.to_client.append(
            _update(
                session.id,
                {
                    "sessionUpdate": "user_message",
                    "messageId": prompt.message_id,
                    "content": prompt.prompt,
                },
            )
        )
        out.to_client.append(_state(session.id, "running"))
        params: Json = {"sessionId": session.id, "prompt": prompt.prompt}
        if prompt.meta is not None:
            params["_meta"] = prompt.meta
        out.to_agent.append(
            {
                "jsonrpc": "2.0",
                "id": prompt.internal_id,
                "method": "session/prompt",
                "params": params,
            }
        )

    def _turn_ended(self, out: Out, prompt: _Prompt, frame: Json) -> None:
        session = self._sessions.get(prompt.session_id)
        result = obj(frame.get("result"))
        error = obj(frame.get("error"))
        idle: Json = {}
        if result is not None and isinstance(result.get("stopReason"), str):
            idle["stopReason"] = result["stopReason"]
        else:
            # After insertion a failure is a stop reason, not an error answer (the prompt
            # was answered long ago).
            idle["stopReason"] = "error"
            idle["error"] = error or {"code": -32603, "message": "the turn failed"}
        out.to_client.append(_state(prompt.session_id, "idle", **idle))
        if session is None:
            return
        session.running = None
        session.asking.clear()
        if session.queue:
            self._start(out, session, session.queue.popleft())

    # -- from the agent ------------------------------------------------------------------

    def from_agent(self, frame: Json) -> Out:
        out = Out()
        method = frame.get("method")
        if isinstance(method, str):
            params = obj(frame.get("params")) or {}
            if "id" in frame:
                self._agent_request(out, frame, method, params)
            elif method == "session/update":
                self._agent_update(out, params)
            elif method in _V2_AGENT_NOTIFICATIONS or method.startswith("_"):
                if method == "$/cancel_request":
                    self._agent_withdrew(out, params.get("requestId"))
                out.to_client.append(frame)
            # Anything else is a v1 notification v2 has no place for: dropped.
        elif "id" in frame:
            self._agent_answer(out, frame)
        return out

    def _agent_request(self, out: Out, frame: Json, method: str, params: Json) -> None:
        rid = frame["id"]
        if method == "session/request_permission":
            sid = params.get("sessionId")
            session = self._sessions.get(sid) if isinstance(sid, str) else None
            key = _key(rid)
            self._agent_calls[key] = _Call(method, session.id if session else None)
            if session is not None:
                if not session.asking and session.running is not None:
                    out.to_client.append(_state(session.id, "requires_action"))
                session.asking.add(key)
            out.to_client.append(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": method,
                    "params": frames.permission_request(params),
                }
            )
        elif method.startswith("_"):
            self._agent_calls[_key(rid)] = _Call(method)
            out.to_client.append(frame)
        else:
            # fs/*, terminal/*, elicitation: never advertised to the agent for a v2
            # client; should one come anyway, the agent hears no, at once.
            out.to_agent.append(
                _error(rid, METHOD_NOT_FOUND, f"{method} is not available to an ACP v2 client")
            )

    def _agent_withdrew(self, out: Out, request_id: object) -> None:
        key = _key(request_id)
        call = self._agent_calls.get(key)
        if call is not None and call.method == "session/request_permission":
            self._answered(out, call.session_id, key)

    def _agent_answer(self, out: Out, frame: Json) -> None:
        rid = frame["id"]
        if isinstance(rid, str) and rid in self._prompts:
            self._turn_ended(out, self._prompts.pop(rid), frame)
            return
        call = self._client_calls.pop(_key(rid), None)
        result = obj(frame.get("result"))
        if call is None or result is None:
            out.to_client.append(frame)  # errors are spelled alike in v1 and v2
            return
        out.to_client.append(_result(rid, self._reshape(call, result)))

    def _reshape(self, call: _Call, result: Json) -> Json:
        method = call.method
        if method == "initialize":
            return frames.initialize_response(result)
        if method in ("session/new", "session/resume"):
            sid = result.get("sessionId") if method == "session/new" else call.session_id
            v2 = frames.session_response(result, keep_session_id=method == "session/new")
            if isinstance(sid, str):
                session = self._sessions.setdefault(sid, _Session(sid))
                if self._commands is not None:
                    v2["availableCommands"] = self._commands
                    session.commands_answered = True
            return v2
        if method == "session/set_config_option":
            return {**result, "configOptions": frames.config_options(result.get("configOptions"))}
        if method in ("session/close", "session/delete"):
            closed = self._sessions.get(call.session_id or "")
            if closed is not None and closed.running is None:
                del self._sessions[closed.id]
            return result
        if method == "session/prompt":
            # A prompt the agent took although this connection did not know its session.
            return {"messageId": self._new_id("user-message")}
        return result

    def _agent_update(self, out: Out, params: Json) -> None:
        sid = params.get("sessionId")
        update = obj(params.get("update"))
        if not isinstance(sid, str) or update is None:
            return
        kind = update.get("sessionUpdate")
        session = self._sessions.get(sid)
        if session is None:
            # The agent replays a session before answering session/resume: known from here.
            session = self._sessions[sid] = _Session(sid)
        v2: Json | None
        if isinstance(kind, str) and kind in _WHOLE_MESSAGE:
            mid = update.get("messageId")
            if not isinstance(mid, str) or not mid:
                mid = self._new_id(kind.removesuffix("_chunk").replace("_", "-"))
            if mid not in session.messages:
                # Chunks append to a message the client already knows: announce it first.
                session.messages.add(mid)
                out.to_client.append(
                    _update(
                        sid,
                        {"sessionUpdate": _WHOLE_MESSAGE[kind], "messageId": mid, "content": []},
                    )
                )
            v2 = {**update, "messageId": mid}
        elif kind in ("tool_call", "tool_call_update"):
            v2 = frames.tool_call_update(update)
        elif kind == "plan":
            entries = update.get("entries")
            v2 = {
                "sessionUpdate": "plan_update",
                "plan": {
                    "type": "items",
                    "planId": "plan",
                    "entries": entries if isinstance(entries, list) else [],
                },
            }
        elif kind == "config_option_update":
            v2 = {**update, "configOptions": frames.config_options(update.get("configOptions"))}
        elif kind == "available_commands_update":
            commands = frames.available_commands(update.get("availableCommands"))
            answered, session.commands_answered = session.commands_answered, False
            v2 = {**update, "availableCommands": commands}
            if answered and commands == self._commands:
                v2 = None  # already in the session/new or resume answer
        elif kind in _SAME_UPDATES or (isinstance(kind, str) and kind.startswith("_")):
            v2 = update
        else:
            v2 = None  # current_mode_update (v2 has no modes) and v1-only extras
        if v2 is not None:
            out.to_client.append(_update(sid, v2))
