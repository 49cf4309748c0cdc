"""Where the agent's model and storage come from: the user's OpenHands set-up.

An OpenHands CLI user already has `~/.openhands/agent_settings.json` (the CLI writes the
serialized `Agent`, whose `llm` object names the model, key and base URL); that works
unchanged. `LLM_*` environment variables (`LLM_MODEL`, `LLM_API_KEY`, `LLM_BASE_URL`, and
any other `LLM` field such as `LLM_NUM_RETRIES`, `LLM_TIMEOUT`) override the file, field
by field. `OPENHANDS_PERSISTENCE_DIR` (default `~/.openhands`) holds the settings file and
the conversations (`<dir>/conversations/<session id>/`, or `OPENHANDS_CONVERSATIONS_DIR`,
as in the CLI). The rest of the file (the condenser and its settings) is kept as the CLI
wrote it, for the SDK side to validate (`agent_spec.py`); unknown fields are ignored there,
as the CLI's pydantic models ignore them. The overrides are never written back.

This module reads files and the environment only; it never imports the SDK, so it costs
nothing at start-up and its errors reach the user before any heavy work.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs

from trio_acp.openhands.permissions.modes import MODE_IDS
from trio_acp.openhands.sessions.small_files import loads_json
from trio_acp.openhands.translate.shapes import JsonObject

#: Fields for the SDK's `LLM` (model, api_key, base_url, ...) as the settings files and the
#: environment give them: JSON values, which the SDK's pydantic model validates.
LlmFields = JsonObject

SETTINGS_FILE = "agent_settings.json"
CONVERSATIONS_DIR = "conversations"

HOW_TO_CONFIGURE = (
    "No model is configured. {setup}, or set LLM_MODEL (and LLM_API_KEY, plus LLM_BASE_URL "
    "for an OpenAI-compatible server) in the agent's environment, or configure a model with "
    "the OpenHands CLI so that {path} exists."
)
# The set-up command first: it is the one step that needs no knowledge of variables.
# A client that can run the terminal sign-in (`clientCapabilities.auth.terminal`) offers
# it under this name (agent.py), so the message names what the user will see there.
TERMINAL_AUTH_METHOD_NAME = "Set up a model in a terminal"
SETUP_IN_TERMINAL = "Run `trio-acp setup` in a terminal"
SETUP_IN_EDITOR = (
    f'Choose the sign-in method "{TERMINAL_AUTH_METHOD_NAME}" in your editor '
    "(or run `trio-acp setup` in a terminal)"
)


class SettingsError(Exception):
    """The user's settings exist but cannot be used; the message says what to fix."""


@attrs.frozen
class Settings:
    persistence_dir: Path
    # Fields for `openhands.sdk.LLM` (model, api_key, base_url, ...), or None when no
    # model is configured anywhere.
    llm: LlmFields | None
    # Where each LLM field came from, for `/status` and error messages.
    sources: dict[str, str] = attrs.field(factory=dict)
    # LLM calls one prompt may make before the turn ends with `max_turn_requests`.
    max_iterations: int = 500
    # The approval mode new sessions start in (TRIO_ACP_DEFAULT_MODE).
    default_mode: str = "always-ask"
    # The whole `agent_settings.json` object (the serialized Agent the CLI writes), or
    # None without the file; only its `condenser` is used beyond `llm`.
    agent_file: JsonObject | None = None
    # OPENHANDS_CONVERSATIONS_DIR, when set.
    conversations_override: Path | None = None

    @property
    def settings_file(self) -> Path:
        return self.persistence_dir / SETTINGS_FILE

    @property
    def conversations_dir(self) -> Path:
        if self.conversations_override is not None:
            return self.conversations_override
        return self.persistence_dir / CONVERSATIONS_DIR

    @property
    def model(self) -> str | None:
        return None if self.llm is None else self.llm.get("model")

    def missing_model_message(self, *, terminal_auth: bool = False) -> str:
        """What to do, in the words of what the client can offer (`terminal_auth`: the
        client advertised `auth.terminal`, so it lists the terminal set-up method)."""
        setup = SETUP_IN_EDITOR if terminal_auth else SETUP_IN_TERMINAL
        return HOW_TO_CONFIGURE.format(setup=setup, path=self.settings_file)


def persistence_dir(env: Mapping[str, str], given: str | os.PathLike[str] | None = None) -> Path:
    """`given`, else `OPENHANDS_PERSISTENCE_DIR`, else `~/.openhands`, with `~` expanded.

    A `~user` that names no user (or no home directory at all) is a SettingsError the
    client is told about when it opens a session, not a crash before `initialize`."""
    raw = given or env.get("OPENHANDS_PERSISTENCE_DIR")
    try:
        return (Path(raw) if raw else Path.home() / ".openhands").expanduser()
    except RuntimeError:
        where = f"OPENHANDS_PERSISTENCE_DIR={raw}" if raw else "the default ~/.openhands"
        raise SettingsError(
            f"{where}: the home directory in it cannot be found (no such user, or HOME is not"
            " set); set OPENHANDS_PERSISTENCE_DIR to an absolute path"
        ) from None


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    pdir = persistence_dir(env)
    llm: LlmFields = {}
    sources: dict[str, str] = {}
    agent_file: JsonObject | None = None

    path = pdir / SETTINGS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    except (OSError, UnicodeDecodeError) as exc:  # not UTF-8: as unreadable, not a crash
        raise SettingsError(f"cannot read {path}: {exc}") from exc
    if text is not None:
        try:
            data = loads_json(text)  # nested too deeply: a ValueError too (small_files.py)
        except ValueError as exc:
            raise SettingsError(f"{path} is not valid JSON ({exc}); fix or remove it") from exc
        file_llm = data.get("llm") if isinstance(data, dict) else None
        if not isinstance(file_llm, dict):
            raise SettingsError(
                f"{path} has no 'llm' object; configure a model with the OpenHands CLI"
            )
        agent_file = data
        for key, value in file_llm.items():
            llm[key] = value
            sources[key] = str(path)

    for key, value in env.items():
        if key.startswith("LLM_") and value != "":
            field = key[4:].lower()
            llm[field] = value
            sources[field] = f"${key}"

    raw = env.get("TRIO_ACP_MAX_ITERATIONS", "").strip()
    try:
        max_iterations = int(raw) if raw else 500
        if max_iterations < 1:
            raise ValueError
    except ValueError:
        raise SettingsError(
            f"TRIO_ACP_MAX_ITERATIONS must be a positive integer, got {raw!r}"
        ) from None
    mode = env.get("TRIO_ACP_DEFAULT_MODE", "").strip() or "always-ask"
    if mode not in MODE_IDS:
        raise SettingsError(
            f"TRIO_ACP_DEFAULT_MODE must be one of {', '.join(MODE_IDS)}, got {mode!r}"
        )
    conversations = env.get("OPENHANDS_CONVERSATIONS_DIR", "").strip()
    return Settings(
        agent_file=agent_file,
        conversations_override=Path(conversations).expanduser() if conversations else None,
        default_mode=mode,
        persistence_dir=pdir,
        llm=llm if llm.get("model") else None,
        sources=sources,
        max_iterations=max_iterations,
    )
