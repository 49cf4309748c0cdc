"""Opening a session for the agent: new, or reopened from disk (load, resume).

`SessionOpening` is the part of `OpenHandsAgent` (`openhands/agent.py`) that checks a
request's cwd and roots, reads the settings, picks where the conversation runs (here or an
agent-server), builds the session (`build.py`) and starts it in the agent's nursery; and the
per-id lock that keeps two reopenings of one session apart. Forking builds on it
(`forking.py`).
"""

from __future__ import annotations

import functools
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from trio_acp import schema
from trio_acp.credentials import SecretValues, secret_values
from trio_acp.openhands.backends.agent_server_config import (
    AgentServerConfigError,
    AgentServerTarget,
    load_agent_server,
)
from trio_acp.openhands.backends.remote_conversation import session_server
from trio_acp.openhands.editor.session_roots import RootsError, SessionRoots, parse_roots
from trio_acp.openhands.errors import busy, not_configured, unknown_session
from trio_acp.openhands.sdk import SdkLoader
from trio_acp.openhands.sessions import commands, deferred_build, stored_load
from trio_acp.openhands.sessions import system_prompt as system_prompts
from trio_acp.openhands.sessions.build import (
    SessionPlan,
    build_session,
    build_session_later,
    open_failure,
)
from trio_acp.openhands.sessions.session import Session
from trio_acp.openhands.sessions.store import SessionStore, parse_session_id
from trio_acp.openhands.setup.critic import may_have_critic
from trio_acp.openhands.setup.critic_review import settings_notice
from trio_acp.openhands.setup.models import model_choices
from trio_acp.openhands.setup.settings import Settings, SettingsError, load_settings
from trio_acp.openhands.setup.user_setup import mcp_file_secrets
from trio_acp.openhands.sign_in import SignIn
from trio_acp.rpc import RequestError, after_response
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


class SessionOpening:
    """The agent's session opening; `OpenHandsAgent.__init__` sets this state."""

    _nursery: trio.Nursery
    _agent_server_url: str | None
    _sdk_loader: SdkLoader
    _env: Mapping[str, str] | None
    secrets: SecretValues
    # The ClientProxy once connected (`on_connect`), None before: sessions take it as it is.
    _client: Any
    _sessions: dict[uuid.UUID, Session]
    _locks: dict[uuid.UUID, trio.Lock]
    _sign_in: SignIn

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
        mcp_servers: list[schema.McpServer] | None,
        additional: list[str] | None = None,
        *,
        fresh: bool = False,
        system_prompt: system_prompts.ClientSystemPrompt | None = None,
        replay: bool = False,
    ) -> Session:
        """Start a session (new, or an existing conversation from disk) in the agent's
        nursery. `replay`: for session/load, which replays its history before the SDK
        opens the conversation (sessions/stored_load.py)."""
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
        elif replay and existing and server is None:
            # Replayed from its files, opened by the SDK after (sessions/stored_load.py).
            sdk = await self._sdk_loader.get()
            history = await stored_load.read_history(sdk, store, sid)
            session, setup = build_session_later(
                plan, self._sdk_loader, env=self._env, secrets=self.secrets, client=self._client
            )
            if may_have_critic(settings, setup):
                history = None  # its verdicts replay with the critic the open sets up
            session.stored_load = stored_load.StoredLoad(
                history,
                functools.partial(open_failure, sdk, store, sid, existing=True),
                saved=store.read_options(sid),
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

        # Session-level updates go after the response, never before it; and not at all
        # once the request failed after all (a load whose replay failed unregisters it).
        def if_live(update: schema.SessionUpdate) -> Callable[[], Awaitable[None]]:
            async def send() -> None:
                if self._sessions.get(sid) is session:
                    await session.send_update(update)

            return send

        after_response(if_live(commands.available_commands()))
        if setup.cli.warning is not None:
            log.warning("%s", setup.cli.warning)
            if (notice := settings_notice(self._client, setup.cli.warning)) is not None:
                after_response(if_live(notice))
        after_response(session.published)
        return session

    def _lock_for(self, sid: uuid.UUID) -> trio.Lock:
        # Reopening and deleting a session close and re-register it across awaits: one at a
        # time per id, or two loads could both open it and orphan one.
        return self._locks.setdefault(sid, trio.Lock())

    async def _existing(
        self,
        session_id: str,
        cwd: str,
        mcp_servers: list[schema.McpServer] | None,
        additional: list[str] | None = None,
        system_prompt: unstable.SystemPrompt | None = None,
        *,
        replay: bool = False,
    ) -> Session:
        sid = validate_session_id(session_id)
        async with self._lock_for(sid):
            return await self._reopen(
                sid, cwd, mcp_servers, additional, system_prompt, replay=replay
            )

    async def _reopen(
        self,
        sid: uuid.UUID,
        cwd: str,
        mcp_servers: list[schema.McpServer] | None,
        additional: list[str] | None = None,
        system_prompt: unstable.SystemPrompt | None = None,
        *,
        replay: bool = False,
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
        return await self._open_session(
            sid, cwd, mcp_servers, additional, system_prompt=prompt, replay=replay
        )
