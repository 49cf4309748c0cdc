"""The one door to the OpenHands SDK: a background import, and the SDK objects we build.

Importing `openhands.sdk` and `openhands.tools` costs ~8-10 s here, so `SdkLoader` starts
it in a thread when the server starts; `initialize` never waits for it and `session/new`
does. litellm and the SDK read `LITELLM_LOCAL_MODEL_COST_MAP` / `OPENHANDS_SUPPRESS_BANNER`
at import time, so they are set here before anything imports them.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
import time
import types
import typing
from types import SimpleNamespace
from typing import Any

import trio

log = logging.getLogger(__name__)


def _prepare_environment() -> None:
    # Without the local cost map litellm fetches one over the network at import, and its
    # retry thread races the import (SDK-NOTES §0): flaky deadlocks, and no network here.
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


def import_sdk() -> SimpleNamespace:
    """Import everything the agent uses from the SDK (slow; call from a thread)."""
    _prepare_environment()
    from openhands.sdk import LLM, Agent, Conversation, Message, TextContent, Tool
    from openhands.sdk import LLMSummarizingCondenser
    from openhands.sdk.context.condenser import NoCondensationAvailableException
    from openhands.sdk.event import Event
    from openhands.sdk.conversation.state import ConversationExecutionStatus, ConversationState
    from openhands.sdk.security.confirmation_policy import AlwaysConfirm, ConfirmRisky, NeverConfirm
    from openhands.sdk.security.llm_analyzer import LLMSecurityAnalyzer
    from openhands.sdk.llm.utils.model_features import get_features
    from openhands.sdk.security.risk import SecurityRisk
    from openhands.sdk.llm import ImageContent
    from openhands.tools.file_editor import FileEditorTool
    from openhands.tools.task_tracker import TaskTrackerTool
    from openhands.tools.terminal import TerminalTool

    return SimpleNamespace(
        LLM=LLM,
        Agent=Agent,
        Conversation=Conversation,
        Message=Message,
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
        SecurityRisk=SecurityRisk,
        get_features=get_features,
        TerminalTool=TerminalTool,
        FileEditorTool=FileEditorTool,
        TaskTrackerTool=TaskTrackerTool,
    )


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


def build_llm(sdk: SimpleNamespace, fields: dict[str, Any], *, retry_listener: Any = None) -> Any:
    known = sdk.LLM.model_fields
    data = {k: _from_env_text(v, known[k].annotation) for k, v in fields.items() if k in known}
    ignored = sorted(set(fields) - set(data))
    if ignored:
        log.debug("ignoring settings that are not LLM fields: %s", ", ".join(ignored))
    data.setdefault("usage_id", "agent")
    # Streaming is what makes an editor feel alive; the SDK falls back to a whole reply
    # when a provider cannot stream.
    data.setdefault("stream", True)
    llm = sdk.LLM.model_validate(data)
    if retry_listener is not None:
        llm = llm.model_copy(update={"retry_listener": retry_listener})
    return llm


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
        # The subprocess terminal is deterministic and needs no tmux server that could
        # outlive us; it is killed with its process group on interrupt.
        sdk.Tool(name=sdk.TerminalTool.name, params={"terminal_type": "subprocess"}),
        sdk.Tool(name=sdk.FileEditorTool.name),
        sdk.Tool(name=sdk.TaskTrackerTool.name),
    ]
    # The summarizing condenser keeps long sessions inside the context window, and is
    # what `/condense` asks to run now.
    condenser = sdk.LLMSummarizingCondenser(llm=llm.model_copy(update={"usage_id": "condenser"}))
    return sdk.Agent(llm=llm, tools=tools, mcp_config=mcp_config or {}, condenser=condenser)


def confirmation_setup(sdk: SimpleNamespace, mode: str) -> tuple[Any, Any]:
    """(confirmation policy, security analyzer) for one of the three modes."""
    if mode == "always-approve":
        return sdk.NeverConfirm(), None
    if mode == "llm-approve":
        return sdk.ConfirmRisky(threshold=sdk.SecurityRisk.HIGH), sdk.LLMSecurityAnalyzer()
    return sdk.AlwaysConfirm(), None


REASONING_EFFORTS = ["low", "medium", "high"]


def supports_reasoning_effort(sdk: SimpleNamespace, llm: Any) -> bool:
    try:
        return bool(sdk.get_features(llm.model, overrides=llm.capability_overrides).supports_reasoning_effort)
    except Exception:
        return False
