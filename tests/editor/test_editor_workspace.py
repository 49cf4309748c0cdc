"""The routing of a session's file editor and terminal tools through its editor."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
import trio

from trio_acp import schema
from trio_acp.openhands.editor import workspace as editor_workspace
from trio_acp.openhands.editor.workspace import EditorWorkspace, ToolCallIds

pytest.importorskip("openhands.tools.terminal")
from openhands.sdk import Tool
from openhands.sdk.tool.registry import resolve_tool
from openhands.tools.file_editor.impl import FileEditorExecutor
from openhands.tools.terminal.definition import TerminalAction


def proxy(fs: bool, terminal: bool):
    caps = schema.ClientCapabilities(
        fs=schema.FileSystemCapabilities(read_text_file=fs, write_text_file=fs), terminal=terminal
    )
    return SimpleNamespace(capabilities=caps)


def conv_state(tmp_path):
    return SimpleNamespace(
        id=uuid.uuid4(),
        workspace=SimpleNamespace(working_dir=str(tmp_path)),
        agent=SimpleNamespace(llm=SimpleNamespace(vision_is_active=lambda: False)),
        env_observation_persistence_dir=None,
    )


def test_tools_go_through_the_editor_only_when_attached_and_offered(tmp_path):
    state = conv_state(tmp_path)
    workspace = EditorWorkspace(proxy(True, True), str(state.id))
    editor_workspace.attach(state.id, workspace)
    try:
        (editor,) = resolve_tool(Tool(name="file_editor"), state)
        (terminal,) = resolve_tool(
            Tool(name="terminal", params={"terminal_type": "subprocess"}), state
        )
        assert editor.name == "file_editor" and terminal.name == "terminal"  # names unchanged
        assert type(editor.executor).__name__ == "ClientFileEditorExecutor"
        assert type(terminal.executor).__name__ == "ClientTerminalExecutor"
    finally:
        editor_workspace.detach(state.id)
    (editor,) = resolve_tool(Tool(name="file_editor"), state)
    assert type(editor.executor) is FileEditorExecutor

    bare = EditorWorkspace(proxy(False, False), str(state.id))
    editor_workspace.attach(state.id, bare)
    try:
        (editor,) = resolve_tool(Tool(name="file_editor"), state)
        assert type(editor.executor) is FileEditorExecutor
        assert bare.files is None and not bare.terminal
    finally:
        editor_workspace.detach(state.id)


def test_a_terminal_is_announced_on_the_tool_call_of_its_action():
    posted = []
    workspace = EditorWorkspace(proxy(True, True), "sid", post_update=posted.append)
    action = TerminalAction(command="echo hi")
    workspace.note_event(type("ActionEvent", (), {"action": action, "tool_call_id": "call_1"})())
    workspace.announce_terminal(action, "term-7")
    (update,) = posted
    assert update.tool_call_id == "call_1" and update.content == [
        schema.Terminal(terminal_id="term-7")
    ]
    assert schema.to_wire(update)["content"] == [{"type": "terminal", "terminalId": "term-7"}]
    # The finished call keeps its terminal embedded, once.
    assert workspace.terminal_content("call_1") == [schema.Terminal(terminal_id="term-7")]
    assert workspace.terminal_content("call_1") is None


def test_tool_call_ids_are_bounded_and_match_copies():
    ids = ToolCallIds(size=2)
    actions = [TerminalAction(command=f"c{i}") for i in range(3)]
    for i, action in enumerate(actions):
        ids.note(SimpleNamespace(action=action, tool_call_id=f"id{i}"))
    assert ids.lookup(actions[0]) is None  # forgotten
    assert ids.lookup(actions[2]) == "id2"
    assert ids.lookup(actions[1].model_copy()) == "id1"


async def test_the_permission_preview_reads_the_buffer(tmp_path):
    from trio_acp.testing.editor import SESSION, EditorClient, editor_pair

    on_disk = tmp_path / "a.py"
    on_disk.write_text("saved\n")
    a = str(on_disk)
    client = EditorClient({a: "unsaved\n"})
    async with editor_pair(client) as proxy:
        workspace = EditorWorkspace(proxy, SESSION)
        read = await workspace.preview_reader([a], fallback=lambda p: "disk")
        assert read(a) == "unsaved\n"
        no_fs = EditorWorkspace(SimpleNamespace(capabilities=schema.ClientCapabilities()), SESSION)
        fallback = lambda p: "disk"  # noqa: E731
        assert await no_fs.preview_reader([a], fallback=fallback) is fallback


async def test_the_preview_of_a_new_file_asks_the_editor_nothing(tmp_path):
    """A file neither on the disk nor written by the session is new: asking the editor
    for it only fails (acpx logs each such read as "[error] RUNTIME: Resource not
    found"). A file the session wrote through the editor may exist only there: asked."""
    from trio_acp.testing.editor import SESSION, EditorClient, editor_pair

    new = str(tmp_path / "new.py")
    written = str(tmp_path / "written.py")
    client = EditorClient()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        workspace = EditorWorkspace(proxy, SESSION)
        files = workspace.files
        assert files is not None
        await nursery.start(workspace.calls.run)
        read = await workspace.preview_reader([new], fallback=lambda p: None)
        assert read(new) is None
        assert client.calls == []  # no fs/read_text_file for the new file
        await trio.to_thread.run_sync(files.write, written, "in the editor only\n")
        read = await workspace.preview_reader([written], fallback=lambda p: None)
        assert read(written) == "in the editor only\n"
        assert client.methods() == ["fs/write_text_file", "fs/read_text_file"]
        workspace.calls.close()
