"""The SDK's MCP client, one per server, for `setup/mcp_startup.py` (which says why).

Built and connected with the helpers of the SDK's own `create_mcp_tools`
(`_prepare_mcp_config`, `_ToolListChangedHandler`, `_connect_and_list_tools`: private, listed
in reliance.py). Imports the SDK: imported inside the functions that need it, after the load.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mcp.types
from openhands.sdk.mcp.client import MCPClient
from openhands.sdk.mcp.config import MCPServer
from openhands.sdk.mcp.tool import MCPToolDefinition
from openhands.sdk.mcp.utils import (
    _connect_and_list_tools,
    _prepare_mcp_config,
    _ToolListChangedHandler,
    log_handler,
)

from trio_acp.openhands.translate.shapes import PassedOn


def connect(client: MCPClient, timeout: float) -> None:
    """Connect `client` and list its tools, within `timeout` s; blocking (its own thread)."""
    client.call_async_from_sync(_connect_and_list_tools, timeout=timeout, client=client)


def server_client(
    name: str,
    server: MCPServer,
    *,
    prefixed: bool,
    on_tools_changed: Callable[[Sequence[MCPToolDefinition]], None] | None,
    on_tools_reconciled: Callable[[MCPClient, Sequence[MCPToolDefinition]], None] | None,
) -> MCPClient:
    """One server's client, built as the SDK's `create_mcp_tools` builds its one client."""

    class Namespaced(MCPClient):
        """A server's tools as `<server>_<tool>`: the names the SDK's combined client gives
        them when there is more than one server."""

        prefix = f"{name}_"

        async def list_tools(self, *args: PassedOn, **kwargs: PassedOn) -> list[mcp.types.Tool]:
            tools = await super().list_tools(*args, **kwargs)
            return [tool.model_copy(update={"name": self.prefix + tool.name}) for tool in tools]

        async def call_tool_mcp(
            self, name: str, *args: PassedOn, **kwargs: PassedOn
        ) -> mcp.types.CallToolResult:
            return await super().call_tool_mcp(name.removeprefix(self.prefix), *args, **kwargs)

    config = _prepare_mcp_config({name: server})
    handler = _ToolListChangedHandler(client=None, on_tools_changed=on_tools_changed)  # type: ignore[arg-type]
    cls = Namespaced if prefixed else MCPClient
    client = cls(config, log_handler=log_handler, message_handler=handler)
    handler._client = client
    client._tools_reconciled_callback = on_tools_reconciled
    return client
