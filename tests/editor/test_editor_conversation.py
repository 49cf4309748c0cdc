"""A real SDK conversation whose file editor and terminal go through the editor: the
agent's tool threads wait on client answers that Trio carries."""

from __future__ import annotations

import json

import pytest
import trio

from trio_acp import schema
from trio_acp.openhands.editor import workspace as editor_workspace
from trio_acp.openhands.editor.workspace import EditorWorkspace
from trio_acp.testing.editor import SESSION, EditorClient, editor_pair

pytest.importorskip("openhands.sdk.testing")
from openhands.sdk import Agent, Conversation, Message, TextContent, Tool
from openhands.sdk.llm import MessageToolCall
from openhands.sdk.testing import TestLLM


def call(n: int, name: str, args: dict) -> Message:
    tool_call = MessageToolCall(
        id=f"call_{n}", name=name, arguments=json.dumps(args), origin="completion"
    )
    return Message(role="assistant", content=[TextContent(text="")], tool_calls=[tool_call])


async def test_a_conversation_edits_the_buffer_and_runs_in_the_editors_terminal(tmp_path):
    path = tmp_path / "app.py"
    path.write_text("on disk\n")
    client = EditorClient({str(path): "greeting = 'unsaved'\n"})
    llm = TestLLM.from_messages(
        [
            call(1, "file_editor", {"command": "view", "path": str(path)}),
            call(
                2,
                "file_editor",
                {
                    "command": "str_replace",
                    "path": str(path),
                    "old_str": "'unsaved'",
                    "new_str": "'edited'",
                },
            ),
            call(3, "terminal", {"command": "echo ran in the editor"}),
            call(4, "finish", {"message": "done"}),
        ]
    )
    agent = Agent(llm=llm, tools=[Tool(name="terminal"), Tool(name="file_editor")])
    events = []
    posted = []
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        workspace = EditorWorkspace(proxy, SESSION, post_update=posted.append)
        await nursery.start(workspace.calls.run)

        def run() -> None:
            conv = Conversation(
                agent=agent,
                workspace=str(tmp_path),
                callbacks=[events.append, workspace.note_event],
                visualizer=None,
            )
            editor_workspace.attach(conv.id, workspace)
            try:
                conv.send_message("go")
                conv.run()
            finally:
                editor_workspace.detach(conv.id)
                conv.close()

        with trio.fail_after(60):
            await trio.to_thread.run_sync(run)
        workspace.calls.close()

    observations = {
        e.tool_call_id: e.observation for e in events if type(e).__name__ == "ObservationEvent"
    }
    assert "'unsaved'" in observations["call_1"].text  # the view saw the buffer
    assert observations["call_2"].old_content == "greeting = 'unsaved'\n"
    assert client.buffers[str(path)] == "greeting = 'edited'\n"
    assert path.read_text() == "on disk\n"
    assert "ran in the editor" in observations["call_3"].text
    assert [m for m in client.methods() if m.startswith("terminal/")] == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    (announced,) = posted
    assert announced.tool_call_id == "call_3" and announced.content == [
        schema.Terminal(terminal_id="term-1")
    ]
