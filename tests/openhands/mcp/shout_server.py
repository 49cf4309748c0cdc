"""A tiny MCP server for tests: one tool, `shout`, and a marker of who started it.

`python shout_server.py` serves on stdio; `python shout_server.py http|sse PORT` on
127.0.0.1:PORT (streamable HTTP at /mcp, or SSE at /sse)."""

import os
import sys

from mcp.server.fastmcp import FastMCP

transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
server = FastMCP("shout", host="127.0.0.1", port=port, log_level="WARNING")


@server.tool()
def shout(text: str) -> str:
    """Return the text in capitals."""
    return text.upper() + os.environ.get("SHOUT_SUFFIX", "")


if __name__ == "__main__":
    print(f"shout server starting ({transport})", file=sys.stderr, flush=True)
    server.run({"stdio": "stdio", "http": "streamable-http", "sse": "sse"}[transport])
