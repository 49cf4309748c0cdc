"""The agent's key printed wrapped in base64 or in rot13 (issue 23, 4b): masked in what the
client is sent and in the conversation's event files, through the whole agent, as the
shell prints them (`base64` wraps at 76 characters, `base64 -w 64` as `openssl base64`
does, `tr` for rot13). The file is trio-acp's own `agent_settings.json`, reached by a path
the command builds, which the ask-before-reading check does not see (README.md, "Your key
stays with the agent"): what it prints is masked all the same. The masking itself:
tests/test_credentials.py."""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import re
import secrets
import shutil

import pytest
import trio

from _inprocess import RecordingClient, agent_env, loader
from trio_acp import openhands, schema
from trio_acp.credentials import MASK
from trio_acp.testing import Reply, Scenario, ScriptedLLM, ToolCall, scenario_prompt

pytestmark = pytest.mark.timeout(180)


def _flat(text: str) -> str:
    """`text` without line ends, raw or escaped in JSON: a wrapped form reads whole."""
    for end in ("\\r", "\\n", "\r", "\n"):
        text = text.replace(end, "")
    return text


def _decoded(text: str) -> bytes:
    """Every run of base64 characters in `text`, decoded at each of its 4 alignments."""
    out = []
    for run in re.findall(r"[A-Za-z0-9+/]{16,}", text):
        for start in range(4):
            piece = run[start:]
            try:
                out.append(base64.b64decode(piece[: len(piece) // 4 * 4]))
            except binascii.Error:
                continue
    return b"\0".join(out)


class AllowingClient(RecordingClient):
    """Allows what it is asked (whether it is asked is not the point here)."""

    async def request_permission(self, params):
        option = next(o for o in params.options if o.kind == "allow_once")
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id=option.option_id)
        )


@pytest.mark.skipif(shutil.which("base64") is None, reason="no base64 command")
async def test_a_key_wrapped_in_base64_or_in_rot13_reaches_neither_client_nor_event_files(
    tmp_path,
):
    key = "sk-wrap-" + secrets.token_hex(20)
    home = tmp_path / "home"
    home.mkdir()
    # The key starts at byte 21: its base64 crosses the first line end at 64 and at 76.
    (home / "agent_settings.json").write_text('{"llm": {"api_key": "' + key + '"}}\n')
    command = (
        "f=home/agent_sett''ings.json; cat $f; base64 $f; base64 -w 64 $f; "
        "tr A-Za-z N-ZA-Mn-za-m < $f; base64 $f | tr -d '\\n' | fold -w 76 | sed 's/$/\\r/'"
    )
    scenario = Scenario(
        "print-encoded",
        [
            Reply(tool_calls=[ToolCall("terminal", {"command": command, "security_risk": "LOW"})]),
            Reply(tool_calls=[ToolCall("finish", {"message": "Done."})]),
        ],
        "the model prints a file that holds the key, encoded",
    )
    client = AllowingClient()
    with ScriptedLLM(scenarios=[scenario]) as llm:
        env = agent_env(llm, home, LLM_API_KEY=key)
        with trio.fail_after(150):
            async with openhands.open_openhands(client, env=env, sdk_loader=loader()) as agent:
                await agent.initialize(protocol_version=1)
                sid = (await agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                reply = await agent.prompt(
                    session_id=sid,
                    prompt=[schema.TextContent(text=scenario_prompt("print-encoded"))],
                )
    assert reply.stop_reason == "end_turn"
    sent = json.dumps([schema.to_wire(u) for u in client.updates])
    events = [p.read_text() for p in home.rglob("events/*.json")]
    assert any("agent_sett" in e for e in events), "no event files where expected"
    for where, text in [("the client", sent), *(("an event file", e) for e in events)]:
        flat = _flat(text)
        assert key not in flat and codecs.encode(key, "rot13") not in flat, where
        # Not even a third of the key decodes from what is left.
        assert key[8:22].encode() not in _decoded(flat), where
    assert sent.count(MASK) >= 5  # the file, its three encodings, and the CRLF lines
