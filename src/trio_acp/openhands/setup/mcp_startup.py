"""Starting a session's MCP servers: bounded, each on its own, every failure named.

The SDK starts a conversation's MCP servers when the agent is first made ready
(`_ensure_agent_ready`, under the conversation's state lock), through a provider it takes as
`mcp_tool_provider`. Its default connects all the servers through one client and gives them
30 s together: a stdio server that never answers `initialize` held the first prompt (and a
cancel of it) for half a minute, took every other server's tools with it, and what failed
was only in the log. `McpStartup` is the provider trio-acp gives it instead:

- **Bounded**: every server gets `TRIO_ACP_MCP_TIMEOUT` seconds (default 10) to connect
  and list its tools; the start-up returns then, whatever is still starting. A server given
  up on is closed in the background (its process stopped), never waited for.
- **Each on its own**: the servers start in parallel, one client each, so one that hangs
  or fails costs only its own tools. Tool names stay the SDK's: with more than one server
  configured, a server's tools are `<server>_<tool>` (its client adds and strips the prefix),
  as the SDK's combined client names them, so conversations move between the OpenHands CLI
  and trio-acp with the same tools.
- **Named**: `failures` says which server did not start and why; the session tells the
  client (`notices.mcp_failure_notices`).

Never called on the Trio thread (the SDK calls it from a worker or the loop thread).
The SDK helpers used to build one client are its own `create_mcp_tools`'s
(`sdk/mcp_clients.py`; `sdk/reliance.py` lists them).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from trio_acp.openhands.errors import describe

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import MCPClient, MCPServer, MCPToolDefinition

log = logging.getLogger(__name__)

MCP_TIMEOUT_VAR = "TRIO_ACP_MCP_TIMEOUT"
DEFAULT_MCP_TIMEOUT = 10.0


def mcp_timeout(env: Mapping[str, str] | None = None) -> float:
    """Seconds each MCP server has to start: `$TRIO_ACP_MCP_TIMEOUT`, else 10."""
    raw = ((os.environ if env is None else env).get(MCP_TIMEOUT_VAR) or "").strip()
    if not raw:
        return DEFAULT_MCP_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        log.warning(
            "%s=%r is not a number of seconds; using %g", MCP_TIMEOUT_VAR, raw, DEFAULT_MCP_TIMEOUT
        )
        return DEFAULT_MCP_TIMEOUT
    return value


@attrs.frozen
class McpStartFailure:
    """An MCP server that did not start, and why (one line)."""

    server: str
    reason: str


@attrs.define
class StartedTools:
    """What the SDK takes from a provider: the tools of the servers that started."""

    tools: list[MCPToolDefinition]


class _Start:
    """One server's start, on a thread of its own; abandoned by `McpStartup` at its bound."""

    def __init__(self, name: str, client: MCPClient, wake: threading.Event) -> None:
        self.name = name
        self.client = client
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._wake = wake  # the start-up's: set when any of its servers is done
        self._lock = threading.Lock()
        self._abandoned = False

    def run(self, timeout: float) -> None:
        from trio_acp.openhands.sdk.mcp_clients import connect

        try:
            # Its own bound too, so the thread ends even if nobody waits for it.
            connect(self.client, timeout)
        except BaseException as exc:
            self.error = exc
        with self._lock:
            self.done.set()
            close = self._abandoned or self.error is not None
        self._wake.set()
        if close:
            _close_in_background(self.client)

    def abandon(self) -> bool:
        """Given up on: True if it is still starting (it closes itself when it ends)."""
        with self._lock:
            if self.done.is_set():
                return False
            self._abandoned = True
            return True


def _close_in_background(client: MCPClient) -> None:
    # Closing a client stops its server (stdio: stdin closed, then terminated), which
    # takes seconds for a server that does not listen: nobody waits for it.
    def close() -> None:
        try:
            client.sync_close()
        except Exception:
            log.debug("closing an MCP client failed", exc_info=True)

    threading.Thread(target=close, name="mcp-close", daemon=True).start()


class McpStartup:
    """The SDK's `MCPToolProvider` for one session (see the module's docstring)."""

    def __init__(self, timeout: float = DEFAULT_MCP_TIMEOUT) -> None:
        self.timeout = timeout
        self.failures: list[McpStartFailure] = []
        # Set by `stop` (the session is closing) and by each server that is done.
        self._stopped = False
        self._wake = threading.Event()

    def stop(self) -> None:
        """The session is closing: a start-up under way returns now, giving up on the
        servers still starting (they close themselves when their start ends), and one
        not begun starts nothing. Any thread; the start-up holds the SDK's lock that
        closing the conversation needs, so closing must not wait for its bound."""
        self._stopped = True
        self._wake.set()

    def create_tools(
        self,
        mcp_config: dict[str, MCPServer],
        timeout: float = 30.0,  # the SDK's bound for all servers; ours is per server
        *,
        on_tools_changed: Callable[[Sequence[MCPToolDefinition]], None] | None = None,
        on_tools_reconciled: Callable[[MCPClient, Sequence[MCPToolDefinition]], None] | None = None,
    ) -> StartedTools:
        from trio_acp.openhands.sdk.mcp_clients import server_client

        names = list(mcp_config)
        starts = []
        for name in names:
            try:
                client = server_client(
                    name,
                    mcp_config[name],
                    prefixed=len(names) > 1,
                    on_tools_changed=on_tools_changed,
                    on_tools_reconciled=on_tools_reconciled,
                )
            except Exception as exc:  # its settings are not usable (a bad URL, ...)
                self._failed(name, describe(exc))
                continue
            starts.append(_Start(name, client, self._wake))
        if self._stopped:
            starts = []  # closing already: start nothing (their clients own no process yet)
        for start in starts:
            threading.Thread(
                target=start.run, args=(self.timeout,), name=f"mcp-start {start.name}", daemon=True
            ).start()
        deadline = time.monotonic() + self.timeout
        while True:
            # Cleared before looking: a server done (or a stop) after the look wakes the wait.
            self._wake.clear()
            if self._stopped:
                break
            left = deadline - time.monotonic()
            if left <= 0 or all(start.done.is_set() for start in starts):
                break
            self._wake.wait(left)
        tools: list[MCPToolDefinition] = []
        for start in starts:
            if not start.done.is_set() and start.abandon():
                self._failed(
                    start.name,
                    "the session closed while it was starting"
                    if self._stopped
                    else f"it did not start within {self.timeout:g} s (no answer to MCP's "
                    f"initialize or tools/list; {MCP_TIMEOUT_VAR} sets the limit)",
                )
            elif start.error is not None:
                self._failed(start.name, _reason(start.error, self.timeout))
            else:
                tools.extend(start.client.tools)
        return StartedTools(tools)

    def _failed(self, name: str, reason: str) -> None:
        log.warning("MCP server %r did not start; going on without its tools: %s", name, reason)
        self.failures.append(McpStartFailure(name, reason))


def _reason(error: BaseException, timeout: float) -> str:
    if isinstance(error, TimeoutError):
        return f"it did not start within {timeout:g} s ({MCP_TIMEOUT_VAR} sets the limit)"
    # fastmcp wraps the cause ("Client failed to connect: ..."): say the innermost too.
    cause = error.__cause__ or error.__context__
    text = describe(error)
    said = describe(cause) if cause is not None else ""
    if said and said.split(": ", 1)[-1] not in text:
        text += f" ({said})"
    return text
