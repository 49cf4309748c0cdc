"""The MCP start-up's bound (mcp_startup.py); the start-up itself is tested on real servers
in test_notices_in_process.py."""

from __future__ import annotations

from trio_acp.openhands.setup.mcp_startup import DEFAULT_MCP_TIMEOUT, MCP_TIMEOUT_VAR, mcp_timeout


def test_the_bound_comes_from_the_environment():
    assert mcp_timeout({}) == DEFAULT_MCP_TIMEOUT == 10
    assert mcp_timeout({MCP_TIMEOUT_VAR: " 2.5 "}) == 2.5
    for bad in ("", "soon", "0", "-3", "inf", "nan"):
        assert mcp_timeout({MCP_TIMEOUT_VAR: bad}) == DEFAULT_MCP_TIMEOUT
