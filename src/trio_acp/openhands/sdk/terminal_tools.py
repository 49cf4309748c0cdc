"""The SDK's side of the editor workspace's tools (docs/editor-workspace.md): the terminal
executors and the tool registrations that route a conversation's tools through its
`EditorWorkspace`.

- `ClientTerminalExecutor`: the SDK `ToolExecutor` over `editor/terminal.py`'s
  `ClientTerminal` (commands in the editor's terminals), making the SDK's observation of
  its `Outcome`.
- `LiveTerminalExecutor`: the SDK's own `TerminalExecutor`, its screen (SDK internals:
  `_session.terminal.read_screen`, reliance.py) streamed by `editor/terminal_live.py`.
- `route_tools`: our factories registered under the SDK's `file_editor` and `terminal`
  names, asking the workspace of the conversation being built (`editor/workspace.py`).

Imports the SDK: imported inside the editor's functions, after the load.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from openhands.sdk.conversation.impl.local_conversation import LocalConversation
from openhands.sdk.conversation.state import ConversationState
from openhands.sdk.tool import ToolExecutor, register_tool
from openhands.tools.file_editor import FileEditorTool
from openhands.tools.file_editor.impl import FileEditorExecutor
from openhands.tools.terminal import TerminalAction, TerminalTool
from openhands.tools.terminal.definition import TerminalObservation
from openhands.tools.terminal.metadata import CmdOutputMetadata

if TYPE_CHECKING:
    from trio_acp.openhands.editor.terminal import ClientTerminal, Outcome
    from trio_acp.openhands.editor.terminal_live import LiveOutput
    from trio_acp.openhands.editor.workspace import EditorWorkspace
    from trio_acp.openhands.translate.shapes import JsonValue


class ClientTerminalExecutor(ToolExecutor[TerminalAction, TerminalObservation]):
    """Commands in the editor's terminals (`ClientTerminal`), as the SDK runs its tools."""

    def __init__(self, terminal: ClientTerminal) -> None:
        self.terminal = terminal

    def close(self) -> None:
        self.terminal.close()

    def interrupt(self) -> None:
        self.terminal.interrupt()

    def __call__(
        self, action: TerminalAction, conversation: LocalConversation | None = None
    ) -> TerminalObservation:
        return observation(self.terminal.run(action))


def observation(outcome: Outcome) -> TerminalObservation:
    """The SDK's observation of a command run in the editor's terminal."""
    exit_code = outcome.exit_code
    return TerminalObservation.from_text(
        text=outcome.text,
        command=outcome.command,
        is_error=outcome.error,
        exit_code=exit_code,
        timeout=outcome.timeout,
        metadata=CmdOutputMetadata(
            exit_code=-1 if exit_code is None else exit_code, working_dir=outcome.working_dir
        ),
    )


class LiveTerminalExecutor(ToolExecutor[TerminalAction, TerminalObservation]):
    """The SDK's `TerminalExecutor` (`inner`), each command's output streamed live."""

    def __init__(
        self, inner: ToolExecutor[TerminalAction, TerminalObservation], live: LiveOutput
    ) -> None:
        self.inner = inner
        self.live = live

    def __getattr__(self, name: str) -> object:  # the SDK executor's own, read duck-typed
        # Whoever inspects the SDK's executor (its shell's process: tool_processes.py)
        # finds it through the wrapper.
        if name in ("inner", "live"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def interrupt(self) -> None:
        self.inner.interrupt()

    def close(self) -> None:
        self.inner.close()

    def __call__(
        self, action: TerminalAction, conversation: LocalConversation | None = None
    ) -> TerminalObservation:
        return self.live.run(
            action,
            lambda: self.inner(action, conversation),
            read=screen_reader(self.inner),
            cwd=getattr(self.inner, "working_dir", None),
        )


def screen_reader(executor: object) -> Callable[[], str] | None:
    """The screen of the executor's single shell session, or None (pooled tmux panes:
    which pane a command gets is only known inside the SDK)."""
    session = getattr(executor, "_session", None)
    terminal = getattr(session, "terminal", None)
    read = getattr(terminal, "read_screen", None)
    return read if callable(read) else None


def file_editor_tools(
    conv_state: ConversationState, executor: FileEditorExecutor | None
) -> list[FileEditorTool]:
    """The SDK's file editor tools of a conversation, with `executor` when given."""
    tools = list(FileEditorTool.create(conv_state))
    if executor is None:
        return tools
    return [tool.set_executor(executor) for tool in tools]


def terminal_tools(
    conv_state: ConversationState,
    *,
    executor: ToolExecutor[TerminalAction, TerminalObservation] | None = None,
    wrap: Callable[
        [ToolExecutor[TerminalAction, TerminalObservation]],
        ToolExecutor[TerminalAction, TerminalObservation],
    ]
    | None = None,
    **params: JsonValue,  # the terminal tool's params in the agent spec
) -> list[TerminalTool]:
    """The SDK's terminal tools of a conversation: with our `executor` instead of its
    shell, or its shell's executor wrapped by `wrap`, or as they are."""
    if executor is not None:
        return list(TerminalTool.create(conv_state, executor=executor))
    tools = list(TerminalTool.create(conv_state, **params))
    if wrap is None:
        return tools
    # `TerminalTool.create` gives each tool its executor (the SDK types it optional).
    return [
        tool.set_executor(
            wrap(cast("ToolExecutor[TerminalAction, TerminalObservation]", tool.executor))
        )
        for tool in tools
    ]


def route_tools(workspace_for: Callable[[object], EditorWorkspace | None]) -> None:
    """Register our factories for `file_editor` and `terminal`: a conversation with a
    workspace (`workspace_for(its id)`) gets the workspace's tools, any other the SDK's."""

    class EditorRoutedFileEditorTool(FileEditorTool):
        """Only a factory: `create` returns the SDK's FileEditorTool instances (not of this
        class: hence the override mypy refuses, as for the terminal's below)."""

        @classmethod
        def create(  # type: ignore[override]
            cls, conv_state: ConversationState, **params: JsonValue
        ) -> Sequence[FileEditorTool]:
            workspace = workspace_for(conv_state.id)
            if workspace is None:
                return list(FileEditorTool.create(conv_state, **params))
            return workspace.file_editor_tools(conv_state)

    class EditorRoutedTerminalTool(TerminalTool):
        """Only a factory: `create` returns the SDK's TerminalTool instances."""

        @classmethod
        def create(  # type: ignore[override]
            cls, conv_state: ConversationState, **params: JsonValue
        ) -> list[TerminalTool]:
            workspace = workspace_for(conv_state.id)
            if workspace is None:
                return list(TerminalTool.create(conv_state, **params))
            return workspace.terminal_tools(conv_state, **params)

    register_quietly(FileEditorTool.name, EditorRoutedFileEditorTool)
    register_quietly(TerminalTool.name, EditorRoutedTerminalTool)


def register_quietly(name: str, factory: type[FileEditorTool] | type[TerminalTool]) -> None:
    """Register `factory` under the SDK's own tool name `name`. Replacing the SDK's own
    registration is the point: its "Duplicate tool name" warning would only alarm
    whoever reads the log."""
    registry_log = logging.getLogger("openhands.sdk.tool.registry")
    level = registry_log.level
    registry_log.setLevel(logging.ERROR)
    try:
        register_tool(name, factory)
    finally:
        registry_log.setLevel(level)
