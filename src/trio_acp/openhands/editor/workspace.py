"""One session's use of its editor: files through `fs/*`, commands through `terminal/*`.

`EditorWorkspace` is built per session from the client's capabilities and owns the
session's `ClientCalls` (the wait primitive, `client_calls.py`). The SDK builds a
conversation's tools by name through its tool registry; `install()` registers, once per
process, factories for the `file_editor` and `terminal` tools that look up the workspace
attached to the conversation (`attach(conversation_id, workspace)`) and, when the client
offers it, swap the executor for one that works through the editor. The tools keep their
names, schemas and descriptions, so persisted conversations and the translation of their
events are unchanged; a conversation with no workspace attached (or a client without the
capability) gets exactly the SDK's tools.

Session wiring (see the docstrings): `attach` before the conversation is built, start
`calls.run` in the session's nursery, `note_event` from the SDK event callback,
`calls.begin_turn()` / `await calls.cancel_turn_and_wait()` around each turn and its
cancel, `detach` + `calls.close()` when the session closes; `terminal_content(tool_call_id)`
for the translator's last update of a terminal tool call; `preview_reader` for the
permission preview of an edit.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from trio_acp import schema
from trio_acp.openhands.editor.client_calls import ClientCalls
from trio_acp.openhands.editor.files import EditorFiles
from trio_acp.openhands.editor.terminal_meta import supports_terminal_meta
from trio_acp.openhands.translate.shapes import JsonValue

if TYPE_CHECKING:
    from trio_acp.connection import ClientProxy
    from trio_acp.openhands.sdk.classes import (
        Action,
        ConversationState,
        Event,
        FileEditorTool,
        TerminalAction,
        TerminalObservation,
        TerminalTool,
        ToolExecutor,
    )

log = logging.getLogger(__name__)

_WORKSPACES: dict[str, EditorWorkspace] = {}
_WORKSPACES_LOCK = threading.Lock()
_installed = False


class ToolCallIds:
    """Which tool call an action belongs to, for an executor that only sees the action.

    The SDK hands an executor the `Action`, not its `ActionEvent`; but every ActionEvent
    reaches the event callback (in the SDK's thread, before its tool runs) carrying that
    very action object. Bounded: only the latest `size` actions are remembered.
    """

    def __init__(self, size: int = 256) -> None:
        self._ids: collections.OrderedDict[int, tuple[Action, str]] = collections.OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def note(self, event: Event) -> None:
        action = getattr(event, "action", None)
        tool_call_id = getattr(event, "tool_call_id", None)
        if action is None or not isinstance(tool_call_id, str):
            return
        with self._lock:
            self._ids[id(action)] = (action, tool_call_id)
            while len(self._ids) > self._size:
                self._ids.popitem(last=False)

    def lookup(self, action: Action) -> str | None:
        with self._lock:
            entry = self._ids.get(id(action))
            if entry is not None and entry[0] is action:
                return entry[1]
            # An event a callback copied still holds an equal action.
            for held, tool_call_id in reversed(self._ids.values()):
                if held == action:
                    return tool_call_id
        return None


class EditorWorkspace:
    """What one session uses of its editor (module doc)."""

    def __init__(
        self,
        client: ClientProxy,
        session_id: str,
        *,
        post_update: Callable[[schema.SessionUpdate], None] | None = None,
        calls: ClientCalls | None = None,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.calls = calls or ClientCalls()
        self.files = EditorFiles.for_client(self.calls, client, session_id)
        self.terminal = getattr(getattr(client, "capabilities", None), "terminal", None) is True
        # No client terminals, but Zed's `_meta.terminal_output`: the SDK's own shell, its
        # output streamed into the tool call (terminal_live.py).
        self.terminal_meta = supports_terminal_meta(client)
        self.tool_calls = ToolCallIds()
        # post_update(update) may be called from any thread and must never wait: the
        # session tags it with the running turn and sends it in order with the turn's
        # other updates.
        self._post_update = post_update
        self._terminals: dict[str, str] = {}
        self._lock = threading.Lock()

    def note_event(self, event: Event) -> None:
        """From the SDK's event callback (its thread), for every event."""
        if type(event).__name__ == "ActionEvent":
            self.tool_calls.note(event)

    def announce_terminal(self, action: Action, terminal_id: str) -> None:
        """A client terminal now runs `action`'s command: embed it in the tool call."""
        tool_call_id = self.tool_calls.lookup(action)
        if tool_call_id is None:
            log.debug("no tool call for terminal %s", terminal_id)
            return
        with self._lock:
            self._terminals[tool_call_id] = terminal_id
        if self._post_update is not None:
            self._post_update(
                schema.ToolCallProgress(
                    tool_call_id=tool_call_id,
                    status="in_progress",
                    content=[schema.Terminal(terminal_id=terminal_id)],
                )
            )

    def terminal_content(self, tool_call_id: str) -> list[schema.ToolCallContent] | None:
        """The content a finished terminal tool call keeps: its embedded terminal (the
        editor shows it after release), or None if it ran no client terminal. Once."""
        with self._lock:
            terminal_id = self._terminals.pop(tool_call_id, None)
        return None if terminal_id is None else [schema.Terminal(terminal_id=terminal_id)]

    async def preview_reader(
        self, paths: list[str], fallback: Callable[[str], str | None], *, timeout: float = 5.0
    ) -> Callable[[str], str | None]:
        """A reader for a permission preview (Trio side, before the request): the edit's
        before-image from the editor's buffers when files go through the editor — so the
        diff the user approves is against what they see — else `fallback` (the disk).
        A buffer the editor cannot give in `timeout` seconds falls back too.

        Only a file the edit itself would read from the editor is asked for: one on the
        disk, or one this session wrote through the editor. A file that is neither is
        new (the SDK's `create` refuses one on the disk), and asking the editor for it
        fails: acpx logs every such read as "[error] RUNTIME: Resource not found"."""
        if self.files is None or not self.files.reads_from_editor:
            return fallback
        import trio

        files = self.files
        buffers: dict[str, str] = {}
        for path in paths:
            if not files.wrote(path) and not await trio.Path(path).exists():
                continue  # a new file: `fallback` finds nothing either
            with trio.move_on_after(timeout):
                try:
                    response = await self.client.read_text_file(
                        session_id=self.session_id, path=path
                    )
                except Exception:
                    log.debug("no buffer of %s for the preview", path, exc_info=True)
                    continue
                buffers[path] = response.content

        def read(path: str) -> str | None:
            return buffers[path] if path in buffers else fallback(path)

        return read

    # --- the tools ----------------------------------------------------------------------

    def file_editor_tools(self, conv_state: ConversationState) -> list[FileEditorTool]:
        from trio_acp.openhands.editor.files import make_executor
        from trio_acp.openhands.sdk.terminal_tools import file_editor_tools

        if self.files is None:
            return file_editor_tools(conv_state, None)
        root = conv_state.workspace.working_dir
        return file_editor_tools(conv_state, make_executor(root, self.files))

    @property
    def routes_tools(self) -> bool:
        """Whether any tool differs from the SDK's for this client."""
        return self.files is not None or self.terminal or self.terminal_meta

    def _embed(self, tool_call_id: str, terminal_id: str) -> None:
        with self._lock:
            self._terminals[tool_call_id] = terminal_id

    def _post(self, update: schema.SessionUpdate) -> None:
        if self._post_update is not None:
            self._post_update(update)

    def terminal_tools(
        self,
        conv_state: ConversationState,
        **params: JsonValue,  # the terminal tool's params in the agent spec
    ) -> list[TerminalTool]:
        from trio_acp.openhands.sdk.terminal_tools import terminal_tools

        if not self.terminal and self.terminal_meta:
            from trio_acp.openhands.editor.terminal_live import wrap_executor

            def wrap(
                executor: ToolExecutor[TerminalAction, TerminalObservation],
            ) -> ToolExecutor[TerminalAction, TerminalObservation]:
                return wrap_executor(
                    executor,
                    tool_call_id=self.tool_calls.lookup,
                    post=self._post,
                    embed=self._embed,
                )

            return terminal_tools(conv_state, wrap=wrap, **params)
        if not self.terminal:
            return terminal_tools(conv_state, **params)
        from trio_acp.openhands.editor.terminal import make_executor

        executor = make_executor(
            self.calls,
            self.client,
            self.session_id,
            conv_state.workspace.working_dir,
            announce=self.announce_terminal,
            env=dict(params.get("env") or {}) or None,
        )
        return terminal_tools(conv_state, executor=executor)


def attach(conversation_id: object, workspace: EditorWorkspace) -> None:
    """Route the tools of conversation `conversation_id` through `workspace` (before
    the conversation is built: its tools are made when the agent first starts)."""
    install()
    with _WORKSPACES_LOCK:
        _WORKSPACES[str(conversation_id)] = workspace


def detach(conversation_id: object) -> None:
    with _WORKSPACES_LOCK:
        _WORKSPACES.pop(str(conversation_id), None)


def workspace_for(conversation_id: object) -> EditorWorkspace | None:
    with _WORKSPACES_LOCK:
        return _WORKSPACES.get(str(conversation_id))


def install() -> None:
    """Register the routing factories for `file_editor` and `terminal` (idempotent)."""
    global _installed
    with _WORKSPACES_LOCK:
        if _installed:
            return
        _installed = True
    from trio_acp.openhands.sdk.terminal_tools import route_tools

    route_tools(workspace_for)
