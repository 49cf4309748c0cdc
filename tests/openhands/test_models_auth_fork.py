"""Model switching, the boolean `stream` option, logout and session/fork, in-process over
raw JSON-RPC frames; every frame the agent sends is checked against the official schema.
"""

from __future__ import annotations

import json
import uuid

import pytest
import trio
import trio.testing

from _inprocess import loader
from trio_acp.connection import open_agent_connection
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.testing import ScriptedLLM, scenario_prompt
from trio_acp.testing.wire_check import FrameChecker

BOOLEAN_CAPS = {"session": {"configOptions": {"boolean": {}}}}


@pytest.fixture(scope="module")
def other_llm():
    # A second model server: an entry with its own base URL must reach this one.
    with ScriptedLLM() as server:
        yield server


class Raw:
    """The client end as raw frames; every frame the agent sends goes through FrameChecker."""

    def __init__(self, stream):
        self.stream, self.buffer = stream, b""
        self.checker = FrameChecker()
        self.frames: list[dict] = []
        self.next_id = 0

    async def send(self, frame):
        self.checker.received(frame)  # the agent received it: remember the id's method
        await self.stream.send_all(json.dumps(frame).encode() + b"\n")

    async def receive(self):
        while b"\n" not in self.buffer:
            data = await self.stream.receive_some()
            if not data:
                raise EOFError("the agent closed the stream")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        frame = json.loads(line)
        assert not self.checker.sent(frame), self.checker.errors
        self.frames.append(frame)
        return frame

    async def call(self, method, params):
        """A request; returns its response frame (updates before it are kept in `frames`)."""
        self.next_id += 1
        rid = self.next_id
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            frame = await self.receive()
            if frame.get("id") == rid and "method" not in frame:
                return frame

    async def result(self, method, params):
        frame = await self.call(method, params)
        assert "result" in frame, frame
        return frame["result"]

    async def initialize(self, caps=None):
        return await self.result(
            "initialize", {"protocolVersion": 1, "clientCapabilities": caps or {}}
        )

    async def new_session(self, cwd):
        return await self.result("session/new", {"cwd": str(cwd), "mcpServers": []})

    async def prompt(self, sid, text):
        start = len(self.frames)
        result = await self.result(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        )
        return result, self.frames[start:]

    async def set_option(self, sid, config_id, value):
        params = {"sessionId": sid, "configId": config_id, "value": value}
        if isinstance(value, bool):
            params["type"] = "boolean"
        return await self.call("session/set_config_option", params)


def options_by_id(options):
    return {o["id"]: o for o in options}


def agent_text(frames) -> str:
    return "".join(
        f["params"]["update"]["content"]["text"]
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def with_raw(env, body):
    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = Raw(client_stream)
    with trio.fail_after(90):
        async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                await body(raw, agent)
                await client_stream.aclose()
    assert raw.checker.errors == []
    assert raw.checker.checked > 0


# --- models --------------------------------------------------------------------------


async def test_model_option_lists_every_configured_model_and_switches_the_llm(
    env, llm, other_llm, tmp_path
):
    home = tmp_path / "home"
    (home / "profiles").mkdir(parents=True)
    # An LLM profile the way the SDK's LLMProfileStore saves one.
    (home / "profiles" / "fast.json").write_text(
        json.dumps(
            {
                "model": "openai/profiled",
                "base_url": llm.base_url,
                "api_key": "profile-key",
                "usage_id": "x",
            }
        )
    )
    no_effort = {"supports_reasoning_effort": False}
    env.update(
        # The default model has no reasoning effort to choose; unknown openai/* models do.
        LLM_CAPABILITY_OVERRIDES=json.dumps(no_effort),
        OTHER_KEY="other-key",
        TRIO_ACP_MODELS=json.dumps(
            [
                "openai/inherits",
                {
                    "id": "elsewhere",
                    "name": "Elsewhere",
                    "model": "openai/remote",
                    "base_url": other_llm.base_url,
                    "api_key_env": "OTHER_KEY",
                    "capability_overrides": no_effort,
                },
                {"model": "openai/thinker"},
            ]
        ),
    )

    async def body(raw, agent):
        await raw.initialize()
        new = await raw.new_session(tmp_path)
        sid = new["sessionId"]
        options = options_by_id(new["configOptions"])
        model = options["model"]
        assert model["category"] == "model" and model["type"] == "select"
        assert model["currentValue"] == "openai/scripted"
        assert [o["value"] for o in model["options"]] == [
            "openai/scripted",
            "profile:fast",
            "openai/inherits",
            "elsewhere",
            "openai/thinker",
        ]
        assert set(options) == {"mode", "model"}

        async def ask(text):
            before = len(llm.requests), len(other_llm.requests)
            result, frames = await raw.prompt(sid, scenario_prompt("echo", text))
            assert result["stopReason"] == "end_turn"
            assert agent_text(frames).endswith(text)
            here, there = llm.requests[before[0] :], other_llm.requests[before[1] :]
            assert len(here) + len(there) == 1
            return (here or there)[0], bool(there)

        async def choose(config_id, value):
            frame = await raw.set_option(sid, config_id, value)
            options = options_by_id(frame["result"]["configOptions"])
            assert options[config_id]["currentValue"] == value
            return options

        first, _ = await ask("one")
        assert first.body["model"] == "scripted" and first.api_key == "scripted"
        assert "reasoning_effort" not in first.body

        # An entry of TRIO_ACP_MODELS that names only a model: the default's connection.
        # This model has a reasoning effort: the option appears, at "high".
        options = await choose("model", "openai/inherits")
        assert set(options) == {"mode", "model", "thought_level"}  # the complete list
        assert options["thought_level"]["currentValue"] == "high"
        await choose("thought_level", "low")
        request, remote = await ask("two")
        assert (request.body["model"], request.api_key, remote) == ("inherits", "scripted", False)
        assert request.body.get("reasoning_effort") == "low"
        # The conversation goes on with the new model: it sees the earlier turns.
        assert "one" in json.dumps(request.messages)

        # Its own base URL and key (from the variable it names): the other server. No
        # reasoning effort for this one: the option goes.
        options = await choose("model", "elsewhere")
        assert set(options) == {"mode", "model"}
        request, remote = await ask("three")
        assert (request.body["model"], request.api_key, remote) == ("remote", "other-key", True)
        assert "reasoning_effort" not in request.body

        # A profile, used as saved.
        await choose("model", "profile:fast")
        request, remote = await ask("four")
        assert (request.body["model"], request.api_key, remote) == (
            "profiled",
            "profile-key",
            False,
        )

        # Another model with an effort: the chosen effort carries over.
        await choose("model", "openai/thinker")
        await choose("thought_level", "medium")
        options = await choose("model", "openai/inherits")
        assert options["thought_level"]["currentValue"] == "medium"
        request, _ = await ask("five")
        assert (request.body["model"], request.body.get("reasoning_effort")) == (
            "inherits",
            "medium",
        )

        # Unknown ids and non-string values: invalid params, with the list.
        for bad in ["no/such-model", True]:
            error = (await raw.set_option(sid, "model", bad))["error"]
            assert error["code"] == -32602
            assert "profile:fast" in error["message"] and "openai/scripted" in error["message"]
        # Still on the last good choice.
        request, _ = await ask("six")
        assert request.body["model"] == "inherits"
        _, frames = await raw.prompt(sid, "/status")
        assert "openai/inherits" in agent_text(frames)


async def test_a_malformed_model_list_is_reported_at_session_new(env, tmp_path):
    env["TRIO_ACP_MODELS"] = '[{"name": "no model"}]'

    async def body(raw, agent):
        await raw.initialize()
        error = (await raw.call("session/new", {"cwd": str(tmp_path), "mcpServers": []}))["error"]
        assert error["code"] == -32000 and "TRIO_ACP_MODELS[0]" in error["message"]

    await with_raw(env, body)


# --- the boolean `stream` option --------------------------------------------------------


async def test_stream_option_only_for_clients_that_take_booleans_and_it_switches_streaming(
    env, llm, tmp_path
):
    async def body(raw, agent):
        await raw.initialize(BOOLEAN_CAPS)
        new = await raw.new_session(tmp_path)
        sid = new["sessionId"]
        stream = options_by_id(new["configOptions"])["stream"]
        assert stream["type"] == "boolean" and stream["currentValue"] is True

        before = len(llm.requests)
        result, frames = await raw.prompt(sid, scenario_prompt("echo", "streamed"))
        assert llm.requests[before].stream is True
        assert agent_text(frames).endswith("streamed")

        set_ = await raw.set_option(sid, "stream", False)
        options = options_by_id(set_["result"]["configOptions"])
        assert options["stream"]["currentValue"] is False and {"mode", "model"} <= set(options)
        before = len(llm.requests)
        result, frames = await raw.prompt(sid, scenario_prompt("echo", "whole reply"))
        assert result["stopReason"] == "end_turn"
        assert llm.requests[before].stream is False
        assert agent_text(frames).endswith("whole reply")

        error = (await raw.set_option(sid, "stream", "no"))["error"]
        assert error["code"] == -32602

    await with_raw(env, body)


async def test_no_boolean_option_for_clients_that_did_not_opt_in(env, tmp_path):
    async def body(raw, agent):
        await raw.initialize({"fs": {"readTextFile": False}})
        new = await raw.new_session(tmp_path)
        assert all(o["type"] != "boolean" for o in new["configOptions"])
        set_ = await raw.set_option(new["sessionId"], "mode", "always-ask")
        assert all(o["type"] != "boolean" for o in set_["result"]["configOptions"])
        updates = [f["params"]["update"] for f in raw.frames if f.get("method") == "session/update"]
        for update in updates:
            if update["sessionUpdate"] == "config_option_update":
                assert all(o["type"] != "boolean" for o in update["configOptions"])

    await with_raw(env, body)


# --- auth methods and logout ----------------------------------------------------------


async def test_terminal_auth_method_only_for_clients_that_support_it(env, tmp_path):
    async def body(raw, agent):
        init = await raw.initialize()
        assert init["agentCapabilities"]["auth"] == {"logout": {}, "status": {}}
        assert [m.get("type") for m in init["authMethods"]] == [None]  # the agent method only
        for caps in ({"auth": {"terminal": False}}, {"auth": {}}):
            init = await raw.initialize(caps)
            assert all(m.get("type") != "terminal" for m in init["authMethods"])
        init = await raw.initialize({"auth": {"terminal": True}})
        [terminal] = [m for m in init["authMethods"] if m.get("type") == "terminal"]
        assert terminal["args"] == ["--setup"]
        # The client runs it in a terminal; it is never passed to authenticate.
        error = (await raw.call("authenticate", {"methodId": terminal["id"]}))["error"]
        assert error["code"] == -32602

    await with_raw(env, body)


async def test_logout_forgets_the_credentials_until_the_user_configures_again(env, llm, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    settings = home / "agent_settings.json"
    settings.write_text(
        json.dumps({"llm": {"model": "openai/scripted", "base_url": llm.base_url, "api_key": "k"}})
    )
    for key in ("LLM_MODEL", "LLM_BASE_URL", "LLM_API_KEY"):
        env.pop(key)

    async def body(raw, agent):
        init = await raw.initialize()
        method = init["authMethods"][0]["id"]
        sid = (await raw.new_session(tmp_path))["sessionId"]
        result, _ = await raw.prompt(sid, scenario_prompt("echo", "before"))
        assert result["stopReason"] == "end_turn"

        assert await raw.result("logout", {}) == {}
        # Live sessions held the key: they are gone (their history stays on disk).
        error = (
            await raw.call(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
            )
        )["error"]
        assert error["code"] == -32002
        for method_name, params in [
            ("session/new", {"cwd": str(tmp_path), "mcpServers": []}),
            ("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []}),
            ("session/resume", {"sessionId": sid, "cwd": str(tmp_path)}),
            ("session/fork", {"sessionId": sid, "cwd": str(tmp_path)}),
        ]:
            error = (await raw.call(method_name, params))["error"]
            assert error["code"] == -32000 and "logged out" in error["message"], method_name
        # Listing needs no credentials, and the user's settings file is left alone.
        listed = await raw.result("session/list", {})
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]
        assert json.loads(settings.read_text())["llm"]["api_key"] == "k"

        # Configuring again (the file is written, even with the same content) logs back in.
        text = settings.read_text()
        settings.unlink()
        settings.write_text(text)
        again = await raw.new_session(tmp_path)
        assert again["sessionId"]

        # Or authenticate with the advertised method.
        await raw.result("logout", {})
        assert (await raw.call("session/new", {"cwd": str(tmp_path), "mcpServers": []}))["error"][
            "code"
        ] == -32000
        assert await raw.result("authenticate", {"methodId": method}) == {}
        sid = (await raw.new_session(tmp_path))["sessionId"]
        result, _ = await raw.prompt(sid, scenario_prompt("echo", "after"))
        assert result["stopReason"] == "end_turn"

    await with_raw(env, body)


# --- session/fork ---------------------------------------------------------------------


def replayed(frames, kind):
    return "".join(
        f["params"]["update"]["content"]["text"]
        for f in frames
        if f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] == kind
    )


async def test_fork_has_the_parents_history_and_goes_its_own_way(env, llm, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()

    async def body(raw, agent):
        init = await raw.initialize()
        assert init["agentCapabilities"]["sessionCapabilities"]["fork"] == {}
        parent = (await raw.new_session(tmp_path))["sessionId"]
        await raw.prompt(parent, scenario_prompt("terminal", "Say [word:heron] hello"))
        await raw.set_option(parent, "mode", "always-ask")

        fork = await raw.result(
            "session/fork", {"sessionId": parent, "cwd": str(ws), "mcpServers": []}
        )
        child = fork["sessionId"]
        assert child != parent
        # The live parent's choices carry over.
        assert fork["modes"]["currentModeId"] == "always-ask"
        await raw.set_option(child, "mode", "always-approve")

        # The fork's model sees the parent's history.
        before = len(llm.requests)
        result, frames = await raw.prompt(child, scenario_prompt("remember", "[word:egret]"))
        assert result["stopReason"] == "end_turn"
        assert "You said earlier: heron" in agent_text(frames)
        assert "heron" in json.dumps(llm.requests[before].messages)

        # The parent did not see the fork's prompt.
        await raw.set_option(parent, "mode", "always-approve")
        before = len(llm.requests)
        await raw.prompt(parent, scenario_prompt("echo", "parent again"))
        assert "egret" not in json.dumps(llm.requests[before].messages)

        # Both are listed; the fork under its own cwd, titled after the parent.
        listed = {s["sessionId"]: s for s in (await raw.result("session/list", {}))["sessions"]}
        assert set(listed) == {parent, child}
        assert listed[child]["cwd"] == str(ws) and listed[child]["title"] == "Say hello (fork)"

        # Loading the fork replays the parent's history, then its own.
        start = len(raw.frames)
        await raw.result("session/load", {"sessionId": child, "cwd": str(ws), "mcpServers": []})
        users = replayed(raw.frames[start:], "user_message_chunk")
        assert "heron" in users and "egret" in users and "parent again" not in users
        start = len(raw.frames)
        await raw.result(
            "session/load", {"sessionId": parent, "cwd": str(tmp_path), "mcpServers": []}
        )
        users = replayed(raw.frames[start:], "user_message_chunk")
        assert "heron" in users and "parent again" in users and "egret" not in users

        # Errors: unknown parent, relative cwd, a system prompt we did not advertise.
        for params, code in [
            ({"sessionId": "00000000-0000-0000-0000-000000000000", "cwd": str(ws)}, -32002),
            ({"sessionId": "../x", "cwd": str(ws)}, -32002),
            ({"sessionId": parent, "cwd": "relative"}, -32602),
            (
                {
                    "sessionId": parent,
                    "cwd": str(ws),
                    "systemPrompt": {"mode": "append", "content": []},
                },
                -32602,
            ),
        ]:
            assert (await raw.call("session/fork", params))["error"]["code"] == code

    await with_raw(env, body)


async def test_fork_of_a_session_that_is_not_open(env, llm, tmp_path):
    # Agent 1 makes the session; agent 2 (a new process, same store) forks it unopened.
    async def make(raw, agent):
        await raw.initialize()
        sid = (await raw.new_session(tmp_path))["sessionId"]
        await raw.prompt(sid, scenario_prompt("echo", "[word:ibis] first"))
        made.append(sid)

    made: list[str] = []
    await with_raw(env, make)

    async def fork(raw, agent):
        await raw.initialize()
        child = (await raw.result("session/fork", {"sessionId": made[0], "cwd": str(tmp_path)}))[
            "sessionId"
        ]
        assert made[0] not in agent._sessions  # the parent was not opened as a session
        result, frames = await raw.prompt(child, scenario_prompt("remember", "again"))
        assert "You said earlier: ibis" in agent_text(frames)

    await with_raw(env, fork)


async def test_an_action_left_waiting_for_approval_is_not_run_by_a_fork(env, tmp_path):
    # Agent 1 stops while asking permission (its conversation on disk: waiting for
    # confirmation); agent 2 forks that session and prompts the fork in always-approve
    # mode. The fork starts idle, so without a rejection its next run would execute the
    # unapproved action.
    from trio_acp import schema
    from trio_acp.testing.pair import open_in_memory_pair

    marker = tmp_path / "never-made"
    asked = trio.Event()

    class Hanging:
        async def session_update(self, params):
            pass

        async def request_permission(self, params):
            asked.set()
            await trio.sleep_forever()

    ask_env = {**env, "TRIO_ACP_DEFAULT_MODE": "always-ask"}
    with trio.fail_after(90):
        async with (
            open_openhands_agent(env=ask_env, sdk_loader=loader()) as a1,
            open_openhands_agent(env=env, sdk_loader=loader()) as a2,
        ):
            async with open_in_memory_pair(a1, Hanging()) as (_, c1):
                await c1.agent.initialize(protocol_version=1)
                sid = (await c1.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(
                        lambda: c1.agent.prompt(
                            session_id=sid,
                            prompt=[
                                schema.TextContent(
                                    text=scenario_prompt("terminal", command=f"touch {marker}")
                                )
                            ],
                        )
                    )
                    await asked.wait()

                    agent_stream, client_stream = trio.testing.memory_stream_pair()
                    raw = Raw(client_stream)
                    async with open_agent_connection(agent_stream, a2):
                        await raw.initialize()
                        child = (
                            await raw.result(
                                "session/fork", {"sessionId": sid, "cwd": str(tmp_path)}
                            )
                        )["sessionId"]
                        result, _ = await raw.prompt(child, scenario_prompt("echo", "go on"))
                        assert result["stopReason"] == "end_turn"
                        await client_stream.aclose()
                    assert raw.checker.errors == []
                    nursery.cancel_scope.cancel()
    assert not marker.exists()


# --- the model list (pure) -------------------------------------------------------------


def test_model_list_inheritance_rules(tmp_path):
    from trio_acp.openhands.setup.models import model_choices
    from trio_acp.openhands.setup.settings import SettingsError, load_settings

    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "good.json").write_text(json.dumps({"model": "anthropic/p"}))
    (tmp_path / "profiles" / ".hidden.json").write_text(
        json.dumps({"model": "x/y"})
    )  # not a profile name
    (tmp_path / "profiles" / "broken.json").write_text("{nope")
    base = {
        "OPENHANDS_PERSISTENCE_DIR": str(tmp_path),
        "LLM_MODEL": "openai/main",
        "LLM_API_KEY": "main-key",
        "LLM_BASE_URL": "http://proxy/v1",
        "LLM_NUM_RETRIES": "3",
        "LLM_CAPABILITY_OVERRIDES": '{"supports_vision": true}',
    }

    def choices(models):
        env = {**base, "TRIO_ACP_MODELS": models}
        return {c.id: c for c in model_choices(load_settings(env), env)}

    listed = choices("openai/a, openai/b ,openai/main")
    assert list(listed) == ["openai/main", "profile:good", "openai/a", "openai/b"]  # first id wins
    a = listed["openai/a"].llm_fields({})
    # Same connection as the default; nothing about the default's model.
    assert (a["model"], a["api_key"], a["base_url"], a["num_retries"]) == (
        "openai/a",
        "main-key",
        "http://proxy/v1",
        "3",
    )
    assert "capability_overrides" not in a

    listed = choices(
        json.dumps(
            [
                {"model": "anthropic/c", "base_url": "http://elsewhere/v1"},
                {"id": "k", "model": "openai/k", "api_key_env": "K_KEY"},
            ]
        )
    )
    c = listed["anthropic/c"].llm_fields({})
    # Its own endpoint: the default's key is not sent there.
    assert c["base_url"] == "http://elsewhere/v1" and "api_key" not in c and c["num_retries"] == "3"
    k = listed["k"]
    assert k.llm_fields({"K_KEY": "kk"})["api_key"] == "kk" and "base_url" not in k.llm_fields(
        {"K_KEY": "kk"}
    )
    with pytest.raises(SettingsError, match="K_KEY"):
        k.llm_fields({})

    for bad in ['[{"name": "x"}]', "[1]", "[not json", '[{"model": "m", "id": ""}]']:
        with pytest.raises(SettingsError, match="TRIO_ACP_MODELS"):
            choices(bad)


async def test_concurrent_model_and_stream_switches_both_apply(env, llm, tmp_path):
    # Two set_config_option requests in flight at once: each LLM switch builds on the
    # one before, so neither undoes the other.
    env["TRIO_ACP_MODELS"] = "openai/next"

    async def body(raw, agent):
        await raw.initialize(BOOLEAN_CAPS)
        sid = (await raw.new_session(tmp_path))["sessionId"]
        for rid, config_id, value in [(101, "model", "openai/next"), (102, "stream", False)]:
            params = {"sessionId": sid, "configId": config_id, "value": value}
            if isinstance(value, bool):
                params["type"] = "boolean"
            await raw.send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "session/set_config_option",
                    "params": params,
                }
            )
        answered = set()
        while answered != {101, 102}:
            frame = await raw.receive()
            if frame.get("id") in (101, 102):
                assert "result" in frame, frame
                answered.add(frame["id"])
        before = len(llm.requests)
        await raw.prompt(sid, scenario_prompt("echo", "both"))
        request = llm.requests[before]
        assert (request.body["model"], request.stream) == ("next", False)

    await with_raw(env, body)


async def test_a_session_starting_when_logout_comes_is_not_kept(env, tmp_path):
    # session/new is answered before the SDK's import is over, its conversation built once
    # it is (sessions/deferred_build.py); a logout arrives meanwhile: the session being
    # built must not outlive the logout with the key in its LLM.
    release = trio.Event()

    class SlowLoader:
        ready = False

        async def get(self):
            await release.wait()
            return await loader().get()

    agent_stream, client_stream = trio.testing.memory_stream_pair()
    raw = Raw(client_stream)
    with trio.fail_after(60):
        async with open_openhands_agent(env=env, sdk_loader=SlowLoader()) as agent:
            async with open_agent_connection(agent_stream, agent):
                await raw.initialize()
                await raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": "new",
                        "method": "session/new",
                        "params": {"cwd": str(tmp_path), "mcpServers": []},
                    }
                )
                frame = await raw.receive()
                assert frame["id"] == "new" and "result" in frame
                sid = frame["result"]["sessionId"]
                session = agent._sessions[uuid.UUID(sid)]
                await trio.testing.wait_all_tasks_blocked()
                await raw.send({"jsonrpc": "2.0", "id": "out", "method": "logout", "params": {}})
                while (frame := await raw.receive()).get("id") != "out":
                    pass  # the session's own updates
                assert agent._sessions == {}
                release.set()
                await trio.testing.wait_all_tasks_blocked()
                assert session.conversation is None  # never built: no LLM holds the key
                await raw.send(
                    {
                        "jsonrpc": "2.0",
                        "id": "p",
                        "method": "session/prompt",
                        "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]},
                    }
                )
                while (frame := await raw.receive()).get("id") != "p":
                    pass
                assert frame["error"]["code"] == -32002
                await client_stream.aclose()
    assert raw.checker.errors == []
