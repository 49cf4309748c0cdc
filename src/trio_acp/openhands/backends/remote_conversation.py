"""The `Conversation` a session drives when its conversation runs on an agent-server.

`ServerConversation` implements the session's conversation Protocol (conversation.py) over
`RemoteConversationDriver` (remote.py), so the session, its turns, permissions, slash
commands and translation are the same as for a local conversation
(docs/agent-server.md, "What runs where"). What differs, and why:

- **A run** is the driver's `run()`, awaited by `Run.outcome()`; a cancel sets the run's
  own cancel event, and the driver interrupts the server's run and stops the terminal's
  processes there (so `stop_tools` has nothing left to do).
- **Event count, last error, usage** are kept here from what the driver hands on and what
  the server reports after a run: the Protocol's accessors are synchronous and run on the
  Trio thread, which must never wait for the network.
- **Model switches** post the new LLM to the server (`switch_llm`); the LLM last sent is
  kept here, so the options the session offers follow it.
- **The interruption note** is the driver's: the server takes only user messages, so the
  next message after a cut-short turn opens with it (`INTERRUPTION_NOTE`).
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import trio

from trio_acp.openhands.backends.agent_server_api import (
    ConversationInfo,
    RemoteError,
    delete_conversation,
    get_conversation,
    post_json,
)
from trio_acp.openhands.backends.agent_server_config import (
    AgentServerConfigError,
    AgentServerTarget,
    load_agent_server,
)
from trio_acp.openhands.backends.conversation import (
    ERROR,
    FINISHED,
    STUCK,
    WAITING_FOR_CONFIRMATION,
    Condensed,
    LlmOptions,
    Run,
    StopCommand,
    Usage,
    usage_of,
    user_message,
)
from trio_acp.openhands.backends.remote import (
    POLL_INTERVAL,
    UNREACHABLE_GRACE,
    RemoteConversationDriver,
)
from trio_acp.openhands.errors import internal, not_configured
from trio_acp.openhands.permissions.policy import ALWAYS_APPROVE, LLM_APPROVE
from trio_acp.openhands.sdk import SdkLoader, confirmation_setup, supports_reasoning_effort
from trio_acp.openhands.setup.mcp_startup import McpStartFailure
from trio_acp.openhands.translate.prompt import AudioPart, ImagePart, TextPart
from trio_acp.rpc import RequestError

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import LLM, ActionEvent, AgentBase, Event, HookConfig, Skill
    from trio_acp.openhands.sdk.loaded import Sdk
    from trio_acp.openhands.sessions.session_parts import MakeLlm
    from trio_acp.openhands.setup.models import ModelChoice

log = logging.getLogger(__name__)

# How long the stats fetch after a run may take before `/status` shows the older figures.
STATS_TIMEOUT = 2.0


class _ServerRun:
    """One run on the server: `outcome()` drives it; `cancel()` interrupts it."""

    def __init__(self, conv: ServerConversation) -> None:
        self._conv = conv
        self._cancel = trio.Event()
        self._done = trio.Event()
        self._started = False

    def done(self) -> bool:
        return self._done.is_set()

    def cancel(self) -> None:
        self._cancel.set()
        if not self._started:
            self._done.set()  # never started: nothing to wait for

    async def outcome(self) -> BaseException | None:
        if self._done.is_set():
            return None
        self._started = True
        self._conv.unanswered = False  # the run answers it, or says how it ended
        error: BaseException | None = None
        try:
            error = await self._drive()
            return error
        finally:
            self._done.set()
            # Not when the run stopped for approval: the turn goes on, and the run that
            # ends it takes the figures (a round trip saved per action in the modes where
            # the server stops before every one: `set_mode`). Nor from a server that
            # stopped answering: it would only make the error wait.
            if self._conv.run_status != WAITING_FOR_CONFIRMATION and not (
                isinstance(error, RemoteError) and error.unreachable
            ):
                with trio.CancelScope(shield=True):
                    await self._conv.refresh_usage()

    async def _drive(self) -> BaseException | None:
        conv = self._conv
        start = conv.event_count()
        try:
            status = await conv.driver.run(self._cancel)
        except Exception as exc:  # RemoteError: the server failed or went away
            return exc
        conv.run_status = status
        if status in (ERROR, STUCK) and conv.last_error(start) == (None, None):
            # Why it failed is an event the socket may not have brought yet.
            with trio.move_on_after(STATS_TIMEOUT):
                try:
                    await conv.driver.catch_up()
                except RemoteError as exc:
                    log.warning("fetching the failed run's events failed: %s", exc)
        return None

    async def wait_done(self) -> None:
        await self._done.wait()


class ServerConversation:
    """A conversation on an OpenHands agent-server (see the module's docstring)."""

    # A cancel may stop waiting for a message still being sent (turn.py): the server
    # takes a conversation's first message only once it has started the tools (seconds).
    # The abandoned request goes on; the driver's limiter keeps the next call behind it.
    send_abandonable = True

    def __init__(
        self,
        sdk: Sdk,
        driver: RemoteConversationDriver,
        agent: AgentBase,
        make_llm: MakeLlm | None = None,
    ) -> None:
        self._sdk = sdk
        self.driver = driver
        self._agent = agent
        self._llm = agent.llm
        self._make_llm = make_llm
        self._lock = threading.Lock()
        self._count = 0
        # (index, code, detail) of the error events handed on, by their place in `_count`.
        self._errors: list[tuple[int, str | None, str | None]] = []
        self._usage: Usage | None = None
        self._run: _ServerRun | None = None
        # A message sent (or being sent) that no run has taken up yet.
        self.unanswered = False
        # The status the server gave when it was opened, then each run's final one; the
        # socket's newer word (`driver.execution_status`) wins when there is one.
        self.run_status = "idle"
        # Whether the server stops before every action for this side to decide (`set_mode`).
        self.decides_for_mode = False

    @classmethod
    async def open(
        cls,
        sdk: Sdk,
        target: AgentServerTarget,
        agent: AgentBase,
        *,
        working_dir: str,
        conversation_id: uuid.UUID,
        create: bool | None,
        on_event: Callable[[Event], None],
        on_token: Callable[[object], None],
        name: str = "",
        make_llm: MakeLlm | None = None,
        max_iterations: int = 500,
        hook_config: HookConfig | None = None,
        unreachable_grace: float = UNREACHABLE_GRACE,
        poll_interval: float = POLL_INTERVAL,
    ) -> ServerConversation:
        """Create the server's conversation `conversation_id` (`create`), or attach to it
        (`create=False`: it must exist; None: whichever applies)."""
        # None comes for a fork's new id (session_build.py): the server made it already.
        forked = create is None and await get_conversation(target, conversation_id) is not None
        if create is None:
            create = not forked
        holder: list[ServerConversation] = []

        def event(item: Event) -> None:  # the SDK's socket thread: count, note, hand on
            if holder:
                holder[0]._counted(item)
            on_event(item)

        driver = await RemoteConversationDriver.open(
            sdk,
            target,
            agent,
            working_dir=working_dir,
            on_event=event,
            on_token=on_token,
            conversation_id=conversation_id,
            create=create,
            max_iterations=max_iterations,
            hook_config=hook_config,
            unreachable_grace=unreachable_grace,
            poll_interval=poll_interval,
        )
        conv = cls(sdk, driver, agent if create else driver.live()[0].agent, make_llm)
        holder.append(conv)
        try:
            info = await driver.get_info(conversation_id)
        except BaseException:
            await driver.close()
            raise
        if info is not None:
            conv.run_status = str(info.get("execution_status") or "idle")
            conv._usage = _usage_from_info(info)
        if forked:
            # The server's fork copies the agent but not its model's key (the copy's LLM
            # calls fail with "Missing credentials"): the session's model, key included,
            # goes to the fork. agent.py then sets the parent's model choices on it.
            try:
                await conv._switch_llm(agent.llm)
            except BaseException:
                await driver.close()
                raise
        return conv

    @property
    def location(self) -> str:
        """Where the conversation runs, for `/status` (the URL, never the key)."""
        return f"the agent-server at {self.driver.target.url} (conversation {self.driver.id})"

    def _counted(self, event: Event) -> None:
        with self._lock:
            self._count += 1
            if type(event).__name__ == "ConversationErrorEvent":
                # Read by name: the SDK's ConversationErrorEvent (code, detail).
                code, detail = getattr(event, "code", None), getattr(event, "detail", None)
                self._errors.append((self._count - 1, code, detail))

    # --- set-up -------------------------------------------------------------------

    async def warm_up(self, report: dict[str, str]) -> list[McpStartFailure]:
        """The server starts the tools at the first run; here, one round trip proves it
        answers (and its time goes in the report)."""
        try:
            seconds = await self.driver.measure_round_trip()
        except RemoteError as exc:
            report["agent-server"] = f"failed: {exc}"
        else:
            report["agent-server"] = f"done ({seconds * 1000:.0f} ms round trip)"
        return []

    def llm_options(self) -> LlmOptions:
        llm = self._llm
        effort = (
            (llm.reasoning_effort or "high") if supports_reasoning_effort(self._sdk, llm) else None
        )
        return LlmOptions(reasoning_effort=effort, stream=bool(getattr(llm, "stream", True)))

    async def set_mode(self, mode: str) -> None:
        policy, analyzer = confirmation_setup(self._sdk, mode)
        # The server cannot load our credential guard (permissions/credential_guard.py), so
        # in the modes that ask less it stops before every action and this side decides as
        # the mode would, asking only for a read of trio-acp's credential files
        # (permissions/confirm.py, `decides_for_mode`): a round trip per action.
        self.decides_for_mode = mode in (ALWAYS_APPROVE, LLM_APPROVE)
        if self.decides_for_mode:
            policy = self._sdk.AlwaysConfirm()
        await self.driver.set_confirmation(policy, analyzer)

    async def use_model(
        self, choice: ModelChoice, *, reasoning_effort: str | None, stream: bool
    ) -> str | None:
        make_llm, sdk = self._make_llm, self._sdk
        if make_llm is None:
            raise RemoteError("no other model can be built for this session")

        def build() -> tuple[LLM, str | None]:
            llm = make_llm(choice)
            update: dict[str, object] = {"stream": stream}
            effort = None
            if supports_reasoning_effort(sdk, llm):
                effort = reasoning_effort or llm.reasoning_effort or "high"
                update["reasoning_effort"] = effort
            return llm.model_copy(update=update), effort

        llm, effort = await trio.to_thread.run_sync(build)
        await self._switch_llm(llm)
        return effort

    async def update_llm(self, **update: object) -> None:
        await self._switch_llm(self._llm.model_copy(update=update))

    async def _switch_llm(self, llm: LLM) -> None:
        # The agent-server's own endpoint for it; the LLM travels with its key, as the
        # agent did when the conversation was created.
        body = {"llm": llm.model_dump(mode="json", context={"expose_secrets": True})}
        await post_json(self.driver.target, f"/api/conversations/{self.driver.id}/switch_llm", body)
        self._llm = llm

    # --- a turn ---------------------------------------------------------------------

    def status(self) -> str:
        if self._run is not None and not self._run.done():
            return "running"
        return self.driver.execution_status or self.run_status

    def event_count(self) -> int:
        with self._lock:
            return self._count

    def critic_outcome(self, since: int) -> None:
        # The agent sent to a server has no critic (agent_spec.for_agent_server).
        return None

    def last_error(self, since: int) -> tuple[str | None, str | None]:
        with self._lock:
            for index, code, detail in reversed(self._errors):
                if index >= since:
                    return code, detail
                break
        return None, None

    async def send_message(
        self, parts: list[TextPart | ImagePart | AudioPart], sender: str | None = None
    ) -> None:
        self.unanswered = True
        await self.driver.send_message(user_message(self._sdk, parts), sender)

    def start_run(self) -> Run:
        self._run = _ServerRun(self)
        return self._run

    async def interrupt(self) -> None:
        run = self._run
        if run is not None and not run.done():
            run.cancel()  # the run interrupts the server's run itself (driver.run)
        else:
            await self.driver.interrupt()

    async def stop_tools(self) -> None:
        """Nothing: interrupting stops the terminal's processes on the server too."""

    def stop_tool_call(self, tool_call_id: str) -> tuple[bool, StopCommand | None]:
        # The agent-server's API stops a conversation's run, never one of its commands.
        raise RequestError.invalid_params(
            "a tool call on an agent-server cannot be stopped on its own; cancel the turn"
        )

    async def pending_actions(self) -> list[ActionEvent]:
        return await self.driver.pending_actions()

    async def reject_pending(self, reason: str) -> None:
        await self.driver.reject_pending_actions(reason)
        # The run that stopped for approval left the figures to the next one (`_ServerRun`),
        # and after a rejection there may be none this turn.
        await self.refresh_usage()

    async def note_interruption(self) -> None:
        # A message sent, then cancelled before or during its run: the next one says so.
        # Before its run, the status is still the previous turn's ("finished").
        if self.unanswered or self.status() != FINISHED:
            self.driver.mark_interrupted()

    def usage(self) -> Usage | None:
        return self._usage

    async def refresh_usage(self) -> None:
        """Take the stats the server reported (its post-run snapshot, else one request)."""
        conv = self.driver.conversation
        if conv is None:
            return
        with trio.move_on_after(STATS_TIMEOUT):
            try:
                usage = await trio.to_thread.run_sync(
                    lambda: usage_of(conv.conversation_stats), abandon_on_cancel=True
                )
            except Exception:
                log.debug("no stats from the agent-server", exc_info=True)
                return
            if usage is not None:
                self._usage = usage

    def skills(self) -> list[Skill]:
        context = getattr(self._agent, "agent_context", None)
        return list(getattr(context, "skills", None) or [])

    # --- the whole conversation --------------------------------------------------------

    async def history(self) -> list[Event]:
        return [
            e
            for e in await self.driver.events()
            if type(e).__name__ != "ConversationStateUpdateEvent"
        ]

    async def condense(self) -> Condensed:
        events = await self.history()
        if not any(type(e).__name__ != "SystemPromptEvent" for e in events):
            return Condensed(empty=True)
        try:
            await self.driver.call(lambda: self.driver.live()[0].condense())
        except RemoteError as exc:
            return Condensed(failure=f"{exc}. The history is unchanged.")
        return Condensed(added=max(0, len(await self.history()) - len(events)))

    async def fork(self, fork_id: uuid.UUID) -> None:
        """Copy this conversation, history and all, to `fork_id` on the server."""
        assert self.driver.id is not None
        await fork_on_server(self.driver.target, self.driver.id, fork_id)

    async def close(self) -> None:
        """Stop listening; the conversation stays on the server (session/delete removes it)."""
        run = self._run
        if run is not None and not run.done():
            run.cancel()
        await self.driver.close()


def _usage_from_info(info: ConversationInfo) -> Usage | None:
    from trio_acp.openhands.sdk.remote_client import stats_of

    try:
        return usage_of(stats_of(info))
    except Exception:
        log.debug("unreadable stats from the agent-server", exc_info=True)
        return None


async def fork_on_server(
    target: AgentServerTarget, conversation_id: uuid.UUID, fork_id: uuid.UUID
) -> None:
    """The server copies the conversation, history and all, to `fork_id`."""
    body = {"id": str(fork_id), "reset_metrics": True}
    await post_json(target, f"/api/conversations/{conversation_id}/fork", body, ok=(200, 201))


# --- start-up -------------------------------------------------------------------------

# What the SDK's remote client imports only when it opens its first connection (HTTP/2 and
# WebSocket machinery): ~1-2 s on a loaded 2-core machine, otherwise paid by the first
# session/new (bench/remote_startup.py).
# How long the preload waits for the SDK's import before it gives up.
PRELOAD_WAIT = 600.0
_CLIENT_MODULES = ("httpcore", "h11", "h2.connection", "websockets.sync.client", "socksio")


def preload_remote_client(
    flag_url: str | None, env: Mapping[str, str] | None, sdk_loader: SdkLoader
) -> None:
    """With an agent-server configured, import the remote client's modules in the
    background once the SDK's own import (`sdk_loader`, sdk.py) is over: not before it,
    which sets up the environment the SDK's imports read, and not beside it, where the two
    would only take turns with the interpreter lock. Best effort: anything not preloaded is
    imported when it is needed."""
    try:
        configured = load_agent_server(env, flag_url=flag_url) is not None
    except AgentServerConfigError:
        return  # said when a session is opened
    if not configured:
        return

    def load() -> None:
        deadline = time.monotonic() + PRELOAD_WAIT
        while not sdk_loader.ready:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
        try:
            for name in _CLIENT_MODULES:
                importlib.import_module(name)
        except Exception:
            log.debug("preloading the agent-server client failed", exc_info=True)

    threading.Thread(target=load, name="trio-acp-remote-preload", daemon=True).start()


# --- which sessions run where (agent.py asks, at the point a conversation is chosen) ------


def session_server(
    target: AgentServerTarget | None, sid: uuid.UUID, stored_url: str | None, *, existing: bool
) -> AgentServerTarget | None:
    """Where the session's conversation runs: the agent-server to use, or None (here).

    A new session runs on the configured server, if any. A stored one runs where it lives:
    a local one here (its history is on this disk), a remote one on its server, which must
    be the configured one (the key is the configured server's).
    """
    if not existing:
        return target
    if stored_url is None:
        return None
    if target is None or target.url != stored_url:
        now = f"the agent-server at {target.url}" if target is not None else "no agent-server"
        raise not_configured(
            f"session {sid} lives on the agent-server at {stored_url}, and trio-acp is "
            f"configured for {now}: set --agent-server or TRIO_ACP_AGENT_SERVER_URL to "
            f"{stored_url} (with its key) to open it"
        )
    return target


async def delete_on_server(
    target: AgentServerTarget | None, sid: uuid.UUID, stored_url: str | None
) -> str | None:
    """session/delete of a remote session: its conversation goes from the server first.

    Returns a warning when the conversation has to stay on its server and only the local
    entry can go: the server cannot be reached (gone, down), or trio-acp is now configured
    for another server or none (the key it has is not that server's). The user asked for
    the session to go, and nothing is lost: the warning says where the conversation stays
    and how to remove it there. A server that answers but refuses (a wrong key, an error)
    fails the delete and nothing is removed: it can be retried.
    """
    if stored_url is None:
        return None
    left = (
        f"its conversation stays on the agent-server at {stored_url}; to remove it there, "
        f"send DELETE {stored_url}/api/conversations/{sid} with the server's session API "
        "key (header X-Session-API-Key)"
    )
    if target is None or target.url != stored_url:
        now = f"the agent-server at {target.url}" if target is not None else "no agent-server"
        return f"session {sid} was deleted here, where trio-acp is configured for {now}: {left}"
    try:
        await delete_conversation(target, sid)
    except RemoteError as exc:
        if exc.unreachable:
            return (
                f"session {sid} was deleted here; the agent-server did not answer ({exc}): {left}"
            )
        raise internal(
            f"could not delete session {sid} on its agent-server: {exc}. Nothing was removed; "
            "the delete can be retried"
        ) from None
    return None
