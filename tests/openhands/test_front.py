"""`initialize` answered before the agent's modules are imported (openhands/front.py).

In a fresh interpreter (what is imported is the point), the server is served on an
in-memory stream: the order of events says what was imported when, never the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from trio_acp.testing import scripted_env

SCRIPT = r"""
import json, sys
import trio, trio.testing

from trio_acp.connection import open_client_connection
from trio_acp.server import serve_stream

events = []
AGENT = "trio_acp.openhands.agent"
events.append(("server imported", AGENT in sys.modules, "trio_acp.openhands.sdk" in sys.modules))


class Client:
    async def session_update(self, params):
        pass

    async def request_permission(self, params):
        raise AssertionError("not asked here")


async def main():
    a, b = trio.testing.memory_stream_pair()
    with trio.fail_after(120):
      async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_stream, a)
        async with open_client_connection(b, Client()) as conn:
            init = await conn.agent.initialize(protocol_version=1)
            events.append(("initialize answered", init.agent_info.name))
            new = await conn.agent.new_session(cwd=sys.argv[1], mcp_servers=[])
            events.append(("session/new answered", AGENT in sys.modules, bool(new.session_id)))
            methods = await conn.agent.list_sessions()
            events.append(("session/list answered", type(methods.sessions).__name__))
        nursery.cancel_scope.cancel()


trio.run(main)
print(json.dumps(events))
"""


def test_initialize_is_answered_before_the_agent_is_imported():
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ)
        env.update(scripted_env("http://127.0.0.1:9/v1"))  # never called
        env.update(OPENHANDS_PERSISTENCE_DIR=home, TRIO_ACP_WARM="0")
        # The front's SignIn answers it: record whether the agent was imported then.
        script = SCRIPT.replace(
            "async def main():",
            "from trio_acp.openhands import sign_in\n"
            "_answer = sign_in.SignIn.initialize\n"
            "def _recording(self, params):\n"
            "    events.append(('initialize computed', AGENT in sys.modules))\n"
            "    return _answer(self, params)\n"
            "sign_in.SignIn.initialize = _recording\n\n"
            "async def main():",
        )
        done = subprocess.run(
            [sys.executable, "-c", script, home],
            env=env,
            capture_output=True,
            timeout=180,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    events = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert events == [
        # Neither the agent nor the SDK door is imported by the server's module.
        ["server imported", False, False],
        ["initialize computed", False],
        ["initialize answered", "trio-acp"],
        # Then the agent serves the rest, forwarded by the front.
        ["session/new answered", True, True],
        ["session/list answered", "list"],
    ]


async def test_only_our_extension_methods_wait_for_the_agent():
    # An extension method not ours is unknown at once, the agent not even wanted; ours
    # (`_trio_acp/...`, the v2 gateway's stop of one tool call) is the agent's.
    import pytest
    import trio

    from trio_acp.credentials import SecretValues
    from trio_acp.openhands.front import FrontAgent
    from trio_acp.openhands.sign_in import SignIn
    from trio_acp.rpc import RequestError

    front = FrontAgent(sign_in=SignIn({}), secrets=SecretValues())
    with pytest.raises(RequestError) as unknown:
        await front.ext_method("_other/thing", {})
    assert unknown.value.code == -32601
    assert not front.needed.is_set()

    class Agent:
        async def ext_method(self, method, params):
            return {"method": method, "params": params}

    front.attach(Agent())  # type: ignore[arg-type]
    with trio.fail_after(5):
        got = await front.ext_method("_trio_acp/stop_tool_call", {"toolCallId": "t"})
    assert got == {"method": "_trio_acp/stop_tool_call", "params": {"toolCallId": "t"}}


async def test_a_client_that_hangs_up_while_the_agent_imports_is_not_kept_waiting(monkeypatch):
    """stdin EOF right after `initialize`, while the agent's modules import: the server
    returns at once and abandons the import (it ran in the Trio thread before, and the EOF
    waited for it). The import is held until the server has returned; what happened first
    is the verdict, never a time."""
    import threading
    from contextlib import asynccontextmanager

    import trio
    import trio.testing

    from trio_acp import server
    from trio_acp.connection import open_client_connection

    events: list[str] = []
    importing, release = threading.Event(), threading.Event()

    @asynccontextmanager
    async def never_opened(**kwargs):
        events.append("agent opened")
        yield None

    def held_import():
        importing.set()
        # Bounded: without the fix this holds the Trio thread, and the test must end.
        events.append("import finished" if release.wait(10) else "import gave up")
        return never_opened, lambda: None

    monkeypatch.setattr(server, "import_agent", held_import)

    class Client:
        async def session_update(self, params):
            pass

        async def request_permission(self, params):
            raise AssertionError("not asked here")

    a, b = trio.testing.memory_stream_pair()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                await server.serve_stream(a)
                events.append("served")
                release.set()

            nursery.start_soon(serve)
            async with open_client_connection(b, Client()) as conn:
                await conn.agent.initialize(protocol_version=1)
                await trio.to_thread.run_sync(importing.wait, 10)
            # The client hung up (its stream closed) while the import is held.
    assert events[0] == "served", events
    assert "agent opened" not in events
