"""The credentials of the user's MCP servers (`mcp.json`: their headers and environment)
are masked like the model's key (setup/user_setup.py `mcp_file_secrets`, credentials.py):
a tool that prints them, a log line or an error that quotes them shows `<secret-hidden>`."""

from __future__ import annotations

import json
from pathlib import Path

from _inprocess import loader
from trio_acp.credentials import MASK
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.setup.user_setup import mcp_file_secrets

TOKEN = "ghp_0123456789abcdefghijABCDEFGHIJ"
BEARER = "sk-mcp-abcdefghijklmnopqrstuvwxyz"
API_KEY = "k3y-of-the-disabled-server-42"


def write_mcp(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "github": {
                        "command": "github-mcp",
                        "env": {"GITHUB_TOKEN": TOKEN, "PATH": "/usr/local/bin:/usr/bin"},
                    },
                    "remote": {
                        "url": "https://mcp.example/sse",
                        "headers": {"Authorization": f"Bearer {BEARER}", "Accept": "text/x-long"},
                    },
                    "off": {
                        "url": "https://off.example",
                        "headers": {"X-Api-Key": API_KEY},
                        "enabled": False,
                    },
                }
            }
        )
    )


def test_the_mcp_files_credentials_are_found_by_name(tmp_path):
    write_mcp(tmp_path)
    found = mcp_file_secrets(tmp_path)
    assert {TOKEN, BEARER, API_KEY} <= found
    assert not {"/usr/local/bin:/usr/bin", "text/x-long"} & found  # not named like one
    (tmp_path / "mcp.json").write_text("[" * 100_000)
    assert mcp_file_secrets(tmp_path) == set()
    assert mcp_file_secrets(tmp_path / "nowhere") == set()


async def test_the_agent_masks_them_once_it_read_the_settings(tmp_path, llm):
    from _inprocess import agent_env

    home = tmp_path / "home"
    write_mcp(home)
    async with open_openhands_agent(env=agent_env(llm, home), sdk_loader=loader()) as agent:
        agent._settings()  # what session/new, load and list read first
        shown = agent.secrets.mask(f"env: GITHUB_TOKEN={TOKEN} auth: Bearer {BEARER} {API_KEY}")
    assert TOKEN not in shown and BEARER not in shown and API_KEY not in shown
    assert shown.count(MASK) == 3
