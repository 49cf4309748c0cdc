"""Signing in: what `initialize` offers (the auth methods among it), `authenticate`,
`logout`, and what a request says when no model is configured.

The agent's collaborator for it (agent.py delegates): it remembers whether the client
offers the terminal set-up (the -32000 answer then names it) and, after a `logout`,
which settings file it was, so that creating or opening a session answers -32000 until
the user configures again or authenticates.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from trio_acp import __version__, schema
from trio_acp.openhands.errors import not_configured
from trio_acp.openhands.sessions import system_prompt as system_prompts
from trio_acp.openhands.setup.audio_models import default_model_takes_audio
from trio_acp.openhands.setup.settings import (
    TERMINAL_AUTH_METHOD_NAME,
    Settings,
    SettingsError,
    load_settings,
)
from trio_acp.openhands.setup.terminal_setup import SETUP_ARG
from trio_acp.rpc import RequestError
from trio_acp.schema import unstable

log = logging.getLogger(__name__)

AUTH_METHOD_ID = "openhands-settings"
# Offered only to clients that advertise `clientCapabilities.auth.terminal`: they run our
# command again with these args in a terminal (terminal_setup.py), never `authenticate`.
TERMINAL_AUTH_METHOD_ID = "openhands-terminal-setup"


class SignIn:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env
        # Set by `log_out`: the settings file's identity at that moment (`check_logged_in`).
        self._logged_out: tuple[object, ...] | None = None
        # Whether the client offers the terminal set-up (`initialize`): the -32000 answer
        # then points at it by its name.
        self.terminal_auth = False

    @property
    def logged_out(self) -> bool:
        return self._logged_out is not None

    def still_logged_out(self) -> bool:
        """Logged out, and the settings not written since (`auth/status`, auth_status.py)."""
        return self._logged_out is not None and _settings_identity(self._env) == self._logged_out

    def initialize(self, params: schema.InitializeRequest) -> schema.InitializeResponse:
        # Answer at once: the SDK import is still running in its thread
        # (docs/ARCHITECTURE.md#d3-an-instant-initialize).
        return schema.InitializeResponse(
            # We speak v1; for any other requested version the answer is still 1 (§6.1).
            protocol_version=schema.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                load_session=True,
                prompt_capabilities=schema.PromptCapabilities(
                    # Audio only for a model that takes it (setup/audio_input.py).
                    image=True,
                    audio=default_model_takes_audio(self._env),
                    embedded_context=True,
                ),
                mcp_capabilities=schema.McpCapabilities(http=True, sse=True),
                # A prompt sent while a turn runs is queued (FIFO), not refused; clients
                # read this under Claude Code's key, the de-facto convention.
                meta={
                    "claudeCode": {"promptQueueing": True},
                    "trioAcp": {"promptQueueing": "fifo"},
                },
                # The unstable subclass: it adds `fork` (schema/unstable.py).
                session_capabilities=unstable.SessionCapabilities(
                    close=schema.SessionCloseCapabilities(),
                    list=schema.SessionListCapabilities(),
                    resume=schema.SessionResumeCapabilities(),
                    delete=schema.SessionDeleteCapabilities(),
                    fork=unstable.SessionForkCapabilities(),
                    system_prompt=system_prompts.capabilities(),
                    # session/set_title and session/status (sessions/session_meta.py).
                    title=unstable.SessionTitleCapabilities(),
                    status=unstable.SessionStatusCapabilities(),
                    # session/archive and session/unarchive (sessions/archive.py).
                    archive=unstable.SessionArchiveCapabilities(),
                    # Extra workspace roots (session_roots.py, docs/editor-workspace.md).
                    additional_directories=schema.SessionAdditionalDirectoriesCapabilities(),
                ),
                auth=unstable.AgentAuthCapabilities(
                    logout=schema.LogoutCapabilities(),
                    # auth/status (auth_status.py).
                    status=unstable.AuthStatusCapabilities(),
                ),
            ),
            auth_methods=self._auth_methods(params.client_capabilities),
            agent_info=schema.Implementation(
                name="trio-acp", version=__version__, title="OpenHands (trio-acp)"
            ),
        )

    def _auth_methods(self, caps: schema.ClientCapabilities | None) -> list[schema.AuthMethod]:
        """The agent method always (after a `logout` it is the way back in); the terminal
        set-up only for clients that can run it (spec: MUST NOT offer it otherwise)."""
        self.terminal_auth = (
            caps is not None and caps.auth is not None and caps.auth.terminal is True
        )
        try:
            try:
                settings = load_settings(self._env)
                configured = settings.llm is not None
                where = f"{settings.settings_file} and LLM_* variables"
            except SettingsError as exc:
                configured, where = False, str(exc)
            description = (
                f"Use the model configured in {where}."
                if configured
                else load_settings_message(self._env, terminal_auth=self.terminal_auth)
            )
        except Exception:
            # The agent method is offered in every state (the ACP registry's CI requires an
            # agent or terminal method; docs/registry.md): only its description may be lost.
            log.exception("reading the OpenHands settings for initialize's authMethods")
            configured, description = False, "The OpenHands settings could not be read."
        methods: list[schema.AuthMethod] = [
            schema.AuthMethodAgent(
                id=AUTH_METHOD_ID,
                name="Use the configured model"
                if configured
                else "Configure a model for OpenHands",
                description=description,
            )
        ]
        if self.terminal_auth:
            methods.append(
                schema.AuthMethodTerminal(
                    id=TERMINAL_AUTH_METHOD_ID,
                    name=TERMINAL_AUTH_METHOD_NAME,
                    description="Asks for the model, base URL and API key and saves them to "
                    "agent_settings.json (as the OpenHands CLI does).",
                    args=[SETUP_ARG],
                )
            )
        return methods

    def authenticate(self, params: schema.AuthenticateRequest, settings: Settings) -> None:
        """`authenticate` with the configured model: raises what the answer is if not."""
        if params.method_id == TERMINAL_AUTH_METHOD_ID:
            raise RequestError.invalid_params(
                "the terminal set-up is run by the client in a terminal, not passed to authenticate"
            )
        if params.method_id != AUTH_METHOD_ID:
            raise RequestError.invalid_params(f"unknown auth method {params.method_id!r}")
        if settings.llm is None:
            raise not_configured(self.missing_model(settings))
        self._logged_out = None

    def log_out(self) -> None:
        self._logged_out = _settings_identity(self._env)

    def missing_model(self, settings: Settings) -> str:
        return settings.missing_model_message(terminal_auth=self.terminal_auth)

    def check_logged_in(self) -> None:
        """Raise -32000 while the user has not configured again since `log_out`."""
        if self._logged_out is None:
            return
        if _settings_identity(self._env) != self._logged_out:
            self._logged_out = None  # the settings were written since: configured again
            return
        raise not_configured(
            "logged out: configure a model again (the terminal set-up, `trio-acp setup`, or the "
            "OpenHands CLI), or authenticate with the configured one",
        )


def load_settings_message(env, *, terminal_auth: bool = False) -> str:
    try:
        return load_settings(env).missing_model_message(terminal_auth=terminal_auth)
    except SettingsError as exc:
        return str(exc)


def _settings_identity(env: Mapping[str, str] | None) -> tuple[object, ...]:
    """Which settings file is there now: any write (atomic replace included) changes it."""
    try:
        path = load_settings(env).settings_file
    except SettingsError as exc:
        return ("unreadable", str(exc))
    try:
        st = path.stat()
    except OSError:
        return ("missing", str(path))
    return (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
