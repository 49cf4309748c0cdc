"""The OpenHands-backed ACP agent: the `Agent` the connection dispatches to.

Sessions are children of the agent's nursery (each with a nursery of its own, see
`session.py`), so closing the agent closes every session, and nothing outlives it.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from .. import __version__, schema
from ..rpc import RequestError, after_response
from . import commands
from .sdk import SdkLoader, build_agent, build_llm
from .session import Session
from .settings import Settings, SettingsError, load_settings

log = logging.getLogger(__name__)

AUTH_METHOD_ID = "openhands-settings"
# The session's "always" permission rules, next to the SDK's files for the conversation.
RULES_FILE = "trio_acp_rules.json"


def validate_session_id(session_id: str) -> str:
    """Session ids are UUIDs we made; anything else never reaches a path."""
    try:
        return str(uuid.UUID(session_id))
    except (ValueError, TypeError, AttributeError):
        raise RequestError(-32002, f"unknown session: {session_id!r}") from None


class OpenHandsAgent:
    def __init__(self, nursery: trio.Nursery, *, sdk_loader: SdkLoader | None = None, env=None) -> None:
        self._nursery = nursery
        self._sdk_loader = sdk_loader or SdkLoader()
        self._env = env
        self._client: Any = None
        self._sessions: dict[str, Session] = {}

    def on_connect(self, client: Any) -> None:
        self._client = client

    def _settings(self) -> Settings:
        try:
            return load_settings(self._env)
        except SettingsError as exc:
            raise RequestError(-32000, str(exc)) from None

    # --- initialize / auth ------------------------------------------------------------

    async def initialize(self, params: schema.InitializeRequest) -> schema.InitializeResponse:
        # Answer at once: the SDK import is still running in its thread (DESIGN §3).
        try:
            configured = load_settings(self._env).llm is not None
        except SettingsError:
            configured = False
        auth_methods = []
        if not configured:
            auth_methods.append(
                schema.AuthMethodAgent(
                    id=AUTH_METHOD_ID,
                    name="Configure a model for OpenHands",
                    description=load_settings_message(self._env),
                )
            )
        return schema.InitializeResponse(
            # We speak v1; for any other requested version the answer is still 1 (§6.1).
            protocol_version=schema.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                load_session=False,
                prompt_capabilities=schema.PromptCapabilities(
                    image=True, audio=False, embedded_context=True
                ),
                mcp_capabilities=schema.McpCapabilities(http=False, sse=False),
                session_capabilities=schema.SessionCapabilities(close=schema.SessionCloseCapabilities()),
            ),
            auth_methods=auth_methods,
            agent_info=schema.Implementation(
                name="trio-acp", version=__version__, title="OpenHands (trio-acp)"
            ),
        )

    async def authenticate(self, params: schema.AuthenticateRequest) -> schema.AuthenticateResponse:
        if params.method_id != AUTH_METHOD_ID:
            raise RequestError.invalid_params(f"unknown auth method {params.method_id!r}")
        settings = self._settings()
        if settings.llm is None:
            raise RequestError(-32000, settings.missing_model_message())
        return schema.AuthenticateResponse()

    # --- sessions ---------------------------------------------------------------------

    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        cwd = params.cwd
        if not os.path.isabs(cwd):
            raise RequestError.invalid_params(f"cwd must be an absolute path, got {cwd!r}")
        if not os.path.isdir(cwd):
            raise RequestError.invalid_params(f"cwd is not an existing directory: {cwd}")
        settings = self._settings()
        if settings.llm is None:
            raise RequestError(-32000, settings.missing_model_message())
        sdk = await self._sdk_loader.get()
        retries = RetryRelay()
        try:
            llm = build_llm(sdk, settings.llm, retry_listener=retries)
        except Exception as exc:
            raise RequestError(
                -32000, f"the model settings are not usable: {_short(exc)} (from {settings.settings_file} / LLM_*)"
            ) from None
        agent = build_agent(sdk, llm, mcp_config=mcp_config(params.mcp_servers or []))
        session_id = str(uuid.uuid4())
        persistence = settings.conversations_dir
        persistence.mkdir(parents=True, exist_ok=True)

        def factory(callbacks, token_callbacks):
            return sdk.Conversation(
                agent=agent,
                workspace=cwd,
                persistence_dir=str(persistence),
                conversation_id=uuid.UUID(session_id),
                callbacks=callbacks,
                token_callbacks=token_callbacks,
                visualizer=None,
                max_iteration_per_run=settings.max_iterations,
            )

        session = Session(
            session_id=session_id,
            cwd=cwd,
            sdk=sdk,
            conversation_factory=factory,
            client=self._client,
            model=str(settings.llm.get("model")),
            mode=settings.default_mode,
            rules_path=persistence / uuid.UUID(session_id).hex / RULES_FILE,
        )
        retries.session = session
        try:
            await self._nursery.start(session.run)
        except Exception as exc:
            log.exception("creating session failed")
            raise RequestError(-32603, f"could not start the session: {_short(exc)}") from None
        self._sessions[session_id] = session
        # Session-level updates go after the session/new response, never before it.
        after_response(lambda: session.send_update(commands.available_commands()))
        return schema.NewSessionResponse(
            session_id=session_id, modes=session.mode_state(), config_options=session.config_options()
        )

    async def set_session_mode(self, params: schema.SetSessionModeRequest) -> schema.SetSessionModeResponse:
        session = self._session(params.session_id)
        await session.set_mode(params.mode_id, announce=False)
        # The mode changed by other means than set_config_option: keep both views in sync.
        after_response(session.announce_mode)
        return schema.SetSessionModeResponse()

    async def set_session_config_option(
        self, params: schema.SetSessionConfigOptionRequest
    ) -> schema.SetSessionConfigOptionResponse:
        session = self._session(params.session_id)
        before = session.mode
        options = await session.set_config_option(params.config_id, params.value)
        if session.mode != before:
            after_response(lambda: session.send_update(schema.CurrentModeUpdate(current_mode_id=session.mode)))
        return schema.SetSessionConfigOptionResponse(config_options=options)

    def _session(self, session_id: str) -> Session:
        session = self._sessions.get(validate_session_id(session_id))
        if session is None:
            raise RequestError(-32002, f"unknown session: {session_id}")
        return session

    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        return await self._session(params.session_id).prompt(params.prompt)

    async def cancel(self, params: schema.CancelNotification) -> None:
        try:
            session = self._session(params.session_id)
        except RequestError:
            return  # a notification: nobody to tell
        session.request_cancel()

    async def close_session(self, params: schema.CloseSessionRequest) -> schema.CloseSessionResponse:
        session = self._session(params.session_id)
        self._sessions.pop(session.id, None)
        await session.close()
        return schema.CloseSessionResponse()

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(session.close)


class RetryRelay:
    """The LLM's retry listener (called in the SDK's thread) → a note in the session.

    The LLM is built before its session exists, hence the late-bound session.
    """

    def __init__(self) -> None:
        self.session: Session | None = None

    def __call__(self, attempt: int, total: int, error: BaseException | None) -> None:
        if self.session is not None:
            self.session.note_retry(attempt, total, error)


def mcp_config(servers: list[Any]) -> dict[str, Any]:
    """ACP stdio MCP servers → the SDK's `mcp_config` (the `mcpServers` JSON shape)."""
    out: dict[str, Any] = {}
    for server in servers:
        if isinstance(server, schema.McpServerStdio):
            out[server.name] = {
                "command": server.command,
                "args": list(server.args or []),
                "env": {e.name: e.value for e in (server.env or [])},
            }
    return {"mcpServers": out} if out else {}


def load_settings_message(env) -> str:
    try:
        return load_settings(env).missing_model_message()
    except SettingsError as exc:
        return str(exc)


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500] or type(exc).__name__


@asynccontextmanager
async def open_openhands_agent(**kwargs: Any) -> AsyncIterator[OpenHandsAgent]:
    async with trio.open_nursery() as nursery:
        agent = OpenHandsAgent(nursery, **kwargs)
        try:
            yield agent
        finally:
            with trio.move_on_after(10, shield=True):
                await agent.aclose()
            nursery.cancel_scope.cancel()
