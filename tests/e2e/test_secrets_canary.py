"""The agent's own credentials never leave it: a canary key, hunted everywhere.

`trio-acp` runs as an editor runs it (a subprocess on stdio, raw frames) with a unique
random API key (and an AWS secret) in its environment, against the scripted model. The
test then does what a hostile prompt would: the agent's terminal runs `env`, `printenv`,
reads `/proc/self/environ` and its parent's (`/proc/$PPID/environ`, the agent process
itself), and prints the values transformed (`rev`, `base64`) so that output masking alone
cannot hide a leak. The model echoes the key (in its reasoning, its reply split across
stream chunks, a tool call approved "always", and its result), the provider quotes it back
in a 401 and in a 500 that is retried, a settings file carries it into a validation error,
and `/status`, `/rules`, a session/load replay and DEBUG logging to a file all run.
Afterwards every byte the client received (and the streamed text as the client joins it),
what the agent told the model, stderr, the log file and every file under the persistence
directory are searched: the key is in none of them, in any form. Positive controls make
sure each probe really ran.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys

import trio

from trio_acp.testing import Reply, Scenario, ScriptedLLM, ToolCall, scenario_prompt

TIMEOUT = 120
MARKER = "TRIO_ACP_CANARY_MARKER"  # an ordinary variable: tools must still see those


def _terminal(command: str) -> ToolCall:
    return ToolCall("terminal", {"command": command, "summary": "probe", "security_risk": "LOW"})


def _steps(commands: list[str], done: str) -> list[Reply]:
    return [Reply(tool_calls=[_terminal(c)]) for c in commands] + [
        Reply(tool_calls=[ToolCall("finish", {"message": done})])
    ]


PROBES = [
    "env",
    'printenv LLM_API_KEY; printenv LLM_AWS_SECRET_ACCESS_KEY; echo "probe-rev:$(printf %s "$LLM_API_KEY" | rev)"',
    'echo "probe-b64:$(printf %s "$LLM_API_KEY" | base64 -w0)"',
    # The shell's own environment, and the agent's (the shell's parent is the agent process).
    "tr '\\0' '\\n' < /proc/self/environ | rev",
    "tr '\\0' '\\n' < /proc/$PPID/environ | sed 's/^/parent:/' | rev",
    "cat /proc/$PPID/environ",
]


def _forms(value: str) -> dict[str, str]:
    """The value and the transformed forms a tool could print it in."""
    return {
        "plain": value,
        "reversed": value[::-1],
        "base64": base64.b64encode(value.encode()).decode(),
        # a JSON frame with ensure_ascii, or a repr, still holds the plain text; a long
        # enough piece of the random part catches partial masking (e.g. "sk-abc***xyz").
        "core": value[-24:],
        "core-reversed": value[-24:][::-1],
    }


class Wire:
    """Raw JSON lines to and from the agent; answers permission requests with allow_always."""

    def __init__(self, proc: trio.Process) -> None:
        self.proc = proc
        self.received = bytearray()
        self._buffer = b""
        self.frames: list[dict] = []

    async def send(self, frame: dict) -> None:
        await self.proc.stdin.send_all(json.dumps(frame).encode() + b"\n")

    async def receive(self) -> dict:
        while b"\n" not in self._buffer:
            data = await self.proc.stdout.receive_some()
            assert data, "the agent closed stdout"
            self.received += data
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        frame = json.loads(line)
        self.frames.append(frame)
        return frame

    async def request(self, request_id: int, method: str, params: dict) -> dict:
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            frame = await self.receive()
            if frame.get("method") == "session/request_permission":
                await self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": frame["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow_always"}},
                    }
                )
            elif frame.get("id") == request_id and "method" not in frame:
                return frame

    async def prompt(self, request_id: int, sid: str, text: str) -> dict:
        return await self.request(
            request_id,
            "session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
        )

    async def drain(self) -> None:
        while data := await self.proc.stdout.receive_some():
            self.received += data


def _streamed(frames: list[dict]) -> dict[tuple[str, str], str]:
    texts: dict[tuple[str, str], str] = {}
    for frame in frames:
        update = (
            frame.get("params", {}).get("update", {})
            if frame.get("method") == "session/update"
            else {}
        )
        if update.get("sessionUpdate") in ("agent_message_chunk", "agent_thought_chunk"):
            key = (update["sessionUpdate"], update.get("messageId") or "")
            texts[key] = texts.get(key, "") + update["content"].get("text", "")
    return texts


async def test_the_agents_credentials_reach_no_tool_client_log_or_file(tmp_path):
    key = "sk-canary-" + secrets.token_hex(20)
    aws_secret = "aws-canary-" + secrets.token_hex(20)
    home, work, log_file, err_file = (
        tmp_path / "home",
        tmp_path / "work",
        tmp_path / "agent.log",
        tmp_path / "stderr",
    )
    home.mkdir()
    work.mkdir()

    said = f"The key is {key} and the AWS secret is {aws_secret}."
    scenarios = [
        Scenario("probe-env", _steps(PROBES, "Probed."), "hostile environment probes"),
        Scenario(
            "echo-key",
            [
                # Small chunks: the key arrives split across many stream chunks.
                Reply(
                    reasoning=f"I know {key}.",
                    text=said,
                    chunk_size=5,
                    tool_calls=[_terminal(f"echo {key}")],
                ),
                Reply(
                    tool_calls=[ToolCall("finish", {"message": f"Done with {key}."})], chunk_size=5
                ),
            ],
            "the model repeats the key",
        ),
        # Ends like the key begins: held back while it might be the key, then delivered.
        Scenario(
            "almost", [Reply(text=f"Almost: {key[:20]}", chunk_size=3)], "a prefix of the key"
        ),
        Scenario(
            "auth-401",
            [Reply(fault="http401", fault_message=f"Incorrect API key provided: {key}")],
            "401",
        ),
        Scenario(
            "quote-500",
            [Reply(fault="http500", fault_message=f"upstream rejected key {key}")],
            "500",
        ),
    ]
    with ScriptedLLM(scenarios=scenarios) as llm:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "TRIO_ACP_"))}
        env.update(
            LLM_MODEL="openai/scripted",
            LLM_BASE_URL=llm.base_url,
            LLM_API_KEY=key,
            LLM_AWS_SECRET_ACCESS_KEY=aws_secret,
            LLM_NUM_RETRIES="2",  # the 500 is retried once: the retry note quotes the error
            LLM_RETRY_MIN_WAIT="0",
            LLM_RETRY_MAX_WAIT="0",
            LLM_TIMEOUT="30",
            LLM_MAX_INPUT_TOKENS="128000",
            OPENHANDS_PERSISTENCE_DIR=str(home),
            TRIO_ACP_DEFAULT_MODE="always-ask",
            # Warm start is on by default: its server would outlive the test, in the user's
            # default directory (the TRIO_ACP_ variables of tests/conftest.py are gone).
            TRIO_ACP_WARM="0",
            TRIO_ACP_LOG_LEVEL="DEBUG",
            TRIO_ACP_LOG_FILE=str(log_file),
            LOG_LEVEL="DEBUG",  # the SDK's own loggers too
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            OPENHANDS_SUPPRESS_BANNER="1",
            **{MARKER: "visible-to-tools"},
        )
        with open(err_file, "wb") as err, trio.fail_after(TIMEOUT):
            proc = await trio.lowlevel.open_process(
                [sys.executable, "-m", "trio_acp"], stdin=-1, stdout=-1, stderr=err, env=env
            )
            try:
                wire = Wire(proc)
                await wire.request(1, "initialize", {"protocolVersion": 1})
                new = await wire.request(2, "session/new", {"cwd": str(work), "mcpServers": []})
                sid = new["result"]["sessionId"]
                probed = await wire.prompt(3, sid, scenario_prompt("probe-env"))
                echoed = await wire.prompt(4, sid, scenario_prompt("echo-key"))
                almost = await wire.prompt(12, sid, scenario_prompt("almost"))
                almost_text = [t for t in _streamed(wire.frames).values() if t.startswith("Almost")]
                denied = await wire.prompt(5, sid, scenario_prompt("auth-401"))
                failed = await wire.prompt(6, sid, scenario_prompt("quote-500"))
                status = await wire.prompt(7, sid, "/status")
                rules = await wire.prompt(8, sid, "/rules")
                # The history as stored, replayed from disk.
                await wire.request(9, "session/close", {"sessionId": sid})
                loaded = await wire.request(
                    10, "session/load", {"sessionId": sid, "cwd": str(work), "mcpServers": []}
                )
                # Settings that cannot be used, quoting the key in the validation error.
                (home / "agent_settings.json").write_text(
                    json.dumps({"llm": {"model": "openai/scripted", "api_key": key, "seed": key}})
                )
                bad = await wire.request(11, "session/new", {"cwd": str(work), "mcpServers": []})
                await proc.stdin.aclose()
                await wire.drain()
                await proc.wait()
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()

    # Each probe ran and its result reached the client.
    assert probed["result"]["stopReason"] == "end_turn", probed
    assert echoed["result"]["stopReason"] == almost["result"]["stopReason"] == "end_turn"
    assert almost_text == [f"Almost: {key[:20]}"]  # all of it, before the turn's response
    assert "error" in denied and "error" in failed, (denied, failed)
    assert status["result"]["stopReason"] == rules["result"]["stopReason"] == "end_turn"
    assert "result" in loaded, loaded
    assert "error" in bad and "seed" in bad["error"]["message"], bad
    wire_text = wire.received.decode()
    assert f"{MARKER}=visible-to-tools" in wire_text  # `env` ran, and ordinary variables pass
    assert "probe-rev:" in wire_text and "probe-b64:" in wire_text
    # The agent's own environment was read (as root), or could not be (non-dumpable).
    assert (
        f"parent:{MARKER}=visible-to-tools"[::-1] in wire_text or "Permission denied" in wire_text
    )
    assert "attempt 2 of 2" in wire_text  # the retry note (the 500 quoted the key)
    # The key did configure the model.
    assert {r.headers.get("authorization") for r in llm.requests} == {f"Bearer {key}"}
    log_text = log_file.read_text()
    assert " DEBUG " in log_text

    places = {
        "frames to the client": wire_text,
        # Streamed text as the client puts it together: a key split across chunks is in
        # no single frame.
        "streamed text": "\n".join(_streamed(wire.frames).values()),
        # What the agent told the model: tool results, prompts, the system prompt (its own
        # earlier replies come back too, and this test made it write the key there).
        "the model's input": json.dumps(
            [m for r in llm.requests for m in r.messages if m.get("role") != "assistant"]
        ),
        "stderr": err_file.read_text(errors="replace"),
        "log file": log_text,
    }
    # Everything the agent stored (the settings file is the test's own input).
    stored = sorted(p for p in home.rglob("*") if p.is_file() and p.name != "agent_settings.json")
    assert any("events" in p.parts for p in stored)
    for path in stored:
        places[str(path.relative_to(home))] = path.read_bytes().decode(errors="replace")
    leaks = [
        f"{name} ({form}) in {where}"
        for name, value in (("LLM_API_KEY", key), ("LLM_AWS_SECRET_ACCESS_KEY", aws_secret))
        for form, text in _forms(value).items()
        for where, content in places.items()
        if text in content
    ]
    assert leaks == []
    # The key the model repeated was there, masked; the command it wrote with the key in it
    # became an "always" rule, masked too.
    assert "<secret-hidden>" in wire_text
    assert any(
        p.name == "trio_acp_rules.json" and "<secret-hidden>" in p.read_text() for p in stored
    )
