"""The one door to the OpenHands SDK: its background import, and the SDK objects we build.

This package is the only importer of `openhands.*` and litellm (tests/test_layers.py). This
module imports neither: importing them costs ~8-10 s here, so `SdkLoader` imports the
module `loaded` (whose top-level imports are the SDK) in a thread when the server starts;
`initialize` never waits for it and `session/new` does. litellm and the SDK read
`LITELLM_LOCAL_MODEL_COST_MAP` / `OPENHANDS_SUPPRESS_BANNER` at import time, so they are set
here before anything imports them. The functions below take the loaded `Sdk`.

What the door relies on in the SDK is listed in `reliance.py` and checked against the
installed version by tests/openhands/test_sdk_drift.py (docs/ARCHITECTURE.md, `sdk/`).
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
import uuid
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import trio

from trio_acp.openhands.permissions.credential_files import CredentialFiles
from trio_acp.openhands.permissions.tool_processes import terminal_params
from trio_acp.openhands.sdk import abandoned_warm_ups
from trio_acp.openhands.translate.interruptions import CANCEL_SENDER, CANCEL_TEXT, STOPPED_SENDER
from trio_acp.openhands.translate.model_failures import LLM_FAILURE_DEFAULTS
from trio_acp.openhands.translate.shapes import JsonObject

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from openhands.sdk.conversation.base import BaseConversation
    from openhands.sdk.event import AgentErrorEvent, MessageEvent, UserRejectObservation
    from pydantic.fields import FieldInfo

    from trio_acp.openhands.sdk.classes import (
        LLM,
        Agent,
        AgentBase,
        ConfirmationPolicyBase,
        LocalConversation,
        SecurityAnalyzerBase,
    )
    from trio_acp.openhands.sdk.llm import SessionLLM
    from trio_acp.openhands.sdk.loaded import Sdk
    from trio_acp.openhands.sessions.recovery import Ending
    from trio_acp.openhands.setup.models import ModelChoice

    #: What the SDK's `LLM.retry_listener` is called with: attempt, attempts, the error.
    RetryListener = Callable[[int, int, BaseException | None], None]

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


def import_sdk() -> Sdk:
    """Import the SDK (`loaded.py`: slow, once per process; call from a thread)."""
    _prepare_environment()
    with no_dotenv():
        loaded = importlib.import_module("trio_acp.openhands.sdk.loaded")
    sdk: Sdk = loaded.SDK
    return sdk


def mask_in_conversation(conversation: BaseConversation, values: Collection[str]) -> None:
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
        self._sdk: Sdk | None = None
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

    async def get(self) -> Sdk:
        if not self._done.is_set():
            # abandon_on_cancel: a cancelled session/new must not wait out the import.
            await trio.to_thread.run_sync(self._done.wait, abandon_on_cancel=True)
        if self._error is not None:
            raise RuntimeError(f"the OpenHands SDK failed to import: {self._error!r}")
        assert self._sdk is not None
        return self._sdk


def _user_chosen(
    data: dict[str, object], known: dict[str, FieldInfo], sources: dict[str, str] | None
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
    sdk: Sdk,
    fields: Mapping[str, object],  # the user's settings (JSON values)
    *,
    retry_listener: RetryListener | None = None,
    sources: dict[str, str] | None = None,
) -> SessionLLM:
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
    sdk: Sdk,
    choice: ModelChoice,
    *,
    env: Mapping[str, str] | None = None,
    retry_listener: RetryListener | None = None,
) -> SessionLLM:
    """The LLM of one configured model (`models.ModelChoice`); blocking (reads a profile).

    A profile is loaded the SDK's way (`LLMProfileStore`, which also resolves a linked
    provider connection's key) and used as saved; it answers to the same `usage_id` as
    the default model, so `switch_llm` carries the session's token and cost totals over.
    """
    if choice.profile is not None:
        from trio_acp.openhands.sdk.llm import load_profile

        llm = load_profile(choice.profile_dir, choice.profile)
        update: dict[str, object] = {"usage_id": "agent"}
        if retry_listener is not None:
            update["retry_listener"] = retry_listener
        return llm.model_copy(update=update)
    return build_llm(sdk, choice.llm_fields(env), retry_listener=retry_listener)


def fork_conversation(sdk: Sdk, conv: LocalConversation, fork_id: uuid.UUID) -> None:
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


def _from_env_text(value: object, annotation: object) -> object:
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


def _shapes(annotation: object) -> set[object]:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return {shape for arg in typing.get_args(annotation) for shape in _shapes(arg)}
    return {origin or annotation}


def build_agent(sdk: Sdk, llm: LLM, mcp_config: JsonObject | None = None) -> Agent:
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
    sdk: Sdk, shown: str | None = None, thought: str | None = None
) -> MessageEvent:
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


def stopped_tool_event(sdk: Sdk, ending: Ending) -> UserRejectObservation | AgentErrorEvent:
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


def stopped_message_event(sdk: Sdk, text: str, thought: str | None) -> MessageEvent:
    """What the user was shown of a reply a stopped process never saved (recovery.py)."""
    return sdk.MessageEvent(
        source="agent",
        llm_message=sdk.Message(
            role="assistant", content=[sdk.TextContent(text=text)], reasoning_content=thought
        ),
        sender=STOPPED_SENDER,
    )


def warm_model_path(sdk: Sdk, llm: LLM) -> None:
    """Do now what a process's first model call would do lazily (measured in bench/README.md).

    - The OpenAI client (litellm's transport for OpenAI and OpenAI-compatible providers)
      imports all of `openai.resources` on its first `.chat`: about 2.4 s here.
    - The condenser counts the prompt's tokens before each model call; the first count
      loads the model's tokenizer: about 0.6 s.

    - litellm's `completion` and httpx's transport import more on first use (below), and
      litellm's response types are pydantic models completed on first instantiation.

    All of it is process-wide and idempotent. Slow, blocking: call it from a thread. Stops
    between steps once the process is leaving (abandoned_warm_ups.py).
    """
    warm_first_call_imports()
    if abandoned_warm_ups.leaving():
        return
    llm.get_token_count([sdk.Message(role="user", content=[sdk.TextContent(text="warm-up")])])


def warm_first_call_imports() -> None:
    """Import what a process's first model call imports lazily (`FIRST_CALL_IMPORTS`) and
    complete litellm's response types; process-wide, idempotent, slow: from a thread (the
    warm server does it before it forks, warm_server.py)."""
    for name in FIRST_CALL_IMPORTS:
        if abandoned_warm_ups.leaving():
            return
        try:
            importlib.import_module(name)
        except ImportError:  # another litellm/openai version: that part is not warmed
            log.debug("warm-up: no module %s", name)
    _complete_models(importlib.import_module("litellm.types.utils"))


def warm_session_build_imports() -> None:
    """Import what a process's first session build imports lazily (`SESSION_BUILD_IMPORTS`:
    the door's modules for the agent's set-up, delegation and the terminal's gate, the
    LLM's provider store): ~50-70 ms of a warm launch's first session otherwise (the warm
    server does it before it forks, warm_server.py; bench/README.md "Warm start")."""
    for name in SESSION_BUILD_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:  # another SDK/litellm version: that part is not warmed
            log.debug("warm-up: no module %s", name)


def warm_tool_schemas(agent: AgentBase) -> None:
    """Build the tools' JSON schemas once: the first build of each costs ~20 ms (pydantic).

    Every model call sends them, and counts their tokens first. Needs initialized tools.
    """
    for tool in agent.tools_map.values():
        if abandoned_warm_ups.leaving():
            return
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


SESSION_BUILD_IMPORTS = (
    "trio_acp.openhands.sdk.agent_setup",
    "trio_acp.openhands.sdk.delegation",
    "trio_acp.openhands.sdk.terminal_gate",
    "openhands.sdk.llm.provider_connection_store",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.llms.openai_like.dynamic_config",
    "openai.resources.beta",
)


def confirmation_setup(
    sdk: Sdk, mode: str, credentials: CredentialFiles | None = None, cwd: str = ""
) -> tuple[ConfirmationPolicyBase, SecurityAnalyzerBase | None]:
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


def supports_reasoning_effort(sdk: Sdk, llm: LLM) -> bool:
    try:
        return bool(
            sdk.get_features(
                llm.model, overrides=llm.capability_overrides
            ).supports_reasoning_effort
        )
    except Exception:
        return False
