"""The OpenHands-backed ACP agent: the `Agent` the connection dispatches to.

Sessions are children of the agent's nursery (each with a nursery of its own, see
`session.py`), so closing the agent closes every session, and nothing outlives it.
Opening and reopening a session is `sessions/opening.py`, forking one `sessions/forking.py`
(the agent is made of both).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import trio

from trio_acp import schema
from trio_acp.connection import AgentHooks, ClientProxy
from trio_acp.credentials import SecretValues
from trio_acp.openhands.auth_status import AuthStatusReporter, auth_status
from trio_acp.openhands.backends.remote_conversation import (
    delete_on_server,
    preload_remote_client,
)
from trio_acp.openhands.errors import (
    explained,
    internal,
    leaves,
    reraise,
    unknown_session,
)
from trio_acp.openhands.sdk import SdkLoader, shell_starts
from trio_acp.openhands.sessions import (
    archive,
    session_meta,
    stored_load,
    tool_call_stop,
    turn_usage,
)
from trio_acp.openhands.sessions import system_prompt as system_prompts
from trio_acp.openhands.sessions.collector import collector_paused
from trio_acp.openhands.sessions.forking import SessionForking
from trio_acp.openhands.sessions.opening import validate_session_id
from trio_acp.openhands.sessions.session import Session
from trio_acp.openhands.sessions.store import (
    DeleteError,
    SessionStore,
    parse_session_id,
)
from trio_acp.openhands.setup.audio_input import (
    check_audio,
    model_fields,
)
from trio_acp.openhands.sign_in import SignIn
from trio_acp.openhands.translate.messages import prompt_message_id
from trio_acp.openhands.translate.subagents import SubagentSessions
from trio_acp.rpc import FrameMask, RequestError, after_response
from trio_acp.schema import unstable

log = logging.getLogger(__name__)

# How long leaving waits for shells still running their start-up (`aclose`): a ~/.bashrc
# takes 0.1-1 s; one that takes longer is hung up mid-way.
SHELL_STARTS_WAIT = 5.0


class OpenHandsAgent(SessionForking, AgentHooks):
    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        sdk_loader: SdkLoader | None = None,
        env: Mapping[str, str] | None = None,
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
        self._client: Any = None  # see SessionOpening._client
        self._sessions: dict[uuid.UUID, Session] = {}
        self._locks: dict[uuid.UUID, trio.Lock] = {}
        # Prompts the reader has registered with their session, by the identity of their
        # (decoded once) params, until their task picks them up (`prompt_received`).
        self._received_prompts: dict[int, tuple[schema.PromptRequest, Session]] = {}
        # initialize, authenticate, logout, and what a missing model's answer says (the
        # front's, when it answered `initialize`: openhands/front.py).
        self._sign_in = sign_in if sign_in is not None else SignIn(env)
        self._auth_reporter = AuthStatusReporter()
        # Sub-agents as child sessions, for a client with `subagents` (subagents.py).
        self._subagent_sessions = SubagentSessions()

    def on_connect(self, client: ClientProxy) -> None:
        self._client = client
        if hasattr(client, "update_hook"):
            # The plan as the client takes it, sub-agents as child sessions for a client
            # with `subagents` (translate/plans.py, translate/subagents.py).
            client.update_hook = self._subagent_sessions.spell

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

    @explained("session/load")
    async def load_session(self, params: unstable.LoadSessionRequest) -> schema.LoadSessionResponse:
        with collector_paused():  # opening and replaying a long history (collector.py)
            session = await self._existing(
                params.session_id,
                params.cwd,
                params.mcp_servers,
                params.additional_directories,
                params.system_prompt,
                replay=True,
            )
            # The whole history, user messages included, before the response (§6.2).
            try:
                await session.replay_history()
            except Exception:
                # Not opened (damaged files: the error says which): no session, as before.
                if self._sessions.get(session.id) is session:
                    del self._sessions[session.id]
                await session.close()
                raise
        modes, options = stored_load.answer(session)
        return schema.LoadSessionResponse(modes=modes, config_options=options)

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

    @explained("session/list")
    async def list_sessions(
        self, params: schema.ListSessionsRequest
    ) -> schema.ListSessionsResponse:
        if params.cwd is not None and not os.path.isabs(params.cwd):
            raise RequestError.invalid_params(f"cwd must be an absolute path, got {params.cwd!r}")
        archived = archive.archive_filter(params)  # unstable (sessions/archive.py)
        flagged = archive.reports_archived(params, getattr(self._client, "capabilities", None))
        store = SessionStore(self._settings().conversations_dir)
        try:
            page, cursor = await trio.to_thread.run_sync(
                store.list, params.cwd, params.cursor, archived
            )
        except ValueError as exc:
            raise RequestError.invalid_params(str(exc)) from None
        return unstable.ListSessionsResponse(
            sessions=[
                unstable.SessionInfo(
                    session_id=s.session_id,
                    cwd=s.cwd,
                    title=s.title,
                    updated_at=s.updated_at,
                    additional_directories=s.additional_directories or None,
                    archived=s.archived if flagged else None,
                )
                for s in page
            ],
            next_cursor=cursor,
        )

    @explained("session/archive")
    async def archive_session(
        self, params: unstable.ArchiveSessionRequest
    ) -> unstable.ArchiveSessionResponse:
        store = SessionStore(self._settings().conversations_dir)

        async def close(sid: uuid.UUID) -> None:  # as session/close closes it
            live = self._sessions.pop(sid, None)
            if live is not None:
                await live.close()

        sid = parse_session_id(params.session_id)
        if sid is None:
            return await archive.archive(params, self._sessions, store, close)
        async with self._lock_for(sid):  # not while it is being loaded or deleted
            return await archive.archive(params, self._sessions, store, close)

    @explained("session/unarchive")
    async def unarchive_session(
        self, params: unstable.UnarchiveSessionRequest
    ) -> unstable.UnarchiveSessionResponse:
        store = SessionStore(self._settings().conversations_dir)
        return await archive.unarchive(params, self._sessions, store)

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
        self._subagent_sessions.prompt_received(params.session_id)
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
        # The id the client has for this message (a v2 client's: v2/gateway.py), kept
        # with it for replays (translate/messages.py).
        message_id = prompt_message_id(params.meta)
        response = await session.prompt(params.prompt, key=key, message_id=message_id)
        return turn_usage.for_client(response, getattr(self._client, "capabilities", None))

    async def cancel(self, params: schema.CancelNotification) -> None:
        try:
            session = self._session(params.session_id)
        except RequestError:
            return  # a notification: nobody to tell
        self._subagent_sessions.cancel_requested(params.session_id)
        session.request_cancel()

    @explained("stopping a tool call")
    async def ext_method(self, method: str, params: Any) -> Any:
        """Our extension methods: `_trio_acp/stop_tool_call`, one tool call stopped while
        its turn goes on (ACP v2's tool_call/cancel, through the v2 gateway)."""
        if method != tool_call_stop.STOP_TOOL_CALL:
            raise RequestError.method_not_found(method)
        session_id, call_id = tool_call_stop.tool_call_id(params)
        return await tool_call_stop.stop(self._session(session_id), call_id)

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
        if shell_starts.count():
            # Shells closed mid-start-up are ended by their start's thread once their
            # ~/.bashrc is over (sdk/terminal_start.py): leaving now would hang them up
            # mid-way, as the process's exit closes their terminals.
            await trio.to_thread.run_sync(
                shell_starts.wait, SHELL_STARTS_WAIT, abandon_on_cancel=True
            )


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
