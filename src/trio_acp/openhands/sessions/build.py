"""What a session is made of, built from the agent's settings: its model, the user's
OpenHands set-up (`user_setup.py`), its SDK agent (`agent_spec.py`), and where its
conversation runs (in this process, or on an agent-server: docs/agent-server.md).

`agent.py` decides *which* session to open (new, reopened, forked) and registers it; this
module assembles one, and says what to tell the user when it cannot be opened.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

import attrs
import trio

from trio_acp import schema
from trio_acp.credentials import SecretValues
from trio_acp.openhands.backends.agent_server_config import AgentServerTarget
from trio_acp.openhands.backends.remote_conversation import ServerConversation
from trio_acp.openhands.editor.session_roots import SessionRoots
from trio_acp.openhands.errors import SEE_LOG, describe, internal, not_configured
from trio_acp.openhands.permissions import turn_points
from trio_acp.openhands.permissions.credential_files import CredentialFiles
from trio_acp.openhands.sdk import SdkLoader, build_choice_llm, build_llm, mask_in_conversation
from trio_acp.openhands.sessions.damage import find_damage
from trio_acp.openhands.sessions.session import Session
from trio_acp.openhands.sessions.session_parts import (
    OpenConversation,
    PrepareBuild,
    SessionBuild,
    SessionChoices,
)
from trio_acp.openhands.sessions.store import SessionStore
from trio_acp.openhands.sessions.system_prompt import ClientSystemPrompt
from trio_acp.openhands.sessions.system_prompt import apply as apply_system_prompt
from trio_acp.openhands.setup.agent_spec import build_session_agent, for_agent_server, hook_config
from trio_acp.openhands.setup.mcp_startup import McpStartup, mcp_timeout
from trio_acp.openhands.setup.models import PROFILES_DIR, ModelChoice
from trio_acp.openhands.setup.settings import Settings, SettingsError
from trio_acp.openhands.setup.subagents import subagent_view
from trio_acp.openhands.setup.user_setup import SessionSetup, cli_config_path, read_session_setup
from trio_acp.rpc import RequestError

if TYPE_CHECKING:
    from trio_acp.connection import ClientProxy
    from trio_acp.openhands.sdk.classes import LLM, Event, LLMStreamChunk, MCPToolProvider
    from trio_acp.openhands.sdk.classes import LocalConversation as SdkConversation
    from trio_acp.openhands.sdk.loaded import Sdk

log = logging.getLogger(__name__)


def use_profile_store(directory: Path) -> None:
    """The SDK's LLM profiles are the ones the `model` option lists (models.py): in the
    persistence directory. The SDK's default store is `~/.openhands/profiles` (made, with
    `provider-connections` beside it, by every conversation and by the agent's check for a
    vision profile, whatever the persistence directory); its module default is read on
    every `LLMProfileStore()`, so pointing it here moves them all, for this process."""
    from trio_acp.openhands.sdk.llm import use_profile_store as point

    point(directory)


@attrs.frozen
class SessionPlan:
    """Which session to build, as `agent.py` decided it."""

    sid: uuid.UUID
    cwd: str
    roots: SessionRoots
    mcp_servers: list[schema.McpServer] | None
    settings: Settings
    models: list[ModelChoice]
    store: SessionStore
    existing: bool  # its conversation is on disk (or on its server) already
    fresh: bool  # session/new (not a fork's new id)
    server: AgentServerTarget | None  # where the conversation runs; None: here
    # The client's system prompt, checked (system_prompt.py); None: the agent's own.
    system_prompt: ClientSystemPrompt | None = None


async def build_session(
    plan: SessionPlan,
    sdk: Sdk,
    *,
    env: Mapping[str, str] | None,
    secrets: SecretValues,
    client: ClientProxy,
) -> tuple[Session, SessionSetup]:
    """The session (not started) and the set-up it was built from. Bad settings or set-up
    files are the client's error, with the file named."""
    setup = read_setup(plan, env)
    retries = RetryRelay()
    build = await build_conversation(plan, sdk, setup, env=env, secrets=secrets, retries=retries)
    session = _session(plan, build, client)
    retries.session = session
    return session, setup


def build_session_later(
    plan: SessionPlan,
    loader: SdkLoader,
    *,
    env: Mapping[str, str] | None,
    secrets: SecretValues,
    client: ClientProxy,
) -> tuple[Session, SessionSetup]:
    """The session (not started), answered before the SDK is imported: the checks that need
    no SDK are made here, the rest once `serve` has it (sessions/deferred_build.py)."""
    setup = read_setup(plan, env)
    retries = RetryRelay()

    async def prepare() -> SessionBuild:
        turn_points.reached("build", "sdk")
        sdk = await loader.get()
        return await build_conversation(plan, sdk, setup, env=env, secrets=secrets, retries=retries)

    # What the session needs before its conversation: no SDK, no critic yet (it comes
    # with the SDK agent; only turns and replays read it).
    stand_in = SessionBuild(
        sdk=None, secrets=secrets, credential_files=_credential_files(plan.settings, env)
    )
    session = _session(plan, stand_in, client, prepare=prepare)
    retries.session = session
    return session, setup


def read_setup(plan: SessionPlan, env: Mapping[str, str] | None) -> SessionSetup:
    """The user's set-up files and the request's MCP servers (no SDK needed)."""
    try:
        return read_session_setup(
            plan.settings,
            plan.cwd,
            plan.store.dir_for(plan.sid),
            mcp_config(plan.mcp_servers or []),
            env,
        )
    except SettingsError as exc:
        raise RequestError.invalid_params(str(exc)) from None


def _credential_files(settings: Settings, env: Mapping[str, str] | None) -> CredentialFiles:
    return CredentialFiles.under(
        settings.persistence_dir,
        [(str(cli_config_path(settings.persistence_dir, env)), "the critic's settings")],
    )


def _session(
    plan: SessionPlan,
    build: SessionBuild,
    client: ClientProxy,
    prepare: PrepareBuild | None = None,
) -> Session:
    settings = plan.settings
    assert settings.llm is not None
    return Session(
        session_id=plan.sid,
        roots=plan.roots,
        client=client,
        build=build,
        choices=SessionChoices(
            model=str(settings.llm.get("model")),
            mode=settings.default_mode,
            models=plan.models,
        ),
        store=plan.store,
        prepare=prepare,
    )


async def build_conversation(
    plan: SessionPlan,
    sdk: Sdk,
    setup: SessionSetup,
    *,
    env: Mapping[str, str] | None,
    secrets: SecretValues,
    retries: RetryRelay,
) -> SessionBuild:
    """The SDK's part: the session's LLM, its SDK agent, how its conversation opens."""
    sid, cwd, settings, store = plan.sid, plan.cwd, plan.settings, plan.store
    existing, fresh, server = plan.existing, plan.fresh, plan.server
    assert settings.llm is not None
    profiles = settings.persistence_dir / PROFILES_DIR
    turn_points.reached("build", "llm")
    use_profile_store(profiles)
    try:
        llm = build_llm(sdk, settings.llm, retry_listener=retries, sources=settings.sources)
    except Exception as exc:
        raise not_configured(
            f"the model settings are not usable: {short(exc)} (from {settings.settings_file} / LLM_*)"
        ) from None
    turn_points.reached("build", "agent")
    try:
        # Skills are read from disk (the project's, the user's): off the Trio thread.
        agent = await trio.to_thread.run_sync(
            lambda: build_session_agent(
                sdk, llm, setup, lambda fields: build_llm(sdk, fields, retry_listener=retries)
            )
        )
        agent = apply_system_prompt(agent, plan.system_prompt)
        hooks = hook_config(setup)
    except Exception as exc:
        raise RequestError.invalid_params(
            f"the session's set-up is not usable: {short(exc)}"
        ) from None
    store.root.mkdir(parents=True, exist_ok=True)

    def make_llm(choice: ModelChoice) -> LLM:
        return build_choice_llm(sdk, choice, env=env, retry_listener=retries)

    open_conversation: OpenConversation | None = None
    if server is not None:
        agent = for_agent_server(agent)
        # The conversation runs on the agent-server: a new session creates it there
        # under its own id; a fork finds it there (the server made it); a load attaches.
        open_conversation = functools.partial(
            ServerConversation.open,
            sdk,
            server,
            agent,
            working_dir=cwd,
            conversation_id=sid,
            create=False if existing else (True if fresh else None),
            make_llm=make_llm,
            max_iterations=settings.max_iterations,
            hook_config=hooks,  # run by the server (docs/agent-server.md)
        )

    def factory(
        *,
        callbacks: list[Callable[[Event], None]],
        token_callbacks: list[Callable[[LLMStreamChunk], None]],
    ) -> SdkConversation:
        # With an existing directory the SDK resumes that conversation: same id,
        # same events, the runtime agent and LLM replacing the persisted ones.
        conversation = sdk.LocalConversation(
            agent=agent,
            workspace=cwd,
            persistence_dir=str(store.root),
            # The SDK's own store for that directory, masking the agent's credentials.
            file_store=sdk.MaskingFileStore(
                str(store.dir_for(sid)),
                secrets=secrets,
                cache_limit_size=settings.max_iterations,
            ),
            conversation_id=sid,
            profile_store_dir=str(profiles),
            callbacks=callbacks,
            token_callbacks=token_callbacks,
            # Shows nothing itself; makes the sub-agents' work visible (subagents.py).
            visualizer=subagent_view(callbacks[0], secrets),
            max_iteration_per_run=settings.max_iterations,
            hook_config=hooks,
            # MCP servers start bounded, each on its own, failures named (mcp_startup.py).
            # The SDK's MCPToolProvider Protocol says its create_tools returns an MCPClient;
            # the SDK reads only `.tools` of it, as StartedTools gives (mcp_startup.py).
            mcp_tool_provider=cast("MCPToolProvider", McpStartup(mcp_timeout(env))),
        )
        mask_in_conversation(conversation, secrets.forms)
        return conversation

    return SessionBuild(
        sdk=sdk,
        open_local=factory if open_conversation is None else None,
        open_remote=open_conversation,
        make_llm=make_llm,
        secrets=secrets,
        critic=setup.cli.critic if agent.critic is not None else None,
        credential_files=_credential_files(settings, env),
    )


class RetryRelay:
    """The LLM's retry listener (called in the SDK's thread) → a note in the session.

    The LLM is built before its session exists, hence the late-bound session.
    """

    def __init__(self) -> None:
        self.session: Session | None = None

    def __call__(self, attempt: int, total: int, error: BaseException | None) -> None:
        if self.session is not None:
            self.session.note_retry(attempt, total, error)


def mcp_config(servers: list[schema.McpServer]) -> dict[str, dict[str, object]]:
    """ACP MCP servers → the SDK's `mcp_config` entries (server name → its settings).

    stdio servers become a command the SDK starts; http and sse servers a URL it connects
    to, with the client's headers (both advertised in `mcpCapabilities`)."""
    out: dict[str, dict[str, object]] = {}
    for server in servers:
        if isinstance(server, schema.McpServerStdio):
            out[server.name] = {
                "command": server.command,
                "args": list(server.args or []),
                "env": {e.name: e.value for e in (server.env or [])},
            }
        elif isinstance(server, schema.McpServerHttp | schema.McpServerSse):
            out[server.name] = {
                "url": server.url,
                "transport": "http" if isinstance(server, schema.McpServerHttp) else "sse",
                "headers": {h.name: h.value for h in (server.headers or [])},
            }
    return out


async def open_failure(
    sdk: Sdk | None, store: SessionStore, sid: uuid.UUID, exc: Exception, *, existing: bool
) -> RequestError:
    """What to tell the user when a session's conversation could not be opened (`sdk` is
    None for a new session built after the answer: nothing on disk to look at)."""
    if not existing or sdk is None:
        return internal(f"could not start the session: {describe(exc)} ({SEE_LOG})")
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
        return internal(damage.message(str(sid)), {"path": str(damage.path)})
    return internal(
        f"session {sid} cannot be opened: {describe(exc)}. Its files are in {directory}; "
        f"delete the session (session/delete) if they cannot be repaired ({SEE_LOG})",
    )


def short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500] or type(exc).__name__
