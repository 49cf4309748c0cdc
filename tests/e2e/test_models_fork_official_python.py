"""Model switching, the boolean `stream` option and session/fork under the official Python client.

One agent subprocess: the client advertises boolean config options, switches the model
and streaming, forks the session and loads the fork. Every frame in both directions is
checked against the official JSON Schema (session/fork against the unstable one).
"""

from __future__ import annotations

import asyncio
import sys

import pytest

acp = pytest.importorskip("acp")

from _oh_harness import TIMEOUT, Client, Wire, _prompt, _run, agent_env  # noqa: E402
from acp.schema import (  # noqa: E402
    BooleanConfigOptionCapabilities,
    ClientCapabilities,
    ClientSessionCapabilities,
    Implementation,
    SessionConfigOptionsCapabilities,
    UserMessageChunk,
)

from trio_acp.testing import scenario_prompt  # noqa: E402


async def _scenario(llm, home, ws):
    env = agent_env(llm, home)
    env["TRIO_ACP_MODELS"] = "openai/second-model"
    env["TRIO_ACP_DEFAULT_MODE"] = "always-approve"
    client, wire, out = Client(), Wire(), {}
    async with acp.spawn_agent_process(
        client, sys.executable, "-m", "trio_acp", env=env, transport_kwargs={"stderr": None}
    ) as (conn, _):
        conn._conn.add_observer(wire)
        caps = ClientCapabilities(
            session=ClientSessionCapabilities(
                config_options=SessionConfigOptionsCapabilities(
                    boolean=BooleanConfigOptionCapabilities()
                )
            )
        )
        out["init"] = await asyncio.wait_for(
            conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=caps,
                client_info=Implementation(name="models-fork-e2e", version="0.0.1"),
            ),
            TIMEOUT,
        )
        new = await asyncio.wait_for(conn.new_session(cwd=ws, mcp_servers=[]), TIMEOUT)
        sid = new.session_id
        out["new_options"] = new.config_options
        await _prompt(conn, wire, sid, scenario_prompt("echo", "[word:plover] first"))
        set_model = await conn.set_config_option(
            config_id="model", session_id=sid, value="openai/second-model"
        )
        set_stream = await conn.set_config_option(config_id="stream", session_id=sid, value=False)
        out["after_set"] = (set_model.config_options, set_stream.config_options)
        before = len(llm.requests)
        await _prompt(conn, wire, sid, scenario_prompt("echo", "second"))
        out["switched_request"] = llm.requests[before]

        fork = await asyncio.wait_for(
            conn.fork_session(session_id=sid, cwd=ws, mcp_servers=[]), TIMEOUT
        )
        out["fork"] = fork
        before = len(llm.requests)
        out["fork_reply"] = await _prompt(
            conn, wire, fork.session_id, scenario_prompt("remember", "what?")
        )
        out["fork_request"] = llm.requests[before]
        client.updates.clear()
        await asyncio.wait_for(
            conn.load_session(session_id=fork.session_id, cwd=ws, mcp_servers=[]), TIMEOUT
        )
        out["replayed"] = "".join(
            u.content.text
            for s, u in client.updates
            if s == fork.session_id and isinstance(u, UserMessageChunk)
        )
    out["client"], out["wire"] = client, wire
    return out


def test_model_switch_stream_option_and_fork():
    out = _run(_scenario)
    caps = out["init"].agent_capabilities
    assert caps.session_capabilities.fork is not None and caps.auth.logout is not None
    options = {o.root.id if hasattr(o, "root") else o.id: o for o in out["new_options"]}
    assert set(options) >= {"mode", "model", "stream"}

    def current(option_list, config_id):
        for o in option_list:
            o = getattr(o, "root", o)
            if o.id == config_id:
                return o.current_value
        raise AssertionError(config_id)

    set_model, set_stream = out["after_set"]
    assert current(set_model, "model") == "openai/second-model"
    assert (
        current(set_stream, "stream") is False
        and current(set_stream, "model") == "openai/second-model"
    )
    request = out["switched_request"]
    assert request.body["model"] == "second-model" and request.stream is False

    # The fork keeps the parent's choices and history.
    assert current(out["fork"].config_options, "model") == "openai/second-model"
    assert out["fork_reply"].stop_reason == "end_turn"
    assert out["fork_request"].body["model"] == "second-model"
    assert "plover" in out["fork_request"].body["messages"].__repr__()
    assert "plover" in out["replayed"] and "what?" in out["replayed"]

    errors, checked = out["wire"].schema_errors()
    assert errors == [] and checked > 0
