"""What a prompt's many blocks become, and what a session leaves in the user's HOME.

The real `trio-acp` process (one for the module: the SDK import costs seconds) with a
private HOME holding the user's own `.bashrc` and `.bash_history`:

- adjacent text blocks reach the model as one text part (the SDK copies every part of
  every message on every model call: prompt.py `merge_text`), images in their place, and a
  reloaded session replays that text;
- the terminal tool's shell neither reads nor writes the user's shell history, and nothing
  else appears in HOME (the SDK's LLM profile store follows the persistence directory).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.raw_agent import RawAgent

# The first session/new imports the SDK (seconds; a minute or more on a loaded machine).
pytestmark = pytest.mark.timeout(300)

USER_HISTORY = "make deploy-sentinel-from-user-history\n"
BASHRC = "# the user's own bashrc\n"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


class World:
    def __init__(self, root: Path, llm: ScriptedLLM) -> None:
        self.llm = llm
        self.home, self.persist, self.ws = root / "home", root / "persist", root / "ws"
        for d in (self.home, self.persist, self.ws):
            d.mkdir()
        (self.home / ".bashrc").write_text(BASHRC)
        (self.home / ".bash_history").write_text(USER_HISTORY)
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=str(self.persist),
            HOME=str(self.home),
            LLM_NUM_RETRIES="1",
            LLM_TIMEOUT="120",
            # Images reach the model only if it takes them.
            LLM_CAPABILITY_OVERRIDES='{"supports_vision": true}',
            TRIO_ACP_DEFAULT_MODE="always-approve",
            # The public skills' cache is the SDK's, in HOME whatever the persistence
            # directory (as in the CLI); not what this module is about.
            TRIO_ACP_PUBLIC_SKILLS="0",
        )
        self.agent = RawAgent.spawn(env, cwd=str(self.ws))
        self.agent.initialize()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with ScriptedLLM() as llm:
        w = World(tmp_path_factory.mktemp("blocks-home"), llm)
        try:
            yield w
        finally:
            if w.agent.alive():
                w.agent.close()


def _parts(message: dict) -> list[dict]:
    content = message["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def test_adjacent_text_blocks_reach_the_model_as_one_part(world):
    agent, ws = world.agent, str(world.ws)
    before = [f"b{i}" for i in range(2_000)]
    blocks = [{"type": "text", "text": scenario_prompt("slow", "many", chunks=3, delay_ms=1)}]
    blocks += [{"type": "text", "text": t} for t in before]
    blocks += [
        {"type": "resource_link", "name": "notes.md", "uri": "file:///nowhere/notes.md"},
        {"type": "image", "mimeType": "image/png", "data": PNG},
        {"type": "text", "text": "after the image"},
        {"type": "text", "text": "and the end"},
    ]
    sid = agent.new_session(ws)
    first = len(world.llm.requests)
    reply = agent.prompt(sid, blocks, timeout=240)
    assert reply.get("result", {}).get("stopReason") == "end_turn", reply
    user = [m for m in world.llm.requests[first].body["messages"] if m["role"] == "user"][-1]
    parts = _parts(user)
    assert [p["type"] for p in parts] == ["text", "image_url", "text"]
    head = parts[0]["text"].split("\n")
    assert head[: len(before) + 1] == [blocks[0]["text"], *before]
    assert "notes.md" in head[-1] and len(head) == len(before) + 2
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[2]["text"] == "after the image\nand the end"

    # Reloaded, the session replays the prompt as the model got it: the text, the image.
    assert "result" in agent.request("session/close", {"sessionId": sid})
    start = len(agent.frames)
    loaded = agent.request(
        "session/load", {"sessionId": sid, "cwd": ws, "mcpServers": []}, timeout=120
    )
    assert "result" in loaded, loaded
    chunks = [
        f["params"]["update"]["content"]
        for f in agent.frames[start:]
        if f.get("method") == "session/update"
        and f["params"]["update"].get("sessionUpdate") == "user_message_chunk"
    ]
    assert [c["type"] for c in chunks] == ["text", "image", "text"]
    assert chunks[0]["text"] == parts[0]["text"]
    assert chunks[2]["text"] == "after the image\nand the end"
    assert "result" in agent.request("session/close", {"sessionId": sid})


def test_the_terminal_shell_keeps_no_history_file(world):
    agent = world.agent
    sid = agent.new_session(str(world.ws))
    start = len(agent.frames)
    # The count's own command line must not match itself: the quotes split the word.
    command = 'echo "histfile=<$HISTFILE>"; history | grep -c sentinel-from-user-his"tory"'
    reply = agent.prompt(sid, scenario_prompt("terminal", command=command), timeout=120)
    assert reply.get("result", {}).get("stopReason") == "end_turn", reply
    output = "\n".join(
        str(f["params"]["update"].get("content"))
        for f in agent.frames[start:]
        if f.get("method") == "session/update"
        and f["params"]["update"].get("sessionUpdate") == "tool_call_update"
    )
    assert "histfile=<>" in output, output
    # The user's history was not loaded into the agent's shell.
    assert "\n0\n" in output.replace("\\n", "\n"), output
    assert "result" in agent.request("session/close", {"sessionId": sid})


def test_home_is_left_as_it_was(world):
    # Last: the agent exits, its shells with it (a shell saves its history on exit).
    assert world.agent.close(timeout=60) == 0
    assert (world.home / ".bash_history").read_text() == USER_HISTORY
    assert (world.home / ".bashrc").read_text() == BASHRC
    left = sorted(str(p.relative_to(world.home)) for p in world.home.rglob("*"))
    assert left == [".bash_history", ".bashrc"]
    # The SDK's LLM profile store is in the persistence directory instead.
    assert (world.persist / "profiles").is_dir()
