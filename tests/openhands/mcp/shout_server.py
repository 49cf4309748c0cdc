"""A tiny stdio MCP server for tests: one tool, `shout`, and a marker of who started it."""

import os
import sys

from mcp.server.fastmcp import FastMCP

server = FastMCP("shout")


@server.tool()
def shout(text: str) -> str:
    """Return the text in capitals."""
    return text.upper() + os.environ.get("SHOUT_SUFFIX", "")


if __name__ == "__main__":
    print("shout server starting", file=sys.stderr)
    server.run("stdio")
