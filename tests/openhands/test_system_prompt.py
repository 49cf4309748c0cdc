"""Client system prompts (`systemPrompt` on session/new, load, resume and fork): the text
reaches the scripted model's system message; what cannot be honoured is refused."""

from __future__ import annotations

import json

from test_models_auth_fork import with_raw

from trio_acp.testing import scenario_prompt


def system_text(request) -> str:
    """The system message of a recorded model request, as one string."""
    first = request.messages[0]
    assert first["role"] == "system"
    return json.dumps(first["content"])


def prompt(mode: str, text: str) -> dict:
    return {"mode": mode, "content": [{"type": "text", "text": text}]}


async def new(raw, cwd, system_prompt=None):
    params = {"cwd": str(cwd), "mcpServers": []}
    if system_prompt is not None:
        params["systemPrompt"] = system_prompt
    return await raw.call("session/new", params)


async def test_append_reaches_the_system_message_after_our_instructions(env, llm, tmp_path):
    async def body(raw, agent):
        init = await raw.initialize()
        caps = init["agentCapabilities"]["sessionCapabilities"]
        assert caps["systemPrompt"] == {"mode": {"override": {}}}
        sid = (await new(raw, tmp_path, prompt("append", "Always answer like a heron.")))["result"][
            "sessionId"
        ]
        before = len(llm.requests)
        result, _ = await raw.prompt(sid, scenario_prompt("echo", "hi"))
        assert result["stopReason"] == "end_turn"
        system = system_text(llm.requests[before])
        assert "Always answer like a heron." in system
        # Appended: the SDK's own instructions are still there, and the user turn is not
        # where the text went.
        assert "OpenHands" in system
        assert "heron" not in json.dumps(llm.requests[before].messages[1:])

        # A load or resume with the same prompt is accepted; with another, refused.
        for method in ("session/load", "session/resume"):
            same = {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}
            ok = await raw.call(
                method, {**same, "systemPrompt": prompt("append", "Always answer like a heron.")}
            )
            assert "result" in ok, ok
            other = await raw.call(method, {**same, "systemPrompt": prompt("append", "Be a crow.")})
            assert other["error"]["code"] == -32602
            assert "new session" in json.dumps(other["error"])
        # The session still runs with its prompt after the refused load.
        before = len(llm.requests)
        await raw.prompt(sid, scenario_prompt("echo", "again"))
        assert "heron" in system_text(llm.requests[before])

        # A fork keeps its parent's prompt (and takes it again, but not another one).
        fork = await raw.call(
            "session/fork",
            {
                "sessionId": sid,
                "cwd": str(tmp_path),
                "mcpServers": [],
                "systemPrompt": prompt("append", "Always answer like a heron."),
            },
        )
        child = fork["result"]["sessionId"]
        before = len(llm.requests)
        await raw.prompt(child, scenario_prompt("echo", "fork"))
        assert "heron" in system_text(llm.requests[before])
        refused = await raw.call(
            "session/fork",
            {"sessionId": sid, "cwd": str(tmp_path), "systemPrompt": prompt("append", "crow")},
        )
        assert refused["error"]["code"] == -32602

    await with_raw(env, body)


async def test_override_replaces_the_default_instructions(env, llm, tmp_path):
    async def body(raw, agent):
        await raw.initialize()
        plain = (await new(raw, tmp_path))["result"]["sessionId"]
        before = len(llm.requests)
        await raw.prompt(plain, scenario_prompt("echo", "hi"))
        default = system_text(llm.requests[before])

        sid = (await new(raw, tmp_path, prompt("override", "You are Egret, terse.")))["result"][
            "sessionId"
        ]
        before = len(llm.requests)
        result, _ = await raw.prompt(sid, scenario_prompt("echo", "hi"))
        assert result["stopReason"] == "end_turn"
        system = system_text(llm.requests[before])
        assert "You are Egret, terse." in system
        # The built-in instructions' opening is gone; the working directory (dynamic
        # context) is still given.
        assert default[:200] not in system
        assert str(tmp_path) in system

    await with_raw(env, body)


async def test_what_cannot_be_honoured_is_refused_and_no_session_is_made(env, llm, tmp_path):
    async def body(raw, agent):
        await raw.initialize()
        cases = [
            ({"mode": "_replace_all", "content": [{"type": "text", "text": "x"}]}, "mode"),
            ({"mode": "append", "content": []}, "empty"),
            (
                {
                    "mode": "append",
                    "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}],
                },
                "ImageContent",
            ),
            ({"mode": "append", "content": [{"type": "hologram", "x": 1}]}, "hologram"),
        ]
        for system_prompt, named in cases:
            answer = await new(raw, tmp_path, system_prompt)
            assert answer["error"]["code"] == -32602, answer
            assert named in json.dumps(answer["error"]), answer
        listed = await raw.result("session/list", {})
        assert listed["sessions"] == []

    await with_raw(env, body)
