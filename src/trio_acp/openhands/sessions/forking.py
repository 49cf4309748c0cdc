"""Forking a session (session/fork, unstable) for the agent.

`SessionForking` is the part of `OpenHandsAgent` (`openhands/agent.py`) that copies a
session's history into a new one: through the live session, or from disk (a local
conversation opened just for the copy, or the agent-server that holds it), then opens the
fork like any stored session (`opening.py`) with its parent's choices and rules.
"""

from __future__ import annotations

import functools
import logging
import shutil
import uuid
from typing import TYPE_CHECKING

import trio

from trio_acp.openhands.backends.agent_server_api import RemoteError
from trio_acp.openhands.backends.remote_conversation import fork_on_server, session_server
from trio_acp.openhands.errors import busy, internal, not_configured, unknown_session
from trio_acp.openhands.sdk import build_agent, build_llm, fork_conversation
from trio_acp.openhands.sessions import system_prompt as system_prompts
from trio_acp.openhands.sessions.build import short
from trio_acp.openhands.sessions.opening import SessionOpening, validate_session_id
from trio_acp.openhands.sessions.store import RULES_FILE, SessionStore
from trio_acp.openhands.setup.agent_spec import session_tools
from trio_acp.openhands.setup.settings import Settings
from trio_acp.openhands.setup.user_setup import stored_tools
from trio_acp.rpc import RequestError
from trio_acp.schema import unstable

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import Agent
    from trio_acp.openhands.sdk.loaded import Sdk

log = logging.getLogger(__name__)


class SessionForking(SessionOpening):
    """session/fork, on top of the agent's session opening."""

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
        values: dict[str, str | bool] = {}
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


def fork_stored(
    sdk: Sdk,
    agent: Agent,
    *,
    workspace: str,
    persistence_dir: str,
    conversation_id: uuid.UUID,
    fork_id: uuid.UUID,
) -> None:
    """Copy a stored conversation that is not open here to `fork_id` on disk; blocking (run
    it in a worker thread). The conversation is opened just for the copy, then closed."""
    conv = sdk.Conversation(
        agent=agent,
        workspace=workspace,
        persistence_dir=persistence_dir,
        conversation_id=conversation_id,
        visualizer=None,
    )
    try:
        fork_conversation(sdk, conv, fork_id)
    finally:
        conv.close()
