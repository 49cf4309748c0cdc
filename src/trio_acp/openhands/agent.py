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
from .damage import find_damage
from .errors import SEE_LOG, describe, explained
from .sdk import SdkLoader, build_agent, build_llm
from .session import Session
from .settings import Settings, SettingsError, load_settings
from .store import RULES_FILE, DeleteError, SessionStore, parse_session_id

log = logging.getLogger(__name__)

AUTH_METHOD_ID = "openhands-settings"


def validate_session_id(session_id: str) -> str:
    """Session ids are UUIDs we made; anything else never reaches a path."""
    sid = parse_session_id(session_id)
    if sid is None:
        raise RequestError(-32002, f"unknown session: {session_id!r}")
    return str(sid)


class OpenHandsAgent:
    def __init__(self, nursery: trio.Nursery, *, sdk_loader: SdkLoader | None = None, env=None) -> None:
        self._nursery = nursery
        self._sdk_loader = sdk_loader or SdkLoader()
        self._env = env
        self._client: Any = None
        self._sessions: dict[str, Session] = {}
        self._locks: dict[str, trio.Lock] = {}

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
                load_session=True,
                prompt_capabilities=schema.PromptCapabilities(
                    image=True, audio=False, embedded_context=True
                ),
                mcp_capabilities=schema.McpCapabilities(http=False, sse=False),
                session_capabilities=schema.SessionCapabilities(
                    close=schema.SessionCloseCapabilities(),
                    list=schema.SessionListCapabilities(),
                    resume=schema.SessionResumeCapabilities(),
                    delete=schema.SessionDeleteCapabilities(),
                ),
            ),
            auth_methods=auth_methods,
            agent_info=schema.Implementation(
                name="trio-acp", version=__version__, title="OpenHands (trio-acp)"
            ),
        )

    @explained("authenticate")
    async def authenticate(self, params: schema.AuthenticateRequest) -> schema.AuthenticateResponse:
        if params.method_id != AUTH_METHOD_ID:
            raise RequestError.invalid_params(f"unknown auth method {params.method_id!r}")
        settings = self._settings()
        if settings.llm is None:
            raise RequestError(-32000, settings.missing_model_message())
        return schema.AuthenticateResponse()

    # --- sessions ---------------------------------------------------------------------

    def _check_cwd(self, cwd: str) -> None:
        if not os.path.isabs(cwd):
            raise RequestError.invalid_params(f"cwd must be an absolute path, got {cwd!r}")
        if not os.path.isdir(cwd):
            raise RequestError.invalid_params(f"cwd is not an existing directory: {cwd}")

    async def _open_session(self, session_id: str, cwd: str, mcp_servers: list[Any] | None) -> Session:
        """Start a session (new, or an existing conversation from disk) in the agent's nursery."""
        self._check_cwd(cwd)
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
        try:
            agent = build_agent(sdk, llm, mcp_config=mcp_config(mcp_servers or []))
        except Exception as exc:
            raise RequestError.invalid_params(f"the session's set-up is not usable: {_short(exc)}") from None
        sid = uuid.UUID(session_id)
        store = SessionStore(settings.conversations_dir)
        existing = store.exists(sid)
        store.root.mkdir(parents=True, exist_ok=True)

        def factory(callbacks, token_callbacks):
            # With an existing directory the SDK resumes that conversation: same id,
            # same events, the runtime agent and LLM replacing the persisted ones.
            return sdk.Conversation(
                agent=agent,
                workspace=cwd,
                persistence_dir=str(store.root),
                conversation_id=sid,
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
            rules_path=store.dir_for(sid) / RULES_FILE,
            store=store,
        )
        retries.session = session
        try:
            await self._nursery.start(session.run)
        except Exception as exc:
            log.exception("starting session %s failed", session_id)
            raise await _open_failure(sdk, store, sid, exc, existing=existing) from None
        self._sessions[session_id] = session
        try:
            store.write_index(sid, cwd=cwd)
        except OSError:
            # Only session/list reads the index; the session itself is fine.
            log.warning("could not write the session index of %s", session_id, exc_info=True)
        # Session-level updates go after the response, never before it.
        after_response(lambda: session.send_update(commands.available_commands()))
        return session

    @explained("session/new")
    async def new_session(self, params: schema.NewSessionRequest) -> schema.NewSessionResponse:
        session = await self._open_session(str(uuid.uuid4()), params.cwd, params.mcp_servers)
        return schema.NewSessionResponse(
            session_id=session.id, modes=session.mode_state(), config_options=session.config_options()
        )

    def _lock_for(self, session_id: str) -> trio.Lock:
        # Reopening and deleting a session close and re-register it across awaits: one at a
        # time per id, or two loads could both open it and orphan one.
        return self._locks.setdefault(session_id, trio.Lock())

    async def _existing(self, session_id: str, cwd: str, mcp_servers: list[Any] | None) -> Session:
        sid = parse_session_id(session_id)
        if sid is None:
            raise RequestError(-32002, f"unknown session: {session_id!r}")
        async with self._lock_for(str(sid)):
            return await self._reopen(sid, cwd, mcp_servers)

    async def _reopen(self, sid: uuid.UUID, cwd: str, mcp_servers: list[Any] | None) -> Session:
        session_id = str(sid)
        live = self._sessions.get(str(sid))
        if live is not None:
            if live.busy:
                raise RequestError(-32600, f"session {sid} is running a prompt turn; cancel it first")
            # Reopen from disk so the new cwd and MCP servers apply; history is on disk.
            self._sessions.pop(live.id, None)
            await live.close()
        self._check_cwd(cwd)
        if not SessionStore(self._settings().conversations_dir).exists(sid):
            raise RequestError(-32002, f"unknown session: {session_id}")
        return await self._open_session(str(sid), cwd, mcp_servers)

    @explained("session/load")
    async def load_session(self, params: schema.LoadSessionRequest) -> schema.LoadSessionResponse:
        session = await self._existing(params.session_id, params.cwd, params.mcp_servers)
        # The whole history, user messages included, before the response (§6.2).
        await session.replay_history()
        return schema.LoadSessionResponse(modes=session.mode_state(), config_options=session.config_options())

    @explained("session/resume")
    async def resume_session(self, params: schema.ResumeSessionRequest) -> schema.ResumeSessionResponse:
        # Like load, but the client already shows the history: no replay.
        session = await self._existing(params.session_id, params.cwd, params.mcp_servers)
        return schema.ResumeSessionResponse(modes=session.mode_state(), config_options=session.config_options())

    @explained("session/list")
    async def list_sessions(self, params: schema.ListSessionsRequest) -> schema.ListSessionsResponse:
        if params.cwd is not None and not os.path.isabs(params.cwd):
            raise RequestError.invalid_params(f"cwd must be an absolute path, got {params.cwd!r}")
        store = SessionStore(self._settings().conversations_dir)
        try:
            page, cursor = await trio.to_thread.run_sync(store.list, params.cwd, params.cursor)
        except ValueError as exc:
            raise RequestError.invalid_params(str(exc)) from None
        return schema.ListSessionsResponse(
            sessions=[
                schema.SessionInfo(session_id=s.session_id, cwd=s.cwd, title=s.title, updated_at=s.updated_at)
                for s in page
            ],
            next_cursor=cursor,
        )

    @explained("session/delete")
    async def delete_session(self, params: schema.DeleteSessionRequest) -> schema.DeleteSessionResponse:
        sid = parse_session_id(params.session_id)
        if sid is None:
            return schema.DeleteSessionResponse()  # unknown ids succeed silently (spec: SHOULD)
        async with self._lock_for(str(sid)):
            live = self._sessions.pop(str(sid), None)
            if live is not None:
                await live.close()
            store = SessionStore(self._settings().conversations_dir)
            try:
                await trio.to_thread.run_sync(store.delete, sid)
            except DeleteError as exc:
                raise RequestError(-32603, f"could not delete session {sid}: {exc}") from None
        return schema.DeleteSessionResponse()

    @explained("session/set_mode")
    async def set_session_mode(self, params: schema.SetSessionModeRequest) -> schema.SetSessionModeResponse:
        session = self._session(params.session_id)
        await session.set_mode(params.mode_id, announce=False)
        # The mode changed by other means than set_config_option: keep both views in sync.
        after_response(session.announce_mode)
        return schema.SetSessionModeResponse()

    @explained("session/set_config_option")
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

    @explained("session/prompt")
    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        return await self._session(params.session_id).prompt(params.prompt)

    async def cancel(self, params: schema.CancelNotification) -> None:
        try:
            session = self._session(params.session_id)
        except RequestError:
            return  # a notification: nobody to tell
        session.request_cancel()

    @explained("session/close")
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
    """ACP stdio MCP servers → the SDK's `mcp_config` (server name → command, args, env)."""
    out: dict[str, Any] = {}
    for server in servers:
        if isinstance(server, schema.McpServerStdio):
            out[server.name] = {
                "command": server.command,
                "args": list(server.args or []),
                "env": {e.name: e.value for e in (server.env or [])},
            }
    return out


def load_settings_message(env) -> str:
    try:
        return load_settings(env).missing_model_message()
    except SettingsError as exc:
        return str(exc)


async def _open_failure(sdk: Any, store: SessionStore, sid: uuid.UUID, exc: Exception, *, existing: bool) -> RequestError:
    """What to tell the user when a session's conversation could not be opened."""
    if not existing:
        return RequestError(-32603, f"could not start the session: {describe(exc)} ({SEE_LOG})")
    directory = store.dir_for(sid)
    try:
        damage = await trio.to_thread.run_sync(
            lambda: find_damage(
                directory,
                check_state=sdk.ConversationState.model_validate,
                check_event=sdk.Event.model_validate,
            )
        )
    except Exception:
        log.exception("looking for damage in %s failed", directory)
        damage = None
    if damage is not None:
        return RequestError(-32603, damage.message(str(sid)), {"path": str(damage.path)})
    return RequestError(
        -32603,
        f"session {sid} cannot be opened: {describe(exc)}. Its files are in {directory}; "
        f"delete the session (session/delete) if they cannot be repaired ({SEE_LOG})",
    )


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
