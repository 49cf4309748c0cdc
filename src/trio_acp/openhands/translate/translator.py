"""OpenHands SDK events and LLM stream chunks -> ACP `session/update` payloads.

Pure: no trio, no `openhands.*`, no litellm. SDK events and litellm `ModelResponseStream`
chunks are duck-typed (dispatch on `type(obj).__name__` along the MRO, then attributes), so
this module can be imported and tested without the 10 s SDK import.

One `Translator` per ACP session. It remembers what was streamed (per LLM response) and
which tool calls the client has been told about, so the durable SDK events that follow a
stream never repeat text and never update a tool call the client has not seen.

Decisions (see also the report in the commit that added this module):

* Streaming: text/reasoning deltas go out as they come. A tool call is announced
  (`tool_call`, status pending) once its id and name are known; afterwards an update is sent
  only when a title-relevant argument (`command`, `path`, `view_range`, ...) has been
  completely received and changes title/kind/locations: never one update per fragment.
  Arguments are scanned incrementally (linear in their length). `finish` and `think` are not
  tool calls for the client: their `message`/`thought` argument is streamed as message /
  thought text as it arrives.
* The durable events then only add what was not streamed, matched to their stream by
  response id or, failing that, by text; the message ids live streaming, the durable events
  and `replay` derive are the same (`streams.py`).
* Quiet: PauseEvent / InterruptEvent (the client asked for it and gets stopReason
  `cancelled`), ConversationErrorEvent (the session turns it into a JSON-RPC error, see
  `conversation_error`), SystemPromptEvent, SecurityAnalysisEvent, TokenEvent,
  LLMCompletionLogEvent, HookExecutionEvent, state/streaming-delta events, and anything
  unknown (logged at debug). Condensation -> one short thought line.
* Compactions, for a client that advertised `session.compaction` (`compaction=True`): a
  CondensationRequest opens one (`compaction_update` in_progress, id = the request's event
  id); the Condensation completes it with the summary (a Condensation nobody requested, i.e.
  an automatic one, is one completed update under its own id); a ConversationErrorEvent
  fails it and an InterruptEvent cancels it. Replay sends completed compactions only.
* Large payloads: the text of one content block is capped at `MAX_TEXT_BYTES` (UTF-8), keeping
  head and tail around an explicit note saying how much was cut (and, for the terminal, the
  directory where the SDK keeps full outputs). Strings inside rawInput/rawOutput are capped at
  `MAX_RAW_STRING_BYTES`. A diff larger than the cap is replaced by a note.
* Terminal output and file views are sent as text content inside a Markdown code fence
  (clients render text content as Markdown), with ANSI escape sequences stripped.

What each tool looks like (title, kind, locations, result) comes from the tool catalog
(`tools.py`); arguments are parsed by `args.py`, text capped by `text.py`, content built by
`content.py`, results by `results.py`. Stream chunks are the base class's
(`chunks.py`), a replayed user message and an interrupted turn's record `messages.py`.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterable

from trio_acp import schema
from trio_acp.openhands.translate.args import tool_arguments
from trio_acp.openhands.translate.chunks import Call, ChunkTranslator, PendingCall
from trio_acp.openhands.translate.content import (
    class_names,
    image_block,
    is_a,
    location,
    reasoning_of,
    text_block,
    text_item,
    text_of,
)
from trio_acp.openhands.translate.interruptions import (
    CANCEL_SENDER,
    STOPPED_SENDER,
)
from trio_acp.openhands.translate.messages import interruption, user_chunks
from trio_acp.openhands.translate.shapes import Json, SdkObject
from trio_acp.openhands.translate.streams import (
    CUT_OFF,
    Streams,
    message_id,
    remainder,
    response_text,
    text_chunk,
)
from trio_acp.openhands.translate.subagents import SubagentViews
from trio_acp.openhands.translate.text import MAX_RAW_STRING_BYTES, cap_json, cap_text, strip_ansi
from trio_acp.openhands.translate.tools import (
    lookup,
    spec_for_result,
    text_tool,
    tool_family,
)
from trio_acp.openhands.translate.updates import coalesce, fold_tool_calls
from trio_acp.schema import SessionUpdate, ToolCallContent

log = logging.getLogger(__name__)

__all__ = ["Translator", "coalesce", "conversation_error", "message_id"]


#: A streamed tool call whose model call failed and is retried (`Translator.attempt_failed`).
CALL_CUT_OFF = "The model call failed before this call was complete; it is retried."


def conversation_error(event: SdkObject) -> tuple[str, str] | None:
    """(code, detail) of a ConversationErrorEvent, None for any other event."""
    if not is_a(event, "ConversationErrorEvent"):
        return None
    return str(getattr(event, "code", "") or ""), str(getattr(event, "detail", "") or "")


# Events that produce nothing, without a debug line each.
_QUIET_EVENTS = {
    "SystemPromptEvent",
    "SecurityAnalysisEvent",
    "TokenEvent",
    "LLMCompletionLogEvent",
    "HookExecutionEvent",
    "PauseEvent",
    "ConversationStateUpdateEvent",
    "StreamingDeltaEvent",
}


class Translator(ChunkTranslator):
    """One per ACP session; stateful (what was streamed, which tool calls were announced).

    `token(chunk)` for each litellm stream chunk, `event(event)` for each SDK event, in the
    order the SDK produced them; `replay(events)` for a whole history (session/load).
    Each returns a list of schema session updates (possibly empty). Never raises on input
    it does not understand.
    """

    def __init__(
        self,
        cwd: str,
        *,
        is_dir: Callable[[str], bool] | None = None,
        compaction: bool = False,
        terminal_content: Callable[[str], list[ToolCallContent] | None] | None = None,
    ) -> None:
        self.cwd = cwd
        # tool call id → the content a finished terminal call keeps when its command ran in
        # a client terminal (the embedded terminal; docs/editor-workspace.md), else None.
        self._terminal_content = terminal_content
        # Condensations as `compaction_update`s (the client advertised session.compaction)
        # rather than thought notes.
        self.compaction = compaction
        self._open_compaction: str | None = None
        # The status an action gets when the SDK produces it: "in_progress" when it runs
        # at once; "pending" when it may wait for the user's permission first (the session
        # then marks it in_progress once allowed).
        self.action_status = "in_progress"
        self._is_dir = is_dir if is_dir is not None else os.path.isdir
        self._replaying = False
        self._streams = Streams()
        self._pending: dict[tuple[str, int], PendingCall] = {}
        self._calls: dict[str, Call] = {}
        # Sub-agents' events (`SubagentEvent`), nested under their delegating calls.
        self._subagents = SubagentViews(
            lambda: Translator(self.cwd, is_dir=self._is_dir), self._finished
        )

    def _finished(self, tool_call_id: str) -> bool:
        call = self._calls.get(tool_call_id)
        return call is not None and call.finished

    # ---------------------------------------------------------------- events

    def event(self, event: SdkObject) -> list[SessionUpdate]:
        """Updates for one SDK event (live: text already streamed is not repeated)."""
        for name in class_names(event):
            handler = _HANDLERS.get(name)
            if handler is not None:
                if self._subagents.hold(event, name):
                    return []  # a delegating call's result, shown once its sub-agent is done
                return handler(self, event)
            if name in _QUIET_EVENTS:
                return []
        log.debug("no ACP update for SDK event %s", type(event).__name__)
        return []

    def replay(self, events: Iterable[SdkObject]) -> list[SessionUpdate]:
        """The whole history for session/load: user messages as user_message_chunk, the rest
        as live but without streaming state; one `tool_call` per tool call carrying its final
        state (pending if it never ran). Afterwards this translator knows the replayed tool
        calls, so live events about them become updates. (`replay.replay_windows` gives the
        same updates as they become final.)"""
        fresh = self.for_replay()
        out: list[SessionUpdate] = []
        for event in events:
            out += fresh.replay_event(event)
        self.adopt_calls(fresh)
        return fold_tool_calls(out)

    def for_replay(self) -> Translator:
        """A fresh translator, in replay mode, for a history (`replay_event`)."""
        fresh = Translator(self.cwd, is_dir=self._is_dir, compaction=self.compaction)
        fresh._replaying = True
        return fresh

    def replay_event(self, event: SdkObject) -> list[SessionUpdate]:
        """A replaying translator's updates for one event of the history (before folding)."""
        try:
            return self.event(event)
        except Exception:
            log.exception("replaying SDK event %s failed", type(event).__name__)
            return []

    def adopt_calls(self, replayed: Translator) -> None:
        """Know the tool calls a replay announced (live events about them update them), and
        the response ids its messages used (a live response repeating one is a new message)."""
        for call_id, call in replayed._calls.items():
            self._calls.setdefault(call_id, call)
        self._streams.adopt(replayed._streams)

    def attempt_failed(self, reason: str = CALL_CUT_OFF) -> list[SessionUpdate]:
        """The model call in flight failed and is retried (no durable event comes for it):
        its streamed text is closed as cut off and its announced tool calls fail; what the
        retried call streams is new messages and new calls (translate/streams.py)."""
        out = self._streams.cut()
        for pending in self._pending.values():
            call = self._calls.get(pending.id or "")
            if call is None or call.finished:
                continue
            if call.special is not None:
                # A finish/think text: a message of its own, closed like the others.
                if "".join(call.special_text).strip():
                    part = "message" if call.special == "finish" else "thought"
                    mid = message_id(call.tool_call_id, call.special)
                    out.append(text_chunk(part, CUT_OFF, mid))
                del self._calls[call.tool_call_id]
            elif call.announced:
                call.finished = True
                call.args = None
                out.append(
                    schema.ToolCallProgress(
                        tool_call_id=call.tool_call_id,
                        status="failed",
                        content=[text_item(reason)],
                    )
                )
        self._pending.clear()
        return out

    def fail_open_tool_calls(self, reason: str = "Interrupted.") -> list[SessionUpdate]:
        """`failed` updates for every announced tool call that never finished (e.g. after a
        cancelled turn whose stream was cut before the SDK produced the action); forgets
        half-streamed calls."""
        out: list[SessionUpdate] = []
        # Results held back for a sub-agent that did not get to say it was done: theirs
        # is the real ending of those calls.
        for held in self._subagents.release_all():
            out += self.event(held)
        for call in self._calls.values():
            if call.announced and not call.finished:
                call.finished = True
                call.args = None
                out.append(
                    schema.ToolCallProgress(
                        tool_call_id=call.tool_call_id,
                        status="failed",
                        content=[text_item(reason)] if reason else None,
                    )
                )
        self._pending.clear()
        out += self._subagents.fail_open(reason)
        out += self.end_compaction("failed", reason or None)
        return out

    def end_compaction(self, status: str, error: str | None = None) -> list[SessionUpdate]:
        """Close the compaction in progress, if any, with `status` ("failed", "cancelled")."""
        cid, self._open_compaction = self._open_compaction, None
        if cid is None or not self.compaction or self._replaying:
            return []
        return [schema.CompactionUpdate(compaction_id=cid, status=status, error=error)]

    # -- text of events --------------------------------------------------------------

    def _response_text(
        self, event: SdkObject, text: str, thought: str, more: bool = False
    ) -> tuple[list[SessionUpdate], str]:
        """What a response's durable event adds to its text, and the key of its message ids
        (`more`: the event has more of the message than text, images)."""
        rid = getattr(event, "llm_response_id", None)
        # A replayed history was never streamed: all of its text goes out.
        stream = None if self._replaying else self._streams.claim(rid, text, thought)
        if stream is not None:
            key = stream.key
        elif text or thought or more:
            key = self._streams.event_key(rid, str(getattr(event, "id", "")))
        else:
            key = rid or str(getattr(event, "id", ""))  # no message: the key is not used
        return response_text(stream, key, text, thought), key

    # -- handlers ----------------------------------------------------------------------

    def _on_message(self, event: SdkObject) -> list[SessionUpdate]:
        message = getattr(event, "llm_message", None)
        role = getattr(message, "role", None)
        source = getattr(event, "source", None)
        contents = list(getattr(message, "content", None) or [])
        if role == "user" or source == "user":
            if not self._replaying:
                return []  # the client sent it
            return user_chunks(event, contents)
        if role != "assistant" and source != "agent":
            return []
        sender = getattr(event, "sender", None)
        if sender in (CANCEL_SENDER, STOPPED_SENDER):
            # trio-acp's own record of an interrupted turn (translate/interruptions.py).
            text = "".join(c.text for c in contents if isinstance(getattr(c, "text", None), str))
            how = "cancelled" if sender == CANCEL_SENDER else "stopped"
            return interruption(str(getattr(event, "id", "")), text, reasoning_of(message), how)
        text = "".join(c.text for c in contents if isinstance(getattr(c, "text", None), str))
        images = any(getattr(c, "image_urls", None) for c in contents)
        out, key = self._response_text(event, text, reasoning_of(message), images)
        for c in contents:
            for url in getattr(c, "image_urls", None) or []:
                out.append(
                    schema.AgentMessageChunk(
                        content=image_block(url), message_id=message_id(key, "message")
                    )
                )
        return out

    def _on_action(self, event: SdkObject) -> list[SessionUpdate]:
        rid = getattr(event, "llm_response_id", None)
        thought = "".join(
            t.text
            for t in (getattr(event, "thought", None) or [])
            if isinstance(getattr(t, "text", None), str)
        )
        out, _ = self._response_text(event, thought, reasoning_of(event))

        call_id = str(getattr(event, "tool_call_id", "") or "")
        tool = str(getattr(event, "tool_name", "") or "")
        action = getattr(event, "action", None)
        # The response is complete once its actions arrive: forget its streamed calls.
        for k in [k for k, p in self._pending.items() if p.id == call_id or p.rid == rid]:
            del self._pending[k]
        call = self._calls.get(call_id)

        spec = text_tool(tool, class_names(action)) if action is not None else None
        if spec is not None:
            special = spec.name
            assert spec.text_arg is not None
            final = getattr(action, spec.text_arg, None)
            final = final if isinstance(final, str) else ""
            if call is None:
                call = self._calls[call_id] = Call(call_id, tool)
            part = "message" if special == "finish" else "thought"
            out += remainder(part, final, "".join(call.special_text), message_id(call_id, special))
            if call.announced and not call.finished:  # streamed under another name
                out.append(schema.ToolCallProgress(tool_call_id=call_id, status="completed"))
            call.special = special
            call.finished = True
            return out

        args = tool_arguments(event)
        presentation = self._present(tool, args, getattr(event, "summary", None))
        title, kind, locations = presentation
        status = "pending" if self._replaying else self.action_status
        if call is not None and call.announced and not call.finished:
            had_locations = bool(call.presentation and call.presentation[2])
            out.append(
                schema.ToolCallProgress(
                    tool_call_id=call_id,
                    title=title,
                    kind=kind,
                    name=tool if tool != call.tool_name else None,
                    status=status,
                    locations=[location(p, line) for p, line in locations]
                    if (locations or had_locations)
                    else None,
                    raw_input=cap_json(args),
                )
            )
            call.tool_name = tool
        else:
            call = self._calls[call_id] = Call(call_id, tool, announced=True)
            out.append(
                schema.ToolCallStart(
                    tool_call_id=call_id,
                    title=title,
                    kind=kind,
                    name=tool or None,
                    status=status,
                    locations=[location(p, line) for p, line in locations] or None,
                    raw_input=cap_json(args),
                )
            )
        call.presentation = presentation
        call.args = args
        return out

    def _on_observation(self, event: SdkObject) -> list[SessionUpdate]:
        call_id = str(getattr(event, "tool_call_id", "") or "")
        tool = str(getattr(event, "tool_name", "") or "")
        observation = getattr(event, "observation", None)
        call = self._calls.get(call_id)
        if observation is None or lookup(tool).text_arg is not None:
            return []
        if call is not None and call.special is not None:
            return []
        if text_tool("", class_names(observation)) is not None:
            return []
        failed = bool(getattr(observation, "is_error", False))
        args = (call.args if call is not None else None) or {}
        rendered = spec_for_result(tool, class_names(observation)).result(
            observation, args, self.cwd
        )
        content, raw_output = rendered.content, rendered.raw_output
        locations, extra = rendered.locations, rendered.extra
        if self._terminal_content is not None and tool_family(tool) == "terminal":
            embedded = self._terminal_content(call_id)
            if embedded is not None:
                # Content replaces the collection: text here would un-embed the terminal,
                # which still shows the command's output. The text goes to rawOutput.
                output = cap_text(strip_ansi(text_of(observation)), MAX_RAW_STRING_BYTES)
                raw_output = {**(raw_output or {}), "output": output}
                content = embedded
        status = "failed" if failed else "completed"
        done = self._complete(call_id, tool, call, status, content, raw_output, locations)
        return self._subagents.close(call_id, "The sub-agent stopped.") + [done] + extra

    def _on_agent_error(self, event: SdkObject) -> list[SessionUpdate]:
        error = str(getattr(event, "error", "") or "The tool call failed.")
        call_id = str(getattr(event, "tool_call_id", "") or "")
        tool = str(getattr(event, "tool_name", "") or "")
        call = self._calls.get(call_id)
        if call is not None and call.special is not None and not call.announced:
            # A finish/think call that failed (bad arguments): it is a tool call after all.
            call.special = None
        content: list[ToolCallContent] = [text_item(cap_text(error))]
        done = self._complete(call_id, tool, call, "failed", content, None, None)
        return self._subagents.close(call_id, "The sub-agent stopped.") + [done]

    def _on_reject(self, event: SdkObject) -> list[SessionUpdate]:
        reason = str(getattr(event, "rejection_reason", "") or "Rejected.")
        source = getattr(event, "rejection_source", "user")
        text = f"Blocked by a hook: {reason}" if source == "hook" else f"Rejected: {reason}"
        call_id = str(getattr(event, "tool_call_id", "") or "")
        tool = str(getattr(event, "tool_name", "") or "")
        call = self._calls.get(call_id)
        if call is not None and call.special is not None and not call.announced:
            call.special = None
        return [self._complete(call_id, tool, call, "failed", [text_item(text)], None, None)]

    def _on_condensation_request(self, event: SdkObject) -> list[SessionUpdate]:
        if not self.compaction:
            return []
        cid = self._open_compaction = str(getattr(event, "id", "") or uuid.uuid4())
        if self._replaying:
            return []  # only its outcome is history
        return [schema.CompactionUpdate(compaction_id=cid, status="in_progress")]

    def _on_conversation_error(self, event: SdkObject) -> list[SessionUpdate]:
        # The turn's error itself goes out as the prompt's JSON-RPC error (see session.py).
        detail = str(getattr(event, "detail", "") or getattr(event, "code", "") or "")
        return self.end_compaction("failed", cap_text(detail, MAX_RAW_STRING_BYTES) or None)

    def _on_subagent_began(self, event: SdkObject) -> list[SessionUpdate]:
        self._subagents.began(event.parent_tool_call_id)
        return []

    def _on_subagent_ended(self, event: SdkObject) -> list[SessionUpdate]:
        out: list[SessionUpdate] = []
        for held in self._subagents.ended(event.parent_tool_call_id):
            out += self.event(held)
        return out

    def _on_interrupt(self, event: SdkObject) -> list[SessionUpdate]:
        return self.end_compaction("cancelled")

    def _on_condensation(self, event: SdkObject) -> list[SessionUpdate]:
        if self.compaction:
            cid, self._open_compaction = self._open_compaction, None
            summary = getattr(event, "summary", None)
            text = cap_text(summary) if isinstance(summary, str) and summary else None
            return [
                schema.CompactionUpdate(
                    compaction_id=cid or str(getattr(event, "id", "") or uuid.uuid4()),
                    status="completed",
                    summary=[text_block(text)] if text else None,
                )
            ]
        forgotten = getattr(event, "forgotten_event_ids", None)
        if is_a(event, "Condensation") and forgotten is not None:
            text = f"(conversation condensed: {len(forgotten)} events summarized)"
        else:
            text = "(conversation condensed)"
        mid = message_id(str(getattr(event, "id", "")), "condensation")
        return [text_chunk("thought", text, mid)]

    # -- tool call completion -------------------------------------------------------------

    def _complete(
        self,
        call_id: str,
        tool: str,
        call: Call | None,
        status: str,
        content: list[ToolCallContent] | None,
        raw_output: Json,
        locations: list[tuple[str, int | None]] | None,
    ) -> SessionUpdate:
        loc_objs = [location(p, line) for p, line in locations] if locations else None
        if call is not None and call.announced:
            call.finished = True
            call.args = None
            return schema.ToolCallProgress(
                tool_call_id=call_id,
                status=status,
                content=content,
                locations=loc_objs,
                raw_output=raw_output,
            )
        # Never announced (history starting mid-way, or a call the SDK rejected before
        # making an action): one tool_call carrying the final state.
        args = call.args if call is not None and call.args else {}
        title, kind, presented = self._present(tool or "tool", args, None)
        if call is None:
            call = self._calls[call_id] = Call(call_id, tool)
        call.announced = True
        call.finished = True
        call.args = None
        return schema.ToolCallStart(
            tool_call_id=call_id,
            title=title,
            kind=kind,
            name=tool or None,
            status=status,
            content=content,
            locations=loc_objs or [location(p, line) for p, line in presented] or None,
            raw_input=cap_json(args) if args else None,
            raw_output=raw_output,
        )


_HANDLERS: dict[str, Callable[[Translator, SdkObject], list[SessionUpdate]]] = {
    "MessageEvent": Translator._on_message,
    "ActionEvent": Translator._on_action,
    "ObservationEvent": Translator._on_observation,
    "AgentErrorEvent": Translator._on_agent_error,
    "UserRejectObservation": Translator._on_reject,
    "Condensation": Translator._on_condensation,
    "CondensationSummaryEvent": Translator._on_condensation,
    "CondensationRequest": Translator._on_condensation_request,
    "ConversationErrorEvent": Translator._on_conversation_error,
    "InterruptEvent": Translator._on_interrupt,
    "SubagentEvent": lambda self, event: self._subagents.event(event, self.action_status),
    "SubagentBegan": Translator._on_subagent_began,
    "SubagentEnded": Translator._on_subagent_ended,
}
