"""`trio-acp agent-server`: start an OpenHands agent-server the right way (docs/agent-server.md).

`python -m openhands.agent_server` as documented upstream has three problems here:

- it fails to start about 3 times in 10 on the locked litellm: an import deadlock in
  `litellm.rust_bridge.catalog`, which `LITELLM_LOCAL_MODEL_COST_MAP=True` avoids (it is
  set here before anything imports litellm; sdk.py does the same for the agent);
- litellm's import loads a `.env` found above its installation into the server's
  environment, and so into every tool (`sdk.no_dotenv`);
- its keys come from the environment (`OH_SESSION_API_KEYS_0`, `OH_SECRET_KEY`), where the
  model's shell reads them back from the server's `/proc/<pid>/environ`, and the server
  exports the session key into its own environment at start, which the terminal's tmux
  server (started without the SDK's sanitized environment) inherits: the shell's parent.

So this command binds 127.0.0.1 unless told otherwise, generates the session API key and
the secret key once into `keys.json` (0600, in a 0700 directory; reused on every start, so
the secrets the server stored stay readable), hands them to the server through its config
file — read once at start, then deleted — never through the environment, keeps the server
from exporting its key back into its environment, and makes the server's process
non-dumpable (other processes of its user cannot read its memory or environment).

The keys file itself is readable by whoever runs the server, and the server's tools run as
that user. Started by root with `--user NAME`, the keys file stays root's and the server,
with every tool it runs, becomes NAME: the tools can read neither the file nor the server.

This module imports neither trio nor the SDK at the top: the SDK is the server's, imported
when it starts.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

import attrs

from trio_acp.openhands.backends.agent_server_config import SETTINGS_FILE
from trio_acp.openhands.setup.settings import SettingsError, persistence_dir

KEYS_FILE = "keys.json"
CONFIG_FILE = "server-config.json"  # the server's config with the keys, while it starts
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: What the server would read its keys from instead of its config file: refused, since a
#: variable is in `/proc/<pid>/environ` for good.
KEY_VARIABLES = ("OH_SESSION_API_KEYS_0", "SESSION_API_KEY", "OH_SECRET_KEY")


class AgentServerCommandError(Exception):
    """The server cannot be started as asked; the message says what to fix."""


@attrs.frozen
class ServerKeys:
    session_api_key: str = attrs.field(repr=False)
    secret_key: str = attrs.field(repr=False)


def default_directory(env: Mapping[str, str]) -> Path:
    return _persistence_dir(env) / "agent-server"


def _persistence_dir(env: Mapping[str, str]) -> Path:
    try:
        return persistence_dir(env)
    except SettingsError as exc:
        raise AgentServerCommandError(str(exc)) from None


def _private(path: Path) -> None:
    """A file only its owner may read (the keys open the server to whoever holds them)."""
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AgentServerCommandError(
            f"{path} holds the agent-server's keys but other users can read it: chmod 600 {path}"
        )


def _write_private(path: Path, data: Mapping[str, object]) -> None:
    """Write a JSON file readable by its owner only, from the start (never 0644 first)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def load_or_create_keys(directory: Path) -> ServerKeys:
    """The server's keys: `keys.json` in `directory`, generated (0600) the first time."""
    path = directory / KEYS_FILE
    if not path.exists():
        keys = ServerKeys(secrets.token_urlsafe(32), secrets.token_urlsafe(32))
        _write_private(
            path, {"session_api_key": keys.session_api_key, "secret_key": keys.secret_key}
        )
        return keys
    _private(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ServerKeys(str(data["session_api_key"]), str(data["secret_key"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AgentServerCommandError(
            f"{path} is not a keys file of trio-acp agent-server ({exc}); move it away and "
            "start again to generate new keys (conversations the server stored with the old "
            "secret key then lose their secrets)"
        ) from None


def client_url(host: str, port: int) -> str:
    shown = DEFAULT_HOST if host in ("0.0.0.0", "::", "[::]") else host
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"


def write_client_config(persistence_dir: Path, url: str, keys: ServerKeys) -> Path:
    """`agent_server.json` for trio-acp itself (agent_server_config.py): its sessions then
    run on this server. 0600, as that file must be when it holds the key."""
    persistence_dir.mkdir(parents=True, exist_ok=True)
    path = persistence_dir / SETTINGS_FILE
    _write_private(path, {"url": url, "api_key": keys.session_api_key})
    return path


def prepare(
    directory: Path, env: MutableMapping[str, str], *, owner: tuple[int, int] | None = None
) -> ServerKeys:
    """The directory, the keys, the server's config and environment; returns the keys.

    `env` (the process environment) gets what the server reads at start; `owner` (uid,
    gid): the user the server will run as, who gets its `workspace` but not the keys.
    """
    present = [name for name in KEY_VARIABLES if env.get(name)]
    if present:
        raise AgentServerCommandError(
            f"unset {', '.join(present)}: trio-acp agent-server keeps its keys in "
            f"{directory / KEYS_FILE}, never in the environment, where the server's tools "
            "could read them"
        )
    directory.mkdir(parents=True, exist_ok=True)
    # Another user running the server must be able to reach its workspace, not the keys.
    directory.chmod(0o711 if owner else 0o700)
    keys = load_or_create_keys(directory)
    workspace = directory / "workspace"
    workspace.mkdir(exist_ok=True)
    if owner is not None:
        os.chown(workspace, *owner)
    config = directory / CONFIG_FILE
    _write_private(
        config, {"session_api_keys": [keys.session_api_key], "secret_key": keys.secret_key}
    )
    env["OPENHANDS_AGENT_SERVER_CONFIG_PATH"] = str(config)
    # Not setdefault: the import deadlock is the reason for this command (module doc).
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
    return keys


def _load_server(keys: ServerKeys) -> None:
    """Import the server (its SDK), read its config once, then delete the config file."""
    from trio_acp.openhands.sdk import agent_server, no_dotenv

    config_path = Path(os.environ["OPENHANDS_AGENT_SERVER_CONFIG_PATH"])
    try:
        with no_dotenv():
            if agent_server.configured_keys() != [keys.session_api_key]:
                raise AgentServerCommandError(
                    "the agent-server did not take its key from its config file"
                )
            agent_server.import_server()
    finally:
        config_path.unlink(missing_ok=True)


def _home_for(user: str, home: Path) -> None:
    """`home`, the user's, as the process's home from now on (still root here)."""
    import pwd

    entry = pwd.getpwnam(user)
    home.mkdir(exist_ok=True)
    os.chown(home, entry.pw_uid, entry.pw_gid)
    os.environ["HOME"] = str(home)
    os.environ["USER"] = os.environ["LOGNAME"] = user


def _become(user: str) -> None:
    import pwd

    entry = pwd.getpwnam(user)
    os.initgroups(user, entry.pw_gid)
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    if os.getuid() != entry.pw_uid or os.geteuid() != entry.pw_uid:
        raise AgentServerCommandError(f"could not become {user}")


def serve(
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    directory: str | None = None,
    user: str | None = None,
    configure: bool = False,
) -> int:
    """Run the agent-server in this process until it is stopped (SIGINT/SIGTERM)."""
    from trio_acp.credentials import _make_non_dumpable

    env = os.environ
    owner = None
    try:
        where = Path(directory).expanduser() if directory else default_directory(env)
        where = where.resolve()
        if user is not None:
            import pwd

            if os.geteuid() != 0:
                raise AgentServerCommandError("--user needs root (the keys stay root's)")
            try:
                entry = pwd.getpwnam(user)
            except KeyError:
                raise AgentServerCommandError(f"no user named {user!r}") from None
            owner = (entry.pw_uid, entry.pw_gid)
        keys = prepare(where, env, owner=owner)
        url = client_url(host, port)
        if configure:
            written = write_client_config(_persistence_dir(env), url, keys)
            print(f"trio-acp's sessions now run on it ({written})", file=sys.stderr)
        os.chdir(where)  # its storage is relative: ./workspace/conversations, ...
        if user is not None:
            # Its home before the server is loaded: modules keep paths under it from
            # their import on (the SDK's `~/.openhands/...`), which the user must reach.
            _home_for(user, where / "workspace" / "home")
        _load_server(keys)
        if user is not None:
            _become(user)
    except AgentServerCommandError as exc:
        print(f"trio-acp agent-server: {exc}", file=sys.stderr)
        return 2
    _make_non_dumpable()
    print(
        f"trio-acp agent-server: {url}, storage {where / 'workspace'}, "
        f"keys in {where / KEYS_FILE}" + (f", running as {user}" if user else ""),
        file=sys.stderr,
    )
    from trio_acp.openhands.sdk import agent_server

    agent_server.run(host, port)
    return 0
