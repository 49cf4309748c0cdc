"""The OpenHands-backed ACP agent: the `Agent` the connection dispatches to.

Sessions are children of the agent's nursery (each with a nursery of its own, see
`session.py`), so closing the agent closes every session, and nothing outlives it.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_acp import schema
from trio_acp.connection import AgentHooks, ClientProxy
from trio_acp.credentials import SecretValues, secret_values
from trio_acp.openhands.auth_status import AuthStatusReporter, auth_status
from trio_acp.openhands.backends.agent_server_api import RemoteError
from trio_acp.openhands.backends.agent_server_config import (
    AgentServerConfigError,
    AgentServerTarget,
    load_agent_server,
)
from trio_acp.openhands.backends.local_conversation import fork_stored
from trio_acp.openhands.backends.remote_conversation import (
    delete_on_server,
    fork_on_server,
    preload_remote_client,
    session_server,
)
from trio_acp.openhands.editor.session_roots import RootsError, SessionRoots, parse_roots
from trio_acp.openhands.errors import (
    busy,
    explained,
    internal,
    leaves,
    not_configured,
    reraise,
    unknown_session,
)
from trio_acp.openhands.sdk import SdkLoader, build_agent, build_llm
from trio_acp.openhands.sessions import commands, deferred_build, session_meta, turn_usage
from trio_acp.openhands.sessions import system_prompt as system_prompts
from trio_acp.openhands.sessions.build import (
    SessionPlan,
    build_session,
    build_session_later,
    open_failure,
    short,
)
from trio_acp.openhands.sessions.collector import collector_paused
from trio_acp.openhands.sessions.session import Session
from trio_acp.openhands.sessions.store import (
    RULES_FILE,
    DeleteError,
    SessionStore,
    parse_session_id,
)
from trio_acp.openhands.setup.agent_spec import session_tools
from trio_acp.openhands.setup.audio_input import (
    check_audio,
    model_fields,
)
from trio_acp.openhands.setup.critic_review import settings_notice
from trio_acp.openhands.setup.models import model_choices
from trio_acp.openhands.setup.settings import Settings, SettingsError, load_settings
from trio_acp.openhands.setup.user_setup import mcp_file_secrets, stored_tools
from trio_acp.openhands.sign_in import SignIn
from trio_acp.openhands.translate.plans import spell_for_client
from trio_acp.rpc import FrameMask, RequestError, after_response
from trio_acp.schema import unstable

log = logging.getLogger(__name__)


def validate_session_id(session_id: str) -> uuid.UUID:
    """The boundary: a request's session id, parsed once into the UUID used inside.

    Session ids are UUIDs we made; anything else never reaches a path.
    """
    sid = parse_session_id(session_id)
    if sid is None:
        raise unknown_session(session_id)
    return sid


class OpenHandsAgent(AgentHooks):
    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        sdk_loader: SdkLoader | None = None,
        env=None,
        secrets: SecretValues | None = None,
        agent_server_url: str | None = None,
        sign_in: SignIn | None = None,
    ) -> None:
        self._nursery = nursery
        # `--agent-server URL` (agent_server_config.py reads the rest of that setting).
        self._agent_server_url = agent_server_url
        self._sdk_loader = sdk_loader or SdkLoader()
        preload_remote_client(agent_server_url, env, self._sdk_loader)
        self._env = env
        # The credential values to mask (credentials.py): in every frame a connection
        # writes (`mask_frame`), in files and in logs.
        self.secrets = secrets if secrets is not None else SecretValues()
        self._client: Any = None
        self._sessions: dict[uuid.UUID, Session] = {}
        self._locks: dict[uuid.UUID, trio.Lock] = {}
        # Prompts the reader has registered with their session, by the identity of their
        # (decoded once) params, until their task picks them up (`prompt_received`).
        self._received_prompts: dict[int, tuple[schema.PromptRequest, Session]] = {}
        # initialize, authenticate, logout, and what a missing model's answer says (the
        # front's, when it answered `initialize`: openhands/front.py).
        self._sign_in = sign_in if sign_in is not None else SignIn(env)
        self._auth_reporter = AuthStatusReporter()

    def on_connect(self, client: ClientProxy) -> None:
        self._client = client
        if hasattr(client, "update_hook"):  # the plan as the client takes it (plans.py)
            client.update_hook = spell_for_client

    def _settings(self) -> Settings:
        try:
            settings = load_settings(self._env)
        except SettingsError as exc:
            raise not_configured(str(exc)) from None
        # Masked from now on, before anything can quote them (a validation error, say).
        self.secrets.add(secret_values(settings.llm or {}))
        self.secrets.add(mcp_file_secrets(settings.persistence_dir))
        return settings

    def _agent_server(self) -> AgentServerTarget | None:
        """The agent-server new sessions run on (docs/agent-server.md), or None: here."""
        try:
            target = load_agent_server(self._env, flag_url=self._agent_server_url)
        except AgentServerConfigError as exc:
            raise not_configured(str(exc)) from None
        if target is not None and target.api_key:
            self.secrets.add([target.api_key])
        return target

    def frame_mask(self) -> FrameMask:
        """The connection's writer masks every frame with it, whatever made the frame and
        whatever the stream (`trio_acp.connection.AgentHooks`; docs/ARCHITECTURE.md#d12)."""
        return self.mask_frame

    def mask_frame(self, data: bytes) -> bytes:
        """The agent's credentials masked in bytes it writes."""
        return self.secrets.mask_bytes(data)

    # --- initialize / auth (sign_in.py) ----------------------------------------------

    async def initialize(self, params: schema.InitializeRequest) -> schema.InitializeResponse:
        return self._sign_in.initialize(params)

    @explained("authenticate")
    async def authenticate(self, params: schema.AuthenticateRequest) -> schema.AuthenticateResponse:
        self._sign_in.authenticate(params, self._settings())
        after_response(self._tell_auth_status)
        return schema.AuthenticateResponse()

    async def logout(self, params: schema.LogoutRequest) -> schema.LogoutResponse:
        """Forget the credentials this process holds, until the user configures again.

        Live sessions hold the key in their LLM: they are closed (their turns cancelled
        as by session/cancel; their history stays on disk for session/load). Until the
        settings file is written again (the terminal set-up, the OpenHands CLI, an edit)
        or the client calls `authenticate`, creating, loading, resuming or forking a
        session answers -32000 (`SignIn.check_logged_in`). The settings file itself is
        left alone: it is the user's, shared with the OpenHands CLI, and an `LLM_*`
        variable could not be unset anyway.
        """
        self._sign_in.log_out()
        sessions, self._sessions = list(self._sessions.values()), {}
        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(session.close)
        after_response(self._tell_auth_status)
        return schema.LogoutResponse()

    async def auth_status(self, params: unstable.AuthStatusRequest) -> unstable.AuthStatusResponse:
        return self._auth_reporter.asked(self._auth_status_now())

    def _auth_status_now(self) -> unstable.AuthStatusResponse:
        return auth_status(self._env, self._sign_in.still_logged_out)

    async def _tell_auth_status(self) -> None:
        await self._auth_reporter.maybe_tell(self._client, self._auth_status_now())

    # --- sessions ---------------------------------------------------------------------

    def _check_cwd(self, cwd: str) -> None:
        if not os.path.isabs(cwd):
            raise RequestError.invalid_params(f"cwd must be an absolute path, got {cwd!r}")
        if not os.path.isdir(cwd):
            raise RequestError.invalid_params(f"cwd is not an existing directory: {cwd}")

    def _roots(self, cwd: str, additional: list[str] | None) -> SessionRoots:
        """`cwd` + the request's additionalDirectories; a bad entry is the client's error."""
        self._check_cwd(cwd)
        try:
            return parse_roots(cwd, additional)
        except RootsError as exc:
            raise RequestError.invalid_params(str(exc)) from None

    async def _open_session(
        self,
        sid: uuid.UUID,
        cwd: str,
        mcp_servers: list[Any] | None,
        additional: list[str] | None = None,
        *,
        fresh: bool = False,
        system_prompt: system_prompts.ClientSystemPrompt | None = None,
    ) -> Session:
        """Start a session (new, or an existing conversation from disk) in the agent's nursery."""
        roots = self._roots(cwd, additional)
        settings = self._settings()
        if settings.llm is None:
            raise not_configured(self._sign_in.missing_model(settings))
        self._sign_in.check_logged_in()
        try:
            models = model_choices(settings, self._env)
        except SettingsError as exc:
            raise not_configured(str(exc)) from None
        store = SessionStore(settings.conversations_dir)
        existing = store.exists(sid)
        stored_url = store.agent_server(sid) if existing else None
        # Where the conversation runs; a setting that cannot be used fails before the SDK
        # import is waited for.
        server = session_server(
            self._agent_server() if stored_url or not existing else None,
            sid,
            stored_url,
            existing=existing,
        )
        plan = SessionPlan(
            sid=sid,
            cwd=cwd,
            roots=roots,
            mcp_servers=mcp_servers,
            settings=settings,
            models=models,
            store=store,
            existing=existing,
            fresh=fresh,
            server=server,
            system_prompt=system_prompt,
        )
        sdk = None
        if fresh and server is None and (deferred_build.always() or not self._sdk_loader.ready):
            # Answered before the SDK's import is over; built once it is
            # (sessions/deferred_build.py).
            session, setup = build_session_later(
                plan, self._sdk_loader, env=self._env, secrets=self.secrets, client=self._client
            )
        else:
            sdk = await self._sdk_loader.get()
            session, setup = await build_session(
                plan, sdk, env=self._env, secrets=self.secrets, client=self._client
            )
        try:
            await self._nursery.start(session.serve)
        except Exception as exc:
            log.exception("starting session %s failed", sid)
            # A remote session's files are on the server: no local damage to look for.
            raise await open_failure(
                sdk, store, sid, exc, existing=existing and server is None
            ) from None
        if self._sign_in.logged_out:  # a logout came while this session was starting
            await session.close()
            raise not_configured("logged out while the session was starting")
        self._sessions[sid] = session
        try:
            if server is not None:
                store.write_agent_server(sid, server.url)
            store.write_index(sid, cwd=cwd, roots=roots)
            if fresh:
                system_prompts.write_stored(store.dir_for(sid), system_prompt)
        except OSError:
            # Only session/list reads the index; the session itself is fine.
            log.warning("could not write the session index of %s", sid, exc_info=True)
        # Session-level updates go after the response, never before it.
        after_response(lambda: session.send_update(commands.available_commands()))
        if setup.cli.warning is not None:
            log.warning("%s", setup.cli.warning)
            if (notice := settings_notice(self._client, setup.cli.warning)) is not None:
                after_response(lambda: session.send_update(notice))
        after_response(session.published)
        return session

    @explained("session/new")
    async def new_session(self, params: unstable.NewSessionRequest) -> schema.NewSessionResponse:
        session = await self._open_session(
            uuid.uuid4(),
            params.cwd,
            params.mcp_servers,
            params.additional_directories,
            fresh=True,
            system_prompt=system_prompts.parse(params.system_prompt),
        )
        return schema.NewSessionResponse(
            session_id=str(session.id),
            modes=session.options.mode_state(),
            config_options=session.options.config_options(),
        )

    def _lock_for(self, sid: uuid.UUID) -> trio.Lock:
        # Reopening and deleting a session close and re-register it across awaits: one at a
        # time per id, or two loads could both open it and orphan one.
        return self._locks.setdefault(sid, trio.Lock())

    async def _existing(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: list[Any] | None,
        additional: list[str] | None = None,
        system_prompt: unstable.SystemPrompt | None = None,
    ) -> Session:
        sid = validate_session_id(session_id)
        async with self._lock_for(sid):
            return await self._reopen(sid, cwd, mcp_servers, additional, system_prompt)

    async def _reopen(
        self,
        sid: uuid.UUID,
        cwd: str,
        mcp_servers: list[Any] | None,
        additional: list[str] | None = None,
        system_prompt: unstable.SystemPrompt | None = None,
    ) -> Session:
        # Before anything is closed: a load with a bad cwd (or extra root, or a system
        # prompt it cannot take) must leave the live session be.
        self._roots(cwd, additional)
        prompt = system_prompts.for_existing(
            system_prompts.parse(system_prompt),
            system_prompts.read_stored(
                SessionStore(self._settings().conversations_dir).dir_for(sid)
            ),
        )
        live = self._sessions.get(sid)
        if live is not None:
            if live.busy:
                raise busy(f"session {sid} is running a prompt turn; cancel it first")
            # A session still being built (deferred_build.py) is on disk once it is open.
            await live.until_open()
            # Reopen from disk so the new cwd and MCP servers apply; history is on disk.
            self._sessions.pop(live.id, None)
            await live.close()
        if not SessionStore(self._settings().conversations_dir).exists(sid):
            raise unknown_session(sid)
        return await self._open_session(sid, cwd, mcp_servers, additional, system_prompt=prompt)

    @explained("session/load")
    async def load_session(self, params: unstable.LoadSessionRequest) -> schema.LoadSessionResponse:
        with collector_paused():  # opening and replaying a long history (collector.py)
            session = await self._existing(
                params.session_id,
                params.cwd,
                params.mcp_servers,
                params.additional_directories,
                params.system_prompt,
            )
            # The whole history, user messages included, before the response (§6.2).
            await session.replay_history()
        return schema.LoadSessionResponse(
            modes=session.options.mode_state(), config_options=session.options.config_options()
        )

    @explained("session/resume")
    async def resume_session(
        self, params: unstable.ResumeSessionRequest
    ) -> schema.ResumeSessionResponse:
        # Like load, but the client already shows the history: no replay.
        session = await self._existing(
            params.session_id,
            params.cwd,
            params.mcp_servers,
            params.additional_directories,
            params.system_prompt,
        )
        return schema.ResumeSessionResponse(
            modes=session.options.mode_state(), config_options=session.options.config_options()
        )

    async def fork_session(
        self, params: unstable.ForkSessionRequest
    ) -> unstable.ForkSessionResponse:
        """session/fork (unstable): a new session with the parent's whole history.

        The SDK's `Conversation.fork` copies the history into a conversation of its own
        on disk (the parent is not touched); the fork is then opened like any stored
        session, with the request's cwd and MCP servers, and is listed and loadable like
        one. A live parent's choices (mode, model, reasoning effort, streaming) and its
        "always" rules carry over. The schema has no cut point: the whole history.
        """
        sid = validate_session_id(params.session_id)
        roots = self._roots(params.cwd, params.additional_directories)
        settings = self._settings()
        if settings.llm is None:
            raise not_configured(self._sign_in.missing_model(settings))
        self._sign_in.check_logged_in()
        store = SessionStore(settings.conversations_dir)
        # The fork's history starts with its parent's system message (system_prompt.py).
        prompt = system_prompts.for_existing(
            system_prompts.parse(params.system_prompt),
            system_prompts.read_stored(store.dir_for(sid)),
        )
        fork_id = uuid.uuid4()
        values: dict[str, Any] = {}
        async with self._lock_for(sid):
            live = self._sessions.get(sid)
            if live is not None:
                if live.busy:
                    raise busy(
                        f"session {sid} is running a prompt turn; fork it when the turn is over"
                    )
                values = live.options.config_values()
                try:
                    await live.fork_conversation(fork_id)
                except Exception as exc:
                    log.exception("forking session %s failed", sid)
                    await trio.to_thread.run_sync(store.delete, fork_id)
                    raise internal(f"could not fork session {sid}: {short(exc)}") from None
            elif store.exists(sid):
                values = store.read_options(sid)  # the choices it was saved with
                stored_url = store.agent_server(sid)
                if stored_url is None:
                    await self._fork_stored(sid, fork_id, settings, store)
                else:
                    server = session_server(self._agent_server(), sid, stored_url, existing=True)
                    assert server is not None
                    try:
                        await fork_on_server(server, sid, fork_id)
                    except RemoteError as exc:
                        raise internal(f"could not fork session {sid}: {exc}") from None
            else:
                raise unknown_session(sid)
        parent = store.read(store.dir_for(sid))
        rules = store.dir_for(sid) / RULES_FILE
        try:
            if rules.is_file():
                store.dir_for(fork_id).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(rules, store.dir_for(fork_id) / RULES_FILE)
            system_prompts.write_stored(store.dir_for(fork_id), prompt)
            session = await self._open_session(
                fork_id,
                params.cwd,
                params.mcp_servers,
                params.additional_directories,
                system_prompt=prompt,
            )
        except BaseException:
            await trio.to_thread.run_sync(store.delete, fork_id)
            raise
        if parent is not None and parent.title:
            store.write_index(fork_id, cwd=params.cwd, title=f"{parent.title} (fork)", roots=roots)
            session.keep_title()
        current = session.options.config_values()
        for config_id, value in values.items():
            if current.get(config_id) == value:
                # Nothing to change; and a change waits for the SDK's lock, which the
                # fork's tool warm-up holds for about a second.
                continue
            try:
                await session.options.set_config_option(config_id, value)
            except RequestError as exc:
                log.warning(
                    "the fork %s could not take %s=%r: %s", fork_id, config_id, value, exc.message
                )
        return unstable.ForkSessionResponse(
            session_id=str(session.id),
            modes=session.options.mode_state(),
            config_options=session.options.config_options(),
        )

    async def _fork_stored(
        self, sid: uuid.UUID, fork_id: uuid.UUID, settings: Settings, store: SessionStore
    ) -> None:
        """Fork a session that is not open here: its conversation is opened from disk just
        for the copy (in its own cwd, so its stored state keeps it), then closed."""
        sdk = await self._sdk_loader.get()
        stored = store.read(store.dir_for(sid))
        try:
            agent = build_agent(sdk, build_llm(sdk, settings.llm or {}))
        except Exception as exc:
            raise not_configured(f"the model settings are not usable: {short(exc)}") from None
        # With the tools it was made with: the SDK refuses to open it with fewer.
        tools = await trio.to_thread.run_sync(stored_tools, store.dir_for(sid))
        agent = agent.model_copy(update={"tools": session_tools(sdk, tools)})

        fork = functools.partial(
            fork_stored,
            sdk,
            agent,
            workspace=stored.cwd if stored is not None else str(store.dir_for(sid)),
            persistence_dir=str(store.root),
            conversation_id=sid,
            fork_id=fork_id,
        )
        try:
            await trio.to_thread.run_sync(fork)
        except Exception as exc:
            log.exception("forking the stored session %s failed", sid)
            await trio.to_thread.run_sync(store.delete, fork_id)
            raise internal(f"could not fork session {sid}: {short(exc)}") from None

    @explained("session/list")
    async def list_sessions(
        self, params: schema.ListSessionsRequest
    ) -> schema.ListSessionsResponse:
        if params.cwd is not None and not os.path.isabs(params.cwd):
            raise RequestError.invalid_params(f"cwd must be an absolute path, got {params.cwd!r}")
        store = SessionStore(self._settings().conversations_dir)
        try:
            page, cursor = await trio.to_thread.run_sync(store.list, params.cwd, params.cursor)
        except ValueError as exc:
            raise RequestError.invalid_params(str(exc)) from None
        return schema.ListSessionsResponse(
            sessions=[
                schema.SessionInfo(
                    session_id=s.session_id,
                    cwd=s.cwd,
                    title=s.title,
                    updated_at=s.updated_at,
                    additional_directories=s.additional_directories or None,
                )
                for s in page
            ],
            next_cursor=cursor,
        )

    @explained("session/delete")
    async def delete_session(
        self, params: schema.DeleteSessionRequest
    ) -> schema.DeleteSessionResponse:
        sid = parse_session_id(params.session_id)
        if sid is None:
            return schema.DeleteSessionResponse()  # unknown ids succeed silently (spec: SHOULD)
        async with self._lock_for(sid):
            live = self._sessions.pop(sid, None)
            if live is not None:
                await live.close()
            store = SessionStore(self._settings().conversations_dir)
            stored_url, warning = store.agent_server(sid), None
            if stored_url is not None:
                warning = await delete_on_server(self._agent_server(), sid, stored_url)
            try:
                await trio.to_thread.run_sync(store.delete, sid)
            except DeleteError as exc:
                raise internal(f"could not delete session {sid}: {exc}") from None
        if warning is not None:  # the conversation stays on its agent-server: say where
            log.warning("%s", warning)
            return schema.DeleteSessionResponse(meta={"trioAcp": {"warning": warning}})
        return schema.DeleteSessionResponse()

    @explained("session/set_mode")
    async def set_session_mode(
        self, params: schema.SetSessionModeRequest
    ) -> schema.SetSessionModeResponse:
        session = self._session(params.session_id)
        await session.until_open()  # the mode is set on its conversation
        await session.options.set_mode(params.mode_id, announce=False)
        # The mode changed by other means than set_config_option: keep both views in sync.
        after_response(session.options.announce_mode)
        return schema.SetSessionModeResponse()

    @explained("session/set_config_option")
    async def set_session_config_option(
        self, params: schema.SetSessionConfigOptionRequest
    ) -> schema.SetSessionConfigOptionResponse:
        session = self._session(params.session_id)
        await session.until_open()  # the options are set on its conversation
        before = session.options.mode
        options = await session.options.set_config_option(params.config_id, params.value)
        if session.options.mode != before:
            after_response(
                lambda: session.send_update(
                    schema.CurrentModeUpdate(current_mode_id=session.options.mode)
                )
            )
        return schema.SetSessionConfigOptionResponse(config_options=options)

    @explained("session/set_title")
    async def set_session_title(
        self, params: unstable.SetSessionTitleRequest
    ) -> unstable.SetSessionTitleResponse:
        store = SessionStore(self._settings().conversations_dir)
        return await session_meta.set_title(params, self._sessions, store)

    @explained("session/status")
    async def session_status(
        self, params: unstable.SessionStatusRequest
    ) -> unstable.SessionStatusResponse:
        store = SessionStore(self._settings().conversations_dir)
        return session_meta.status(params, self._sessions, store)

    def _session(self, session_id: str) -> Session:
        session = self._sessions.get(validate_session_id(session_id))
        if session is None:
            raise unknown_session(session_id)
        session.check_alive()
        return session

    def prompt_received(self, params: schema.PromptRequest) -> None:
        """The connection's reader read a prompt (wire order, before its task starts).

        It is queued with its session right here, so that a `session/cancel` read right
        behind it finds it, whatever order the tasks then run in (turn_queue.py). Its
        `prompt` call gets this same `params` object: that is the prompt's key.
        """
        sid = parse_session_id(params.session_id)
        session = self._sessions.get(sid) if sid is not None else None
        if session is None:
            return
        self._received_prompts[id(params)] = (params, session)
        session.prompt_received(id(params))

    @explained("session/prompt")
    async def prompt(self, params: schema.PromptRequest) -> schema.PromptResponse:
        # The session the prompt was queued with, even if it has since been closed (the
        # prompt then answers `cancelled`, as close cancels what was sent before it).
        received = self._received_prompts.pop(id(params), None)
        session = received[1] if received is not None else self._session(params.session_id)
        key = id(params) if received is not None else None
        try:
            check_audio(params.prompt, model_fields(session.options.model, session.options.models))
        except RequestError:
            if key is not None:
                session.forget_prompt(key)  # refused before its turn: nothing waits behind it
            raise
        response = await session.prompt(params.prompt, key=key)
        return turn_usage.for_client(response, getattr(self._client, "capabilities", None))

    async def cancel(self, params: schema.CancelNotification) -> None:
        try:
            session = self._session(params.session_id)
        except RequestError:
            return  # a notification: nobody to tell
        session.request_cancel()

    @explained("session/close")
    async def close_session(
        self, params: schema.CloseSessionRequest
    ) -> schema.CloseSessionResponse:
        session = self._session(params.session_id)
        self._sessions.pop(session.id, None)
        await session.close()
        return schema.CloseSessionResponse()

    async def aclose(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(session.close)


@asynccontextmanager
async def open_openhands_agent(**kwargs: Any) -> AsyncIterator[OpenHandsAgent]:
    """The agent for the duration of the block; leaving it closes every session.

    Like `rpc.open_peer`, it raises one exception, never Trio's group: the body's own
    exception as itself, else the one failure inside (each session has an error boundary
    of its own, so a failing session never gets here).
    """
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            agent = OpenHandsAgent(nursery, **kwargs)
            try:
                yield agent
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                with trio.move_on_after(10, shield=True):
                    await agent.aclose()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if body_error is not None:
            mine = {id(leaf) for leaf in leaves(body_error)}
            for leaf in leaves(group):
                if id(leaf) not in mine and not isinstance(leaf, trio.Cancelled):
                    log.error("the OpenHands agent failed", exc_info=leaf)
            reraise(body_error)
        failures = [
            leaf for leaf in leaves(group) if not isinstance(leaf, trio.Cancelled)
        ] or leaves(group)
        for leaf in failures[1:]:
            log.error("the OpenHands agent failed", exc_info=leaf)
        reraise(failures[0])
