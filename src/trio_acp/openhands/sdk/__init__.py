"""The one door to the OpenHands SDK: a background import, and the SDK objects we build.

Importing `openhands.sdk` and `openhands.tools` costs ~8-10 s here, so `SdkLoader` starts
it in a thread when the server starts; `initialize` never waits for it and `session/new`
does. litellm and the SDK read `LITELLM_LOCAL_MODEL_COST_MAP` / `OPENHANDS_SUPPRESS_BANNER`
at import time, so they are set here before anything imports them.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import logging
import os
import threading
import time
import types
import typing
import warnings
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import trio

from trio_acp.openhands.permissions.credential_files import CredentialFiles
from trio_acp.openhands.permissions.tool_processes import terminal_params
from trio_acp.openhands.sessions.small_files import read_bytes
from trio_acp.openhands.translate.interruptions import CANCEL_SENDER, CANCEL_TEXT, STOPPED_SENDER
from trio_acp.openhands.translate.model_failures import (
    CONTEXT_OVERFLOWS,
    LLM_FAILURE_DEFAULTS,
    RetryPolicy,
)

log = logging.getLogger(__name__)


def _prepare_environment() -> None:
    # Without the local cost map litellm fetches one over the network at import, and its
    # retry thread races the import: flaky deadlocks, and no network here
    # (docs/ARCHITECTURE.md#d2-stdio-hygiene).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
    # litellm logs "Give Feedback / Get Help" banners through print on some errors;
    # stdout is already stderr under serve_stdio, this keeps the noise down elsewhere.
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    # The SDK logs every tool initialisation at INFO through Rich; an editor's log pane
    # wants warnings. LOG_LEVEL=INFO (the SDK's own variable) brings them back.
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    # litellm cannot price a model it does not know (any self-hosted or scripted one);
    # that is not the user's problem on every call.
    warnings.filterwarnings("ignore", message="Cost calculation failed")


#: python-dotenv's own switch, read each time `load_dotenv()` is called.
DOTENV_SWITCH = "PYTHON_DOTENV_DISABLED"


@contextlib.contextmanager
def no_dotenv() -> Iterator[None]:
    """No `.env` file is loaded while this lasts: litellm's `__init__` calls python-dotenv's
    `load_dotenv()`, which searches a `.env` upwards from litellm's own directory — the
    installation's parent, a uv tool's `~/.local/share`, the home directory — and puts
    every variable in it (an `LLM_API_KEY` too) into this process's environment, and so
    into every tool's shell. Our settings come from the environment the editor gives us
    and the OpenHands files (docs/ARCHITECTURE.md#d7-sessions-are-openhands-conversations).

    Only for the import: the variable would otherwise reach the tools' processes and turn
    dotenv off in the user's own programs. A user who sets it (`PYTHON_DOTENV_DISABLED=0`
    asks for litellm's loading) is left alone.
    """
    if DOTENV_SWITCH in os.environ:
        yield
        return
    os.environ[DOTENV_SWITCH] = "1"
    try:
        yield
    finally:
        os.environ.pop(DOTENV_SWITCH, None)


def import_sdk() -> SimpleNamespace:
    """Import everything the agent uses from the SDK (slow; call from a thread)."""
    _prepare_environment()
    with no_dotenv():
        return _import_sdk()


def _import_sdk() -> SimpleNamespace:
    from openhands.sdk import (
        LLM,
        Agent,
        Conversation,
        LLMSummarizingCondenser,
        LocalConversation,
        LocalFileStore,
        Message,
        TextContent,
        Tool,
    )
    from openhands.sdk.context.condenser import NoCondensationAvailableException
    from openhands.sdk.conversation.state import ConversationExecutionStatus, ConversationState
    from openhands.sdk.event import (
        AgentErrorEvent,
        Event,
        MessageEvent,
        UserRejectObservation,
    )
    from openhands.sdk.llm import ImageContent
    from openhands.sdk.llm.utils.model_features import get_features
    from openhands.sdk.security.confirmation_policy import AlwaysConfirm, ConfirmRisky, NeverConfirm
    from openhands.sdk.security.llm_analyzer import LLMSecurityAnalyzer
    from openhands.sdk.security.risk import SecurityRisk
    from openhands.tools.file_editor import FileEditorTool
    from openhands.tools.task_tracker import TaskTrackerTool
    from openhands.tools.terminal import TerminalTool

    from trio_acp.openhands.permissions.credential_guard import CredentialGuard
    from trio_acp.openhands.sdk import error_bodies

    # Before any model call: litellm caches the HTTP clients it builds.
    error_bodies.install()
    return SimpleNamespace(
        LLM=LLM,
        SessionLLM=_session_llm_class(LLM),
        Agent=Agent,
        Conversation=Conversation,
        LocalConversation=LocalConversation,
        MaskingFileStore=_masking_file_store(LocalFileStore),
        Message=Message,
        MessageEvent=MessageEvent,
        AgentErrorEvent=AgentErrorEvent,
        UserRejectObservation=UserRejectObservation,
        TextContent=TextContent,
        ImageContent=ImageContent,
        Tool=Tool,
        ExecutionStatus=ConversationExecutionStatus,
        ConversationState=ConversationState,
        LLMSummarizingCondenser=LLMSummarizingCondenser,
        NoCondensationAvailableException=NoCondensationAvailableException,
        Event=Event,
        AlwaysConfirm=AlwaysConfirm,
        NeverConfirm=NeverConfirm,
        ConfirmRisky=ConfirmRisky,
        LLMSecurityAnalyzer=LLMSecurityAnalyzer,
        CredentialGuard=CredentialGuard,
        SecurityRisk=SecurityRisk,
        get_features=get_features,
        TerminalTool=TerminalTool,
        FileEditorTool=FileEditorTool,
        TaskTrackerTool=TaskTrackerTool,
    )


def _masking_file_store(base: type) -> type:
    from openhands.sdk.conversation.persistence_const import EVENT_NAME_RE, EVENTS_DIR

    class MaskingFileStore(base):
        """A conversation's files, with the agent's secret values masked as they are written.

        The SDK masks tool output and text replies itself (`mask_in_conversation`), but not
        a tool call's arguments, the model's text around a tool call, or an error's detail:
        whatever an event holds is stored without them here.
        """

        def __init__(self, root: str, *, secrets: Any, **kwargs: Any) -> None:
            super().__init__(root, **kwargs)
            self.secrets = secrets

        def read(self, path: str) -> str:
            # Opening a stored conversation, the SDK reads every event file of its history
            # (10,000 for a long one) through here. The generic read normalizes and
            # sandboxes each path and keeps each text in an LRU cache, which the SDK's
            # event log makes redundant (it keeps the parsed events): a third of the open's
            # time. An event file's name (the SDK's own pattern: digits, hex and dashes)
            # cannot leave the directory, so it is read as it is; the same text, the same
            # errors. Anything else takes the generic path. Figures: bench/README.md.
            folder, _, name = path.partition("/")
            if folder == EVENTS_DIR and EVENT_NAME_RE.match(name):
                try:
                    return _read_text(os.path.join(self.root, EVENTS_DIR, name))
                except FileNotFoundError:
                    raise FileNotFoundError(path) from None
            text: str = super().read(path)
            return text

        def list(self, path: str) -> list[str]:
            # Opening a stored conversation, the SDK's event log lists the events
            # directory once (10,000 files for a long one); the generic list sandboxes
            # every entry's path and stats it to tell directories: 0.14 s for 10,000
            # files here, against 0.02 s for one scandir, whose entries already know
            # their type (symbolic links followed, as `os.path.isdir` follows them). The
            # same list in the same order; a name the generic path would rewrite (a
            # backslash, which it reads as a separator) takes the generic path.
            if path != EVENTS_DIR:
                listed: list[str] = super().list(path)
                return listed
            try:
                with os.scandir(os.path.join(self.root, EVENTS_DIR)) as entries:
                    found = [(entry.name, _is_dir(entry)) for entry in entries]
            except (FileNotFoundError, NotADirectoryError):
                listed = super().list(path)  # no directory, or a file: the SDK's answer
                return listed
            if any("\\" in name for name, _ in found):
                listed = super().list(path)
                return listed
            return [f"{path}/{name}/" if is_dir else f"{path}/{name}" for name, is_dir in found]

        def write(self, path: str, contents: str | bytes) -> None:
            if isinstance(contents, str):
                contents = self.secrets.mask(contents)
            else:
                contents = self.secrets.mask_bytes(bytes(contents))
            super().write(path, contents)

    return MaskingFileStore


def _read_text(path: str) -> str:
    """What `open(path, encoding="utf-8").read()` returns, without the text layer's cost
    (small_files.py). Its universal newlines are kept: a stored event never has a bare
    carriage return outside a JSON string, but the same text is the rule."""
    text = read_bytes(path).decode("utf-8")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return os.path.isdir(entry.path)


def mask_in_conversation(conversation: Any, values: Any) -> None:
    """Have the SDK mask these values in tool output (before the model sees it, and in the
    full outputs it saves) and in the model's text replies.

    They go into the secret registry as values already exported, not as named secrets: a
    named secret is listed to the model in its system prompt, and its value is exported to
    any command that mentions its name.
    """
    if values:
        conversation.state.secret_registry.track_exported_values(
            {f"trio-acp-credential-{i}": value for i, value in enumerate(values)}
        )


def settle_collector() -> None:
    """One full collection right after the SDK import (once per process), in its thread.

    The import leaves ~470,000 objects to the garbage collector's oldest generation and a
    debt: the first code after it that allocates a little pays a full collection walking
    them all, 0.4-0.5 s CPU here (a new process's first `session/list` or first
    `session/new` did: bench/README.md "Big histories"). Paid here instead, where nothing
    waits on it but the import. Not frozen afterwards (as the warm server does before it
    forks, warm_server.py): in a serving process, objects the agent made before the import
    ended would be frozen with it, and a closed session's conversation then stayed
    reachable from them (tests/openhands/test_session_resources.py).
    """
    global _settled
    if not _settled:
        _settled = True
        gc.collect()


_settled = False


class SdkLoader:
    """Imports the SDK once, in a daemon thread, as soon as it is created."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._sdk: SimpleNamespace | None = None
        self._error: BaseException | None = None
        self.seconds: float | None = None
        threading.Thread(target=self._load, name="trio-acp-sdk-import", daemon=True).start()

    def _load(self) -> None:
        start = time.perf_counter()
        try:
            self._sdk = import_sdk()
            settle_collector()
        except BaseException as exc:  # reported to every caller of get()
            log.exception("importing the OpenHands SDK failed")
            self._error = exc
        finally:
            self.seconds = time.perf_counter() - start
            log.info("OpenHands SDK imported in %.2f s", self.seconds)
            self._done.set()

    @property
    def ready(self) -> bool:
        return self._done.is_set()

    async def get(self) -> SimpleNamespace:
        if not self._done.is_set():
            # abandon_on_cancel: a cancelled session/new must not wait out the import.
            await trio.to_thread.run_sync(self._done.wait, abandon_on_cancel=True)
        if self._error is not None:
            raise RuntimeError(f"the OpenHands SDK failed to import: {self._error!r}")
        assert self._sdk is not None
        return self._sdk


def _session_llm_class(LLM: Any) -> Any:
    """The SDK's `LLM` with our retry policy (model_failures.py) in its retry decorator.

    The SDK decides *what* is transient; we add: a timed-out attempt is retried once, a
    429's Retry-After is honoured up to a bound (a longer one fails at once), and every
    failed attempt is marked with what was decided, for the retry note and the final
    error message. Everything else (stop, logging, the temperature nudge) stays the SDK's.
    Serialized, it is a plain `LLM`: nothing of this reaches the persisted conversation.
    """
    from openhands.sdk.llm.exceptions import LLMContextWindowExceedError
    from pydantic import PrivateAttr
    from tenacity import wait_exponential

    class SessionLLM(LLM):
        # Context-window overflows in a row, with no successful call in between. The agent
        # answers an overflow by condensing and calling again; when condensing cannot make
        # the conversation fit (a window smaller than the system prompt and tools), that
        # loop would run to the iteration limit, one summary call per round.
        _context_overflows: int = PrivateAttr(default=0)

        async def agenerate(self, *args: Any, **kwargs: Any) -> Any:
            try:
                response = await super().agenerate(*args, **kwargs)
            except LLMContextWindowExceedError as exc:
                self._overflowed(exc)
                raise
            self._context_overflows = 0
            return response

        def generate(self, *args: Any, **kwargs: Any) -> Any:
            try:
                response = super().generate(*args, **kwargs)
            except LLMContextWindowExceedError as exc:
                self._overflowed(exc)
                raise
            self._context_overflows = 0
            return response

        # One model call's attempt (inside the SDK's retry boundary): the SDK's transport,
        # checked for an answer that was no model reply at all (`NotAModelReply`).
        async def _atransport_call(self, *, on_token: Any = None, **kwargs: Any) -> Any:
            checked = _checked(on_token, kwargs)
            return await super()._atransport_call(on_token=checked or on_token, **kwargs)

        def _transport_call(self, *, on_token: Any = None, **kwargs: Any) -> Any:
            checked = _checked(on_token, kwargs)
            return super()._transport_call(on_token=checked or on_token, **kwargs)

        def _overflowed(self, exc: BaseException) -> None:
            self._context_overflows += 1
            if self._context_overflows >= CONTEXT_OVERFLOWS:
                self._context_overflows = 0
                # Not an LLMContextWindowExceedError, so the agent does not condense
                # again: the turn ends, and model_failures.py says why.
                raise ContextStillTooLong(
                    f"the conversation still exceeds the context window after "
                    f"{CONTEXT_OVERFLOWS - 1} condensations: {exc}"
                ) from exc

        def retry_decorator(self, *args: Any, **kwargs: Any) -> Any:
            listener = kwargs.pop("retry_listener", None)
            base = super().retry_decorator(*args, retry_listener=None, **kwargs)
            attempts = int(kwargs.get("num_retries", self.num_retries) or 0)
            policy = RetryPolicy(attempts=attempts)
            backoff = wait_exponential(
                multiplier=kwargs.get("retry_multiplier", self.retry_multiplier) or 0,
                min=kwargs.get("retry_min_wait", self.retry_min_wait) or 0,
                max=kwargs.get("retry_max_wait", self.retry_max_wait) or 0,
            )

            def decorate(fn: Any) -> Any:
                wrapped = base(fn)
                sdk_retry, sdk_before_sleep = wrapped.retry.retry, wrapped.retry.before_sleep

                def exception_of(state: Any) -> BaseException | None:
                    return state.outcome.exception() if state.outcome is not None else None

                def retry(state: Any) -> bool:
                    return policy.should_retry(
                        sdk_retry(state), state.attempt_number, exception_of(state)
                    )

                def wait(state: Any) -> float:
                    return policy.wait(backoff(state), exception_of(state))

                def before_sleep(state: Any) -> None:
                    sdk_before_sleep(state)
                    if listener is not None:
                        exc = exception_of(state)
                        listener(state.attempt_number, policy.attempts_for(exc), exc)

                return wrapped.retry_with(retry=retry, wait=wait, before_sleep=before_sleep)

            return decorate

    return SessionLLM


class ContextStillTooLong(Exception):
    """Condensing did not make the conversation fit the model's context window."""


class NotAModelReply(Exception):
    """A streamed model call answered by a web page (HTTP 200, `text/html`): not the API.

    litellm reads such a page as a stream without events and makes up an empty reply; the
    SDK answers an empty reply with corrective feedback to the model and calls again, and
    the turn ended on whatever that next call said. A base URL pointing at a web UI, or a
    proxy's or a network's sign-in page, answers this way (model_failures.py words it).
    """


class _CheckedTokens:
    """The SDK's token callback for one streamed attempt, checking what answered it."""

    def __init__(self, on_token: Any) -> None:
        self.on_token = on_token
        self.checked = False

    def __call__(self, chunk: Any) -> Any:
        if not self.checked:  # the headers are the attempt's: the first chunk has them
            self.checked = True
            kind = _content_type(chunk)
            if "html" in kind:
                raise NotAModelReply(
                    f"the model call was answered by a web page (HTTP 200, {kind}), "
                    "not an event stream"
                )
        return self.on_token(chunk)  # an async callback's coroutine: the SDK awaits it


def _content_type(chunk: Any) -> str:
    """The response's Content-Type, as litellm keeps it on a stream chunk (else "")."""
    hidden = getattr(chunk, "_hidden_params", None)
    headers = hidden.get("additional_headers") if isinstance(hidden, dict) else None
    kind = headers.get("llm_provider-content-type") if isinstance(headers, dict) else None
    return kind.lower() if isinstance(kind, str) else ""


def _checked(on_token: Any, kwargs: dict[str, Any]) -> _CheckedTokens | None:
    if on_token is None or not kwargs.get("enable_streaming"):
        return None
    return _CheckedTokens(on_token)


def _user_chosen(
    data: dict[str, Any], known: dict[str, Any], sources: dict[str, str] | None
) -> set[str]:
    """The LLM fields the user set on purpose.

    An environment variable always counts. The OpenHands CLI writes every field into its
    settings file, the SDK's defaults included: a value there that equals the SDK's default
    is not a choice, and our failure defaults replace it.
    """
    chosen = set()
    for key, value in data.items():
        source = (sources or {}).get(key, "")
        field = known.get(key)
        if (
            sources is not None
            and not source.startswith("$")
            and field is not None
            and value == field.default
        ):
            continue
        chosen.add(key)
    return chosen


def build_llm(
    sdk: SimpleNamespace,
    fields: dict[str, Any],
    *,
    retry_listener: Any = None,
    sources: dict[str, str] | None = None,
) -> Any:
    """The session's LLM from the user's fields; `sources` says where each came from (settings.py)."""
    known = sdk.LLM.model_fields
    data = {k: _from_env_text(v, known[k].annotation) for k, v in fields.items() if k in known}
    ignored = sorted(set(fields) - set(data))
    if ignored:
        log.debug("ignoring settings that are not LLM fields: %s", ", ".join(ignored))
    data.setdefault("usage_id", "agent")
    chosen = _user_chosen(data, known, sources)
    # Streaming is what makes an editor feel alive; the SDK falls back to a whole reply
    # when a provider cannot stream. The CLI writes `"stream": false` (the SDK's default)
    # into every settings file: that is not a choice, `LLM_STREAM=false` is.
    if "stream" not in chosen:
        data["stream"] = True
    for key, value in LLM_FAILURE_DEFAULTS.items():
        if key not in chosen:
            data[key] = value
    llm = sdk.SessionLLM.model_validate(data)
    if retry_listener is not None:
        llm = llm.model_copy(update={"retry_listener": retry_listener})
    return llm


def build_choice_llm(
    sdk: SimpleNamespace, choice: Any, *, env: Any = None, retry_listener: Any = None
) -> Any:
    """The LLM of one configured model (`models.ModelChoice`); blocking (reads a profile).

    A profile is loaded the SDK's way (`LLMProfileStore`, which also resolves a linked
    provider connection's key) and used as saved; it answers to the same `usage_id` as
    the default model, so `switch_llm` carries the session's token and cost totals over.
    """
    if choice.profile is not None:
        from openhands.sdk.llm.llm_profile_store import LLMProfileStore

        saved = LLMProfileStore(choice.profile_dir).load(choice.profile)
        # The profile's own values, in our LLM class: its failures follow the same retry
        # policy and context-overflow guard as the default model's (model_failures.py).
        llm = sdk.SessionLLM.model_validate(
            {name: getattr(saved, name) for name in saved.model_fields_set}
        )
        update: dict[str, Any] = {"usage_id": "agent"}
        if retry_listener is not None:
            update["retry_listener"] = retry_listener
        return llm.model_copy(update=update)
    return build_llm(sdk, choice.llm_fields(env), retry_listener=retry_listener)


def fork_conversation(sdk: SimpleNamespace, conv: Any, fork_id: Any) -> None:
    """Copy `conv` with its whole history to a new conversation `fork_id` on disk; blocking.

    The SDK's `fork` copies the events (the source is not touched), the agent and the
    runtime state, in the source's persistence directory. An action the source left
    waiting for approval is rejected in the copy: the fork starts idle, and an idle
    conversation's next run would execute it as if approved.
    """
    copy = conv.fork(conversation_id=fork_id)
    try:
        if sdk.ConversationState.get_unmatched_actions(list(copy.state.events)):
            copy.reject_pending_actions(
                "Not approved before the session was forked; nothing was run."
            )
    finally:
        copy.close()


def _from_env_text(value: Any, annotation: Any) -> Any:
    """`LLM_*` variables are text; JSON-shaped fields (dicts, lists) are parsed from it.

    Scalars stay text: pydantic's lax mode turns "3" into 3 for an int field.
    """
    if not isinstance(value, str):
        return value
    if _shapes(annotation) & {dict, list, tuple}:
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _shapes(annotation: Any) -> set[Any]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return {shape for arg in typing.get_args(annotation) for shape in _shapes(arg)}
    return {origin or annotation}


def build_agent(sdk: SimpleNamespace, llm: Any, mcp_config: dict[str, Any] | None = None) -> Any:
    tools = [
        # The subprocess terminal, its shell without a history file (terminal_params).
        sdk.Tool(name=sdk.TerminalTool.name, params=terminal_params(None)),
        sdk.Tool(name=sdk.FileEditorTool.name),
        sdk.Tool(name=sdk.TaskTrackerTool.name),
    ]
    # The summarizing condenser keeps long sessions inside the context window, and is
    # what `/condense` asks to run now.
    condenser = sdk.LLMSummarizingCondenser(llm=llm.model_copy(update={"usage_id": "condenser"}))
    return sdk.Agent(llm=llm, tools=tools, mcp_config=mcp_config or {}, condenser=condenser)


# The note a cancelled turn leaves in the conversation (see `interruption_event`).
INTERRUPTION_SENDER = CANCEL_SENDER
INTERRUPTION_TEXT = CANCEL_TEXT


def interruption_event(
    sdk: SimpleNamespace, shown: str | None = None, thought: str | None = None
) -> Any:
    """An assistant message recording that the user interrupted the turn.

    Without it the model cannot tell a cancelled request from a finished one: the SDK
    merges consecutive user messages, so the cancelled prompt and the next one would
    reach the model as one message and it would answer the cancelled question again.
    An assistant message between them ends the cancelled exchange, and `session/load`
    replays it, so the user sees the same history the model does. `shown`, `thought`: what
    the user was shown of the reply the cancel cut short, which the SDK never saves.
    """
    text = f"{shown}\n\n{INTERRUPTION_TEXT}" if shown else INTERRUPTION_TEXT
    return sdk.MessageEvent(
        source="agent",
        llm_message=sdk.Message(
            role="assistant", content=[sdk.TextContent(text=text)], reasoning_content=thought
        ),
        sender=INTERRUPTION_SENDER,
    )


def stopped_tool_event(sdk: SimpleNamespace, ending: Any) -> Any:
    """The result of a tool call a stopped process left without one (recovery.Ending):
    a rejection when it never ran, else an error saying it may have."""
    action = ending.action
    if ending.rejected:
        return sdk.UserRejectObservation(
            action_id=action.id,
            tool_name=action.tool_name,
            tool_call_id=action.tool_call_id,
            rejection_reason=ending.reason,
        )
    return sdk.AgentErrorEvent(
        error=ending.reason, tool_name=action.tool_name, tool_call_id=action.tool_call_id
    )


def stopped_message_event(sdk: SimpleNamespace, text: str, thought: str | None) -> Any:
    """What the user was shown of a reply a stopped process never saved (recovery.py)."""
    return sdk.MessageEvent(
        source="agent",
        llm_message=sdk.Message(
            role="assistant", content=[sdk.TextContent(text=text)], reasoning_content=thought
        ),
        sender=STOPPED_SENDER,
    )


def warm_model_path(sdk: SimpleNamespace, llm: Any) -> None:
    """Do now what a process's first model call would do lazily (measured in bench/README.md).

    - The OpenAI client (litellm's transport for OpenAI and OpenAI-compatible providers)
      imports all of `openai.resources` on its first `.chat`: about 2.4 s here.
    - The condenser counts the prompt's tokens before each model call; the first count
      loads the model's tokenizer: about 0.6 s.

    - litellm's `completion` and httpx's transport import more on first use (below), and
      litellm's response types are pydantic models completed on first instantiation.

    All of it is process-wide and idempotent. Slow, blocking: call it from a thread.
    """
    for name in FIRST_CALL_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:  # another litellm/openai version: that part is not warmed
            log.debug("warm-up: no module %s", name)
    _complete_models(importlib.import_module("litellm.types.utils"))
    llm.get_token_count([sdk.Message(role="user", content=[sdk.TextContent(text="warm-up")])])


def warm_tool_schemas(agent: Any) -> None:
    """Build the tools' JSON schemas once: the first build of each costs ~20 ms (pydantic).

    Every model call sends them, and counts their tokens first. Needs initialized tools.
    """
    for tool in agent.tools_map.values():
        tool.to_openai_tool()
        tool.to_openai_tool(add_security_risk_prediction=True)


def _complete_models(module: types.ModuleType) -> None:
    import pydantic

    for value in list(vars(module).values()):
        if (
            isinstance(value, type)
            and issubclass(value, pydantic.BaseModel)
            and value.__module__ == module.__name__
            and not value.__pydantic_complete__
        ):
            try:
                value.model_rebuild()
            except Exception:  # left to complete on first use, as before
                log.debug("warm-up: %s does not complete", value.__name__, exc_info=True)


# What the first model call of a process imported lazily, before this warm-up existed
# (the modules new in sys.modules after a first prompt, with the versions in uv.lock).
FIRST_CALL_IMPORTS = (
    "openai.resources",
    "anyio._backends._asyncio",
    "anyio.streams.tls",
    "litellm._service_logger",
    "litellm.integrations.prometheus_services",
    "litellm.responses.mcp.chat_completions_handler",
    "litellm.responses.mcp.litellm_proxy_mcp_handler",
    "litellm.types.litellm_core_utils.streaming_chunk_builder_utils",
    "litellm.llms.openai.chat.gpt_audio_transformation",
    "litellm.llms.vertex_ai.vertex_ai_partner_models.anthropic.transformation",
    "litellm.proxy.openai_files_endpoints.common_utils",
)


def confirmation_setup(
    sdk: SimpleNamespace, mode: str, credentials: CredentialFiles | None = None, cwd: str = ""
) -> tuple[Any, Any]:
    """(confirmation policy, security analyzer) for one of the three modes.

    With `credentials` (a local conversation), an action that reads one of trio-acp's
    credential files stops the SDK for confirmation in every mode: the modes that ask
    less get `CredentialGuard`, which rates such an action HIGH whatever the model said,
    and a policy that stops for HIGH (credential_files.py; confirm.py then asks). A
    conversation on an agent-server gets the SDK's own classes only: the server could
    not read ours.
    """
    if credentials is None:
        if mode == "always-approve":
            return sdk.NeverConfirm(), None
        if mode == "llm-approve":
            return sdk.ConfirmRisky(threshold=sdk.SecurityRisk.HIGH), sdk.LLMSecurityAnalyzer()
        return sdk.AlwaysConfirm(), None
    if mode not in ("always-approve", "llm-approve"):
        return sdk.AlwaysConfirm(), None
    guard = sdk.CredentialGuard(
        directory=credentials.directory,
        files=[list(file) for file in credentials.files],
        home=credentials.home,
        cwd=cwd,
        model_rates=mode == "llm-approve",
    )
    if mode == "always-approve":
        # Everything else is rated LOW by the guard: nothing else stops.
        return sdk.ConfirmRisky(threshold=sdk.SecurityRisk.HIGH, confirm_unknown=False), guard
    return sdk.ConfirmRisky(threshold=sdk.SecurityRisk.HIGH), guard


REASONING_EFFORTS = ["low", "medium", "high"]


def supports_reasoning_effort(sdk: SimpleNamespace, llm: Any) -> bool:
    try:
        return bool(
            sdk.get_features(
                llm.model, overrides=llm.capability_overrides
            ).supports_reasoning_effort
        )
    except Exception:
        return False
