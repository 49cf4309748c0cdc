"""The file editor tool through the editor's `fs/*`: reads see the buffer (unsaved
changes included), writes go to the editor, the disk is left alone."""

from __future__ import annotations

import pytest
import trio

from trio_acp.openhands.editor.client_calls import ClientCalls
from trio_acp.openhands.editor.files import EditorFiles, make_executor
from trio_acp.testing.editor import SESSION, EditorClient, editor_pair

pytest.importorskip("openhands.tools.file_editor")
from openhands.tools.file_editor.definition import FileEditorAction


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "app.py"
    path.write_text("on disk\n")
    return tmp_path, path


async def run_tool(client: EditorClient, root, *actions):
    """Run file editor actions in a tool thread against `client`; their observations."""
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        files = EditorFiles.for_client(calls, proxy, SESSION)
        assert files is not None
        executor = make_executor(str(root), files)
        with trio.fail_after(20):
            results = await trio.to_thread.run_sync(
                lambda: [executor(FileEditorAction(**a)) for a in actions]
            )
        calls.close()
    return results


async def test_view_shows_the_buffer_not_the_disk(project):
    root, path = project
    client = EditorClient({str(path): "unsaved line one\nunsaved line two\n"})
    (obs,) = await run_tool(client, root, {"command": "view", "path": str(path)})
    assert not obs.is_error
    assert "unsaved line two" in obs.text and "on disk" not in obs.text
    (ranged,) = await run_tool(
        client, root, {"command": "view", "path": str(path), "view_range": [2, 2]}
    )
    assert "unsaved line two" in ranged.text and "unsaved line one" not in ranged.text


async def test_an_edit_starts_from_the_buffer_and_goes_to_the_editor(project):
    root, path = project
    client = EditorClient({str(path): "x = 1  # unsaved\ny = 2\n"})
    (obs,) = await run_tool(
        client,
        root,
        {"command": "str_replace", "path": str(path), "old_str": "y = 2", "new_str": "y = 3"},
    )
    assert not obs.is_error, obs.text
    assert obs.old_content == "x = 1  # unsaved\ny = 2\n"  # the before-image is what the user sees
    assert client.buffers[str(path)] == "x = 1  # unsaved\ny = 3\n"
    assert path.read_text() == "on disk\n"  # the agent never wrote the disk
    # One read (cached for the call's snippet), one write.
    assert client.methods() == ["fs/read_text_file", "fs/write_text_file"]


async def test_a_refused_write_fails_the_tool_call_with_the_editors_reason(project):
    root, path = project
    client = EditorClient({str(path): "a\n"})
    client.refuse[str(path)] = "The user rejected the edit"
    (obs,) = await run_tool(
        client, root, {"command": "insert", "path": str(path), "insert_line": 1, "new_str": "b"}
    )
    assert obs.is_error
    assert "The user rejected the edit" in obs.text
    assert client.buffers[str(path)] == "a\n" and path.read_text() == "on disk\n"


async def test_a_file_created_in_the_editor_can_be_edited_before_it_is_saved(tmp_path):
    client = EditorClient()
    new = tmp_path / "new.py"
    created, edited, undone = await run_tool(
        client,
        tmp_path,
        {"command": "create", "path": str(new), "file_text": "one\ntwo\n"},
        {"command": "insert", "path": str(new), "insert_line": 1, "new_str": "one and a half"},
        {"command": "undo_edit", "path": str(new)},
    )
    assert not created.is_error and not edited.is_error and not undone.is_error, (
        edited.text,
        undone.text,
    )
    assert edited.new_content == "one\none and a half\ntwo\n"
    assert client.buffers[str(new)] == "one\ntwo\n"
    assert not new.exists()


async def test_crlf_buffers_keep_their_line_endings(project):
    root, path = project
    client = EditorClient({str(path): "a\r\nb\r\n"})
    (obs,) = await run_tool(
        client,
        root,
        {"command": "str_replace", "path": str(path), "old_str": "a\nb", "new_str": "a\nc"},
    )
    assert not obs.is_error, obs.text
    assert client.buffers[str(path)] == "a\r\nc\r\n"


def test_capabilities_choose_the_route():
    class Proxy:
        def __init__(self, read, write):
            from trio_acp import schema

            self.capabilities = schema.ClientCapabilities(
                fs=schema.FileSystemCapabilities(read_text_file=read, write_text_file=write)
            )

    calls = ClientCalls()
    both = EditorFiles.for_client(calls, Proxy(True, True), SESSION)
    assert both.reads_from_editor and both.writes_to_editor
    write_only = EditorFiles.for_client(calls, Proxy(None, True), SESSION)
    assert not write_only.reads_from_editor and write_only.writes_to_editor
    # Reading the buffer and then writing the disk would lose the user's unsaved changes.
    assert EditorFiles.for_client(calls, Proxy(True, None), SESSION) is None
    assert EditorFiles.for_client(calls, Proxy(None, None), SESSION) is None
