"""The OpenHands agent-server run in this process (`trio-acp agent-server`,
backends/agent_server_command.py says how and why).

Imports the agent-server and its SDK when first called: the command's process imports
nothing else of the agent.
"""

from __future__ import annotations

import sys


def configured_keys() -> list[str]:
    """Import the server and read its config file (once: `get_default_config` caches it,
    and the app and every later caller use this one); the session API keys it holds."""
    from openhands.agent_server import config

    return list(config.get_default_config().session_api_keys)


def import_server() -> None:
    """Import the server's app, and keep its key out of its own environment.

    The server exports its key into its own environment at start, for in-process callers
    trio-acp does not use (the child-conversation tool, a managed LLM key): the terminal's
    tmux server would inherit it, and the shell it starts could read it there
    (`/proc/$PPID/environ`)."""
    import openhands.agent_server.__main__  # noqa: F401
    from openhands.agent_server import api
    from openhands.agent_server.config import Config

    def keep_it_out(config: Config) -> None:
        return None

    api.export_session_api_key = keep_it_out


def run(host: str, port: int) -> None:
    """Serve until stopped (SIGINT/SIGTERM); blocking."""
    from openhands.agent_server.__main__ import main

    sys.argv = ["trio-acp agent-server", "--host", host, "--port", str(port)]
    main()
