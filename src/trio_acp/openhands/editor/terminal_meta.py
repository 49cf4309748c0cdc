"""A command's output streamed into its tool call the way Zed shows it (`_meta.terminal_*`).

For a client that has no `terminal` capability but understands Zed's terminal `_meta`
conventions (it says so with ``clientCapabilities._meta.terminal_output: true``, as Zed
does; claude-agent-acp and codex-acp follow the same convention), a command that runs
locally can still be shown live:

* the tool call gets ``content: [{"type": "terminal", "terminalId": T}]`` and
  ``_meta: {"terminal_info": {"terminal_id": T, "cwd": …}}`` — T is a name the agent
  makes up (no `terminal/create` happened), here the tool call id;
* each piece of new output is one ``tool_call_update`` with
  ``_meta: {"terminal_output": {"terminal_id": T, "data": <only the new text>}}``: the
  client appends, so nothing is ever resent (no O(n²) traffic);
* the end is ``_meta: {"terminal_exit": {"terminal_id": T, "exit_code": …, "signal": …}}``.

Bounded: one update carries at most `max_chunk` characters, and a command's stream at
most `max_total` (then one note says the rest is in the tool's result). Pure: no trio,
no SDK; the caller sends what it returns, in order.
"""

from __future__ import annotations

from trio_acp import schema

#: Largest `data` of one update (characters).
MAX_CHUNK = 16 * 1024
#: Most output streamed for one command (characters); the model's result is separate.
MAX_TOTAL = 1024 * 1024


def supports_terminal_meta(client: object) -> bool:
    """Whether the client asked for Zed's terminal `_meta` (and has no real terminals,
    which are better: `editor_terminal.py`)."""
    caps = getattr(client, "capabilities", None)
    meta = getattr(caps, "meta", None) or {}
    return meta.get("terminal_output") is True and getattr(caps, "terminal", None) is not True


class TerminalMetaStream:
    """The updates of one command's tool call (module doc)."""

    def __init__(
        self,
        tool_call_id: str,
        *,
        cwd: str | None = None,
        max_chunk: int = MAX_CHUNK,
        max_total: int = MAX_TOTAL,
    ) -> None:
        self.tool_call_id = tool_call_id
        self.terminal_id = tool_call_id
        self.cwd = cwd
        self.max_chunk = max_chunk
        self.max_total = max_total
        self.sent = 0
        self.dropped = 0
        self._closed = False

    def start(self) -> schema.ToolCallProgress:
        info: dict[str, str] = {"terminal_id": self.terminal_id}
        if self.cwd:
            info["cwd"] = self.cwd
        return schema.ToolCallProgress(
            tool_call_id=self.tool_call_id,
            status="in_progress",
            content=[schema.Terminal(terminal_id=self.terminal_id)],
            meta={"terminal_info": info},
        )

    def feed(self, data: str) -> list[schema.ToolCallProgress]:
        """Updates carrying `data` (new output only), split and capped."""
        if self._closed or not data:
            return []
        room = self.max_total - self.sent
        if room <= 0:
            self.dropped += len(data)
            return []
        updates = []
        if len(data) > room:
            self.dropped += len(data) - room
            data = data[:room]
        for start in range(0, len(data), self.max_chunk):
            updates.append(self._output(data[start : start + self.max_chunk]))
        self.sent += len(data)
        if self.sent >= self.max_total:
            updates.append(self._output("\n[… the rest of the output is in the tool's result]\n"))
        return updates

    def exit(self, exit_code: int | None, signal: str | None = None) -> schema.ToolCallProgress:
        self._closed = True
        return schema.ToolCallProgress(
            tool_call_id=self.tool_call_id,
            meta={
                "terminal_exit": {
                    "terminal_id": self.terminal_id,
                    "exit_code": exit_code,
                    "signal": signal,
                }
            },
        )

    def _output(self, data: str) -> schema.ToolCallProgress:
        return schema.ToolCallProgress(
            tool_call_id=self.tool_call_id,
            meta={"terminal_output": {"terminal_id": self.terminal_id, "data": data}},
        )


def merge_outputs(updates: list[schema.ToolCallProgress]) -> list[schema.ToolCallProgress]:
    """Coalesce consecutive `terminal_output` updates of one tool call (an outbox that
    batches under load may do this; replacing one by the next would lose output)."""
    merged: list[schema.ToolCallProgress] = []
    for update in updates:
        meta = update.meta or {}
        prev = merged[-1] if merged else None
        prev_meta = (prev.meta or {}) if prev is not None else {}
        if (
            prev is not None
            and set(meta) == {"terminal_output"}
            and set(prev_meta) == {"terminal_output"}
            and prev.tool_call_id == update.tool_call_id
            and _only_meta(prev)
            and _only_meta(update)
        ):
            out = prev_meta["terminal_output"]
            merged[-1] = schema.ToolCallProgress(
                tool_call_id=update.tool_call_id,
                meta={
                    "terminal_output": {
                        **out,
                        "data": out["data"] + meta["terminal_output"]["data"],
                    }
                },
            )
        else:
            merged.append(update)
    return merged


def _only_meta(update: schema.ToolCallProgress) -> bool:
    return all(
        getattr(update, field, None) is None
        for field in ("kind", "status", "title", "content", "locations", "raw_input", "raw_output")
    )
