"""One agent-server for all of tests/remote (starting one imports the whole SDK: 10-60 s);
with pytest-xdist, one per worker.

Tests that kill it start it again before they end (same port, key and storage).

The end-to-end files (test_e2e_*.py, helpers in _remote_e2e.py) each get one scripted
model and one `trio-acp --agent-server URL` process (module scope: each start imports the
whole SDK), and a fresh project directory per test.
"""

from __future__ import annotations

import uuid

import pytest
from _remote_e2e import Agent

from trio_acp.testing import ScriptedLLM
from trio_acp.testing.agent_server import AgentServer, AgentServerUnavailable


@pytest.fixture(scope="session")
def server():
    agent_server = AgentServer()
    try:
        agent_server.start()
    except AgentServerUnavailable as exc:
        agent_server.close()
        pytest.skip(f"no agent-server here: {exc}")
    try:
        yield agent_server
    finally:
        agent_server.close()


@pytest.fixture(autouse=True)
def _server_running_after(request: pytest.FixtureRequest):
    """A test that kills the server starts it again before it ends; one that fails before
    that leaves it down, and every later test of this worker (other files too: the files
    are not ordered by area) would fail on a refused connection: start it here then."""
    yield
    server = request.node.funcargs.get("server")
    if isinstance(server, AgentServer) and server.process is None:
        server.start()


@pytest.fixture(scope="module")
def llm():
    with ScriptedLLM() as scripted:
        yield scripted


@pytest.fixture(scope="module")
def agent(llm, server: AgentServer):
    running = Agent(llm, server)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def cwd(server: AgentServer) -> str:
    # The session's directory must exist on the server: the same machine here.
    path = server.workspace / f"project-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    return str(path)
