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
  "prompts not yet inserted") and cancels the running turn the v1 way;
- per session, its live tool calls and terminals, for v2's `tool_call/cancel` and
  `terminal/cancel` of one item while the turn goes on.  A tool call waiting for the
  user's permission is cancelled here: the agent's question is answered with its reject
  option (the turn goes on, the model is told it was refused) and withdrawn from the
  client (`$/cancel_request`).  A command the agent runs (a tool the agent says it can
  stop, `stoppable_tools`) is stopped by the agent (`frames.STOP_TOOL_CALL`, an
  extension method of the v1 agent).  A cancelled tool call's final status is
  `cancelled`; one that is unknown, already final or not cancellable is refused -32602.

No I/O and no Trio: `stream.py` is the driver.  docs/v2.md is the user-facing account.
"""

from __future__ import annotations

import itertools
import json
import uuid
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
class _Tool:
    """A tool call of the running turn, not final yet."""

    id: str
    name: str | None = None
    command: str | None = None
    #: `capabilities.cancel` was sent for it.
    advertised: bool = False
    #: The key of the agent's permission request about it, while it waits.
    asking: str | None = None
    #: A tool_call/cancel was accepted: its final status is `cancelled`.
    cancelled: bool = False
    #: The id of its live terminal, once announced.
    terminal: str | None = None
    #: A sub-agent's call (`_meta.trio_acp.parentToolCallId`, translate/subagents.py):
    #: its command runs in the sub-agent's run, which the agent cannot stop alone.
    nested: bool = False

    def stoppable(self, tools: frozenset[str]) -> bool:
        return self.name in tools and not self.nested


@attrs.define
class _Stop:
    """A v2 cancel the agent was asked to carry out (`frames.STOP_TOOL_CALL`)."""

    client_id: object
    session_id: str
    tool_call_id: str
    #: tool_call/cancel (the tool call ends `cancelled`), not terminal/cancel (v2: the
    #: terminal stops, the tool call reports what it reports).
    tool_call: bool


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
    #: Its tool calls not final yet, by id; its live terminals (terminal id -> tool call).
    tools: dict[str, _Tool] = attrs.field(factory=dict)
    terminals: dict[str, str] = attrs.field(factory=dict)


@attrs.define
class _Call:
    method: str
    session_id: str | None = None
    #: A permission request's own id, the tool call it asks about, and its reject option.
    request_id: object = None
    tool_call_id: str | None = None
    reject: str | None = None


def _key(request_id: object) -> str:
    # JSON-RPC ids are strings or numbers: 1 and "1" are different requests.
    return json.dumps(request_id, sort_keys=True)


def _message_id() -> str:
    # Unique beyond this connection: a session resumed on another one replays the ids of
    # its earlier prompts, which a counter would hand out again.
    return f"user-message-{uuid.uuid4()}"


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

    def __init__(
        self,
        *,
        available_commands: list[object] | None = None,
        stoppable_tools: frozenset[str] = frozenset(),
    ) -> None:
        self._commands = available_commands
        #: The tools whose calls the agent can stop one by one (`frames.STOP_TOOL_CALL`).
        self._stoppable = stoppable_tools
        self._ids = itertools.count(1)
        self._client_calls: dict[str, _Call] = {}
        self._agent_calls: dict[str, _Call] = {}
        self._prompts: dict[str, _Prompt] = {}
        self._sessions: dict[str, _Session] = {}
        self._stops: dict[str, _Stop] = {}
        #: Permission requests the gateway answered itself (a cancelled tool call): the
        #: client's own answer, which it still sends, is not the agent's to hear.
        self._withdrawn: set[str] = set()

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
        elif method == "tool_call/cancel":
            self._cancel_tool_call(out, rid, params)
        elif method == "terminal/cancel":
            self._cancel_terminal(out, rid, params)
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
        key = _key(frame["id"])
        if key in self._withdrawn:
            self._withdrawn.discard(key)
            return  # answered already, for a cancelled tool call
        call = self._agent_calls.pop(key, None)
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
        self._answered(out, call, key)

    def _answered(self, out: Out, call: _Call, key: str) -> None:
        session = self._sessions.get(call.session_id) if call.session_id is not None else None
        if session is None:
            return
        tool = session.tools.get(call.tool_call_id or "")
        if tool is not None and tool.asking == key:
            tool.asking = None
            if tool.advertised and not tool.cancelled and not tool.stoppable(self._stoppable):
                # Cancellable while it waited; the agent cannot stop it once it runs.
                tool.advertised = False
                out.to_client.append(
                    _update(
                        session.id,
                        {
                            "sessionUpdate": "tool_call_update",
                            "toolCallId": tool.id,
                            "capabilities": None,
                        },
                    )
                )
        if key not in session.asking:
            return
        session.asking.discard(key)
        if not session.asking and session.running is not None:
            out.to_client.append(_state(session.id, "running"))

    # -- cancelling one tool call or terminal ----------------------------------------------

    def _cancel_tool_call(self, out: Out, rid: object, params: Json) -> None:
        session, tool = self._tool(params.get("sessionId"), params.get("toolCallId"))
        if session is None or tool is None or not tool.advertised:
            out.to_client.append(
                _error(
                    rid,
                    INVALID_PARAMS,
                    "tool_call/cancel: no such tool call in progress, or it cannot be cancelled",
                )
            )
            return
        call = self._agent_calls.get(tool.asking) if tool.asking is not None else None
        if call is not None and call.reject is not None and tool.asking is not None:
            # Waiting for the user: the question is answered "reject" for them (the turn
            # goes on, the model is told the call was refused) and withdrawn.
            key = tool.asking
            del self._agent_calls[key]
            self._withdrawn.add(key)
            tool.cancelled = True
            out.to_agent.append(
                _result(
                    call.request_id,
                    {"outcome": {"outcome": "selected", "optionId": call.reject}},
                )
            )
            out.to_client.append(
                {
                    "jsonrpc": "2.0",
                    "method": "$/cancel_request",
                    "params": {"requestId": call.request_id},
                }
            )
            self._answered(out, call, key)
            out.to_client.append(_result(rid, {}))
            return
        self._stop(out, rid, session, tool, tool_call=True)

    def _cancel_terminal(self, out: Out, rid: object, params: Json) -> None:
        sid, tid = params.get("sessionId"), params.get("terminalId")
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        call_id = session.terminals.get(tid) if session and isinstance(tid, str) else None
        tool = session.tools.get(call_id) if session is not None and call_id else None
        if session is None or tool is None or not tool.stoppable(self._stoppable):
            out.to_client.append(
                _error(
                    rid,
                    INVALID_PARAMS,
                    "terminal/cancel: no such terminal running, or it cannot be cancelled",
                )
            )
            return
        self._stop(out, rid, session, tool, tool_call=False)

    def _stop(
        self, out: Out, rid: object, session: _Session, tool: _Tool, *, tool_call: bool
    ) -> None:
        if not tool.stoppable(self._stoppable):
            out.to_client.append(
                _error(rid, INVALID_PARAMS, "tool_call/cancel: this tool call cannot be cancelled")
            )
            return
        internal = self._new_id("trio-acp-v2-stop")
        self._stops[internal] = _Stop(rid, session.id, tool.id, tool_call)
        out.to_agent.append(
            {
                "jsonrpc": "2.0",
                "id": internal,
                "method": frames.STOP_TOOL_CALL,
                "params": {"sessionId": session.id, "toolCallId": tool.id},
            }
        )

    def _stopped(self, out: Out, stop: _Stop, frame: Json) -> None:
        result = obj(frame.get("result"))
        if result is None:
            error = obj(frame.get("error")) or {"code": -32603, "message": "the stop failed"}
            out.to_client.append({"jsonrpc": "2.0", "id": stop.client_id, "error": error})
            return
        session = self._sessions.get(stop.session_id)
        tool = session.tools.get(stop.tool_call_id) if session is not None else None
        if tool is not None and stop.tool_call and result.get("stopping") is not False:
            tool.cancelled = True
        out.to_client.append(_result(stop.client_id, {}))

    def _tool(self, sid: object, tool_call_id: object) -> tuple[_Session | None, _Tool | None]:
        session = self._sessions.get(sid) if isinstance(sid, str) else None
        if session is None or not isinstance(tool_call_id, str):
            return session, None
        return session, session.tools.get(tool_call_id)

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
            message_id=_message_id(),
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
        # The agent keeps the id with the message: a replay shows it under the id this
        # prompt was answered with (ACP-RESUME-204; translate/messages.py).
        meta = dict(prompt.meta) if isinstance(prompt.meta, dict) else {}
        ours = meta.get("trioAcp")
        meta["trioAcp"] = {
            **(ours if isinstance(ours, dict) else {}),
            "messageId": prompt.message_id,
        }
        params: Json = {"sessionId": session.id, "prompt": prompt.prompt, "_meta": meta}
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
        # What the turn left open can no longer be cancelled (the agent closed it).
        session.tools.clear()
        session.terminals.clear()
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
            call = _Call(method, session.id if session else None, request_id=rid)
            self._agent_calls[key] = call
            if session is not None:
                self._asking_about(out, session, call, key, params)
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

    def _asking_about(
        self, out: Out, session: _Session, call: _Call, key: str, params: Json
    ) -> None:
        """A permission question about a tool call of the turn: while it waits, the tool
        call can be cancelled (answered with the question's reject option)."""
        tool_call = obj(params.get("toolCall")) or {}
        tool_id = tool_call.get("toolCallId")
        options = params.get("options")
        reject = [
            option_id
            for o in (obj(x) for x in (options if isinstance(options, list) else []))
            if o is not None
            and o.get("kind") == "reject_once"
            and isinstance(option_id := o.get("optionId"), str)
        ]
        if not isinstance(tool_id, str) or not reject or session.running is None:
            return
        call.tool_call_id, call.reject = tool_id, reject[0]
        tool = session.tools.get(tool_id)
        if tool is None:
            tool = session.tools[tool_id] = _Tool(tool_id, _text(tool_call.get("name")))
        tool.asking = key
        if not tool.advertised:
            tool.advertised = True
            out.to_client.append(
                _update(
                    session.id,
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": tool_id,
                        "capabilities": {"cancel": {}},
                    },
                )
            )

    def _agent_withdrew(self, out: Out, request_id: object) -> None:
        key = _key(request_id)
        call = self._agent_calls.get(key)
        if call is not None and call.method == "session/request_permission":
            self._answered(out, call, key)

    def _agent_answer(self, out: Out, frame: Json) -> None:
        rid = frame["id"]
        if isinstance(rid, str) and rid in self._prompts:
            self._turn_ended(out, self._prompts.pop(rid), frame)
            return
        if isinstance(rid, str) and rid in self._stops:
            self._stopped(out, self._stops.pop(rid), frame)
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
            return {"messageId": _message_id()}
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
            self._tool_update(out, session, update)
            return
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

    def _tool_update(self, out: Out, session: _Session, update: Json) -> None:
        """A v1 tool call (update) as v2's upsert, with the cancel capability it has, its
        terminal's updates (Zed's terminal `_meta`, `frames.terminal_updates`) and, for a
        cancelled one, the `cancelled` final status."""
        v2 = frames.tool_call_update(update)
        tool_id = v2.get("toolCallId")
        meta = obj(v2.get("_meta"))
        terminal_meta: Json = {}
        if meta is not None and any(k in meta for k in frames.TERMINAL_META_KEYS):
            terminal_meta = {k: meta[k] for k in frames.TERMINAL_META_KEYS if k in meta}
            rest = {k: v for k, v in meta.items() if k not in frames.TERMINAL_META_KEYS}
            if rest:
                v2["_meta"] = rest
            else:
                del v2["_meta"]
        if not isinstance(tool_id, str):
            out.to_client.append(_update(session.id, v2))
            return
        tool = session.tools.get(tool_id)
        status = v2.get("status")
        final = status in ("completed", "failed", "cancelled")
        if tool is None and not final and session.running is not None:
            tool = session.tools[tool_id] = _Tool(tool_id)
        if tool is not None:
            ours = obj(meta.get("trio_acp")) if meta is not None else None
            if ours is not None and "parentToolCallId" in ours:
                tool.nested = True
            if tool.name is None:
                tool.name = _text(v2.get("name"))
            raw_input = obj(v2.get("rawInput"))
            if tool.command is None and raw_input is not None:
                tool.command = _text(raw_input.get("command"))
            if not tool.advertised and tool.stoppable(self._stoppable) and not final:
                tool.advertised = True
                v2["capabilities"] = {"cancel": {}}
        terminals = frames.terminal_updates(terminal_meta, tool.command if tool else None)
        for t in terminals:
            tid = str(t["terminalId"])
            if "exitStatus" in t:
                if session.terminals.pop(tid, None) is not None:
                    t["capabilities"] = None
            elif t["sessionUpdate"] == "terminal_update" and tool is not None:
                session.terminals[tid] = tool.id
                tool.terminal = tid
                if tool.stoppable(self._stoppable):
                    t["capabilities"] = {"cancel": {}}
        # A terminal is announced before the tool call content that shows it, and its
        # output and exit follow.
        starts = [
            t
            for t in terminals
            if t["sessionUpdate"] == "terminal_update" and "exitStatus" not in t
        ]
        for t in starts:
            out.to_client.append(_update(session.id, t))
        if final and tool is not None and tool.terminal is not None:
            # The command's whole output, as the model got it: the authoritative
            # snapshot of its terminal (a quick command streams nothing while it runs).
            raw_output = obj(v2.get("rawOutput"))
            output = raw_output.get("output") if raw_output is not None else None
            if isinstance(output, str):
                out.to_client.append(
                    _update(session.id, frames.terminal_snapshot(tool.terminal, output))
                )
        if final and tool is not None:
            del session.tools[tool_id]
            if tool.cancelled and status != "cancelled":
                v2["status"] = "cancelled"
            if tool.advertised:
                v2["capabilities"] = None
        if set(v2) - {"sessionUpdate", "toolCallId"}:
            out.to_client.append(_update(session.id, v2))
        for t in terminals:
            if t not in starts:
                out.to_client.append(_update(session.id, t))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
