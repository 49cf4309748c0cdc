"""Which OpenHands agent-server, if any, runs the sessions' conversations (docs/agent-server.md).

Sources, first one that names a URL wins:

1. the `--agent-server URL` command-line flag;
2. `TRIO_ACP_AGENT_SERVER_URL`;
3. the settings file `$OPENHANDS_PERSISTENCE_DIR/agent_server.json`:
   `{"url": "http://host:8000", "api_key_env": "NAME"}` (or `"api_key": "..."`).

The key comes from `TRIO_ACP_AGENT_SERVER_API_KEY`, else from the file (`api_key_env` names
another variable; `api_key` holds it, and then the file must be readable by its owner only).
There is deliberately no flag for the key: a command line is visible to every user of the
machine (`ps`). The key is kept out of `repr`, and error messages never quote it.

Reads files and the environment only; no SDK import.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import attrs

from trio_acp.openhands.sessions.small_files import loads_json
from trio_acp.openhands.setup.settings import SettingsError
from trio_acp.openhands.setup.settings import persistence_dir as settings_persistence_dir

ENV_URL = "TRIO_ACP_AGENT_SERVER_URL"
ENV_API_KEY = "TRIO_ACP_AGENT_SERVER_API_KEY"
ENV_STALL_TIMEOUT = "TRIO_ACP_AGENT_SERVER_STALL_TIMEOUT"
SETTINGS_FILE = "agent_server.json"
# Seconds a server may go without a sign of life during a turn (no answer to the health
# check, nothing on its socket) before the turn ends with an error naming it: generous,
# since a loaded server answers slowly, and a stalled one looks the same until then.
STALL_TIMEOUT = 20.0


class AgentServerConfigError(Exception):
    """The agent-server setting exists but cannot be used; the message says what to fix."""


@attrs.frozen
class AgentServerTarget:
    """An agent-server's base URL and its session API key (sent as `X-Session-API-Key`)."""

    url: str
    api_key: str | None = attrs.field(default=None, repr=False)
    # Where the URL came from, for `/status` and error messages.
    source: str = ""
    # See STALL_TIMEOUT ($TRIO_ACP_AGENT_SERVER_STALL_TIMEOUT).
    stall_timeout: float = STALL_TIMEOUT

    def __repr__(self) -> str:  # attrs' repr=False drops the key; say whether there is one
        return f"AgentServerTarget(url={self.url!r}, api_key={'set' if self.api_key else None}, source={self.source!r})"


def _check_url(url: str, source: str) -> str:
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AgentServerConfigError(f"{source}: {url!r} is not an http(s) URL of an agent-server")
    if parts.username or parts.password:
        raise AgentServerConfigError(f"{source}: put the key in {ENV_API_KEY}, not in the URL")
    return url


def _read_file(path: Path) -> dict[str, object] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AgentServerConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = loads_json(text)  # nested too deeply: a ValueError too (small_files.py)
    except ValueError as exc:
        raise AgentServerConfigError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise AgentServerConfigError(f"{path} must hold a JSON object")
    return data


def load_agent_server(
    env: Mapping[str, str] | None = None,
    *,
    flag_url: str | None = None,
    persistence_dir: str | os.PathLike[str] | None = None,
) -> AgentServerTarget | None:
    """The configured agent-server, or None when sessions run in this process."""
    env = os.environ if env is None else env
    try:
        pdir = settings_persistence_dir(env, persistence_dir)
    except SettingsError as exc:
        raise AgentServerConfigError(str(exc)) from None
    path = pdir / SETTINGS_FILE
    data = _read_file(path) or {}

    url: str | None = None
    source = ""
    if flag_url:
        url, source = flag_url, "--agent-server"
    elif env.get(ENV_URL):
        url, source = env[ENV_URL], f"${ENV_URL}"
    elif data.get("url"):
        if not isinstance(data["url"], str):
            raise AgentServerConfigError(f'{path}: "url" must be a string')
        url, source = data["url"], str(path)
    if url is None:
        return None
    url = _check_url(url, source)

    key: str | None = env.get(ENV_API_KEY) or None
    if key is None and data.get("api_key_env") is not None:
        name = data["api_key_env"]
        if not isinstance(name, str) or not name:
            raise AgentServerConfigError(f'{path}: "api_key_env" must name an environment variable')
        key = env.get(name) or None
        if key is None:
            raise AgentServerConfigError(
                f"{path} takes the agent-server key from ${name}, which is not set"
            )
    if key is None and data.get("api_key") is not None:
        if not isinstance(data["api_key"], str):
            raise AgentServerConfigError(f'{path}: "api_key" must be a string')
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            # The key opens the server to whoever holds it (it runs commands there).
            raise AgentServerConfigError(
                f"{path} holds the agent-server key but other users can read it: chmod 600 {path}"
            )
        key = data["api_key"] or None
    return AgentServerTarget(url=url, api_key=key, source=source, stall_timeout=_stall_timeout(env))


def _stall_timeout(env: Mapping[str, str]) -> float:
    raw = (env.get(ENV_STALL_TIMEOUT) or "").strip()
    if not raw:
        return STALL_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise AgentServerConfigError(f"${ENV_STALL_TIMEOUT}: {raw!r} is not a number of seconds")
    return value
