"""The translator's streaming half: litellm stream chunks -> ACP `session/update`s.

`ChunkTranslator` is the base of `Translator` (`translator.py`, which sets its state): text
and reasoning deltas go out as they come; a tool call is announced once its id, name and
enough of its `announce_with` argument are known, and updated only when a title-relevant
argument completes (see the decisions in `translator.py`). The tool calls themselves, as
they stream and as the client knows them, are `PendingCall` and `Call`.

Pure, like the rest of `translate/`: duck-typed chunks, no litellm import.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from trio_acp import schema
from trio_acp.openhands.translate.args import ArgScanner
from trio_acp.openhands.translate.content import location
from trio_acp.openhands.translate.fields import field
from trio_acp.openhands.translate.shapes import SdkObject, ToolArgs
from trio_acp.openhands.translate.streams import Streams, message_id, text_chunk
from trio_acp.openhands.translate.text import cap_json
from trio_acp.openhands.translate.tools import Presentation, lookup, present
from trio_acp.schema import SessionUpdate


@attrs.define
class PendingCall:
    """A tool call whose arguments are being streamed, keyed by (response id, index)."""

    rid: str
    index: int
    id: str | None = None
    name: str | None = None
    scanner: ArgScanner = attrs.Factory(ArgScanner)
    opened: bool = False


#: Characters (or one whole line) of a tool's `announce_with` argument after which its
#: streamed call is announced without waiting for the rest (a long heredoc, a script).
ANNOUNCE_PREFIX = 80


def ready_to_announce(pending: PendingCall) -> bool:
    """Whether a streamed call may be announced: its tool's `announce_with` argument (the
    terminal's command) is known, or enough of it to name it (`ANNOUNCE_PREFIX`)."""
    spec = lookup(pending.name or "")
    arg = spec.announce_with
    if arg is None or spec.text_arg is not None or arg in pending.scanner.fields:
        return True
    so_far = pending.scanner.value_so_far(arg)
    return so_far is not None and ("\n" in so_far or len(so_far) >= ANNOUNCE_PREFIX)


def announced_fields(pending: PendingCall) -> ToolArgs:
    """The arguments a streamed call is presented with when it is announced: the complete
    ones, plus the start of its `announce_with` argument if that is still arriving."""
    fields = pending.scanner.fields
    arg = lookup(pending.name or "").announce_with
    if arg is None or arg in fields:
        return fields
    so_far = pending.scanner.value_so_far(arg)
    if not so_far:
        return fields
    line = so_far.split("\n", 1)[0][:ANNOUNCE_PREFIX].rstrip()
    return {**fields, arg: line + "…"} if line else fields


@attrs.define
class Call:
    """A tool call as the client knows it, keyed by tool call id."""

    tool_call_id: str
    tool_name: str
    announced: bool = False
    finished: bool = False
    special: str | None = None  # "finish" / "think": shown as text, not as a tool call
    special_text: list[str] = attrs.Factory(list)  # finish/think text already streamed
    presentation: tuple[str, str, tuple[tuple[str, int | None], ...]] | None = None
    args: ToolArgs | None = None  # kept until the call finishes


class ChunkTranslator:
    """Stream chunks -> updates; `Translator.__init__` sets this state."""

    cwd: str
    _is_dir: Callable[[str], bool]
    _streams: Streams
    _pending: dict[tuple[str, int], PendingCall]
    _calls: dict[str, Call]

    def token(self, chunk: SdkObject) -> list[SessionUpdate]:
        """Updates for one litellm `ModelResponseStream` chunk (or a bare text delta)."""
        if isinstance(chunk, str):
            return self._streams.delta("bare-text-stream", chunk, "message") if chunk else []
        # `field`, not getattr: this runs once per streamed token (translate/fields.py).
        rid = field(chunk, "id") or "unidentified-response"
        out: list[SessionUpdate] = []
        for choice in field(chunk, "choices") or []:
            if (field(choice, "index") or 0) != 0:
                continue  # the SDK only uses the first choice
            delta = field(choice, "delta")
            if delta is None:
                continue
            reasoning = field(delta, "reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                out += self._streams.delta(rid, reasoning, "thought")
            content = field(delta, "content")
            if isinstance(content, str) and content:
                out += self._streams.delta(rid, content, "message")
            for pos, tool_call in enumerate(field(delta, "tool_calls") or []):
                out += self._tool_call_delta(rid, pos, tool_call)
        return out

    def _tool_call_delta(self, rid: str, pos: int, tool_call: SdkObject) -> list[SessionUpdate]:
        index = getattr(tool_call, "index", None)
        if not isinstance(index, int):
            index = pos
        key = (rid, index)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = PendingCall(rid, index)
        call_id = getattr(tool_call, "id", None)
        if call_id and pending.id is None:
            pending.id = str(call_id)
        function = getattr(tool_call, "function", None)
        name = getattr(function, "name", None) if function is not None else None
        if name and pending.name is None:
            pending.name = str(name)
        args = getattr(function, "arguments", None) if function is not None else None
        completed: list[str] = []
        pieces: dict[str, str] = {}
        if isinstance(args, str) and args:
            completed, pieces = pending.scanner.feed(args)

        if not pending.opened:
            if pending.id is None or pending.name is None or not ready_to_announce(pending):
                return []
            pending.opened = True
            return self._open_streamed_call(pending)
        call = self._calls.get(pending.id or "")
        if call is None or call.finished:
            return []
        if call.special is not None:
            text = pieces.get(lookup(call.special).text_arg or "")
            return self._special_text(call, text) if text else []
        if call.announced and not lookup(call.tool_name).title_args.isdisjoint(completed):
            presentation = self._present(call.tool_name, pending.scanner.fields, None)
            if presentation != call.presentation:
                return [self._presentation_update(call, presentation)]
        return []

    def _open_streamed_call(self, pending: PendingCall) -> list[SessionUpdate]:
        assert pending.id is not None and pending.name is not None
        call = self._calls.get(pending.id)
        if call is not None:  # already known (a repeated id): leave it alone
            return []
        call = self._calls[pending.id] = Call(pending.id, pending.name)
        text_arg = lookup(pending.name).text_arg
        if text_arg is not None:
            call.special = pending.name
            text = pending.scanner.value_so_far(text_arg)
            return self._special_text(call, text) if text else []
        fields = pending.scanner.fields
        presentation = self._present(pending.name, announced_fields(pending), None)
        call.announced = True
        call.presentation = presentation
        title, kind, locations = presentation
        return [
            schema.ToolCallStart(
                tool_call_id=pending.id,
                title=title,
                kind=kind,
                name=pending.name,
                status="pending",
                locations=[location(p, line) for p, line in locations] or None,
                raw_input=cap_json(dict(fields)),
            )
        ]

    def _special_text(self, call: Call, text: str) -> list[SessionUpdate]:
        call.special_text.append(text)
        part = "message" if call.special == "finish" else "thought"
        return [text_chunk(part, text, message_id(call.tool_call_id, call.special or ""))]

    def _presentation_update(
        self, call: Call, presentation: tuple[str, str, tuple[tuple[str, int | None], ...]]
    ) -> SessionUpdate:
        title, kind, locations = presentation
        had_locations = bool(call.presentation and call.presentation[2])
        call.presentation = presentation
        return schema.ToolCallProgress(
            tool_call_id=call.tool_call_id,
            title=title,
            kind=kind,
            locations=[location(p, line) for p, line in locations]
            if (locations or had_locations)
            else None,
        )

    def _present(self, tool: str, args: ToolArgs, summary: str | None) -> Presentation:
        return present(tool, args, summary, cwd=self.cwd, is_dir=self._is_dir)
