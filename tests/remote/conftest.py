"""One agent-server for all of tests/remote (starting one imports the whole SDK: 10-60 s).

Tests that kill it start it again before they end (same port, key and storage).
"""

from __future__ import annotations

import pytest

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
