"""The SDK, imported: the module `SdkLoader` imports on its background thread.

Its top-level imports are the SDK's (`openhands.sdk`, `openhands.tools`, litellm through
them) and the door's modules that subclass or patch it; importing it is the slow part of a
process's start (~8-10 s), done once. Nothing outside `trio_acp.openhands.sdk` imports
`openhands` or `litellm` (tests/test_layers.py checks it); the rest of the code gets `SDK`
(an `Sdk`) from `SdkLoader.get()` or `import_sdk()`, or imports a door module inside the
function that needs it, after the load.

`tests/openhands/test_sdk_drift.py` checks every piece of the SDK we rely on
(`reliance.py`) against the installed version.
"""

from __future__ import annotations

from typing import Final

from openhands.sdk import LLM as _LLM
from openhands.sdk import Agent as _Agent
from openhands.sdk import Conversation as _Conversation
from openhands.sdk import LLMSummarizingCondenser as _LLMSummarizingCondenser
from openhands.sdk import LocalConversation as _LocalConversation
from openhands.sdk import Message as _Message
from openhands.sdk import TextContent as _TextContent
from openhands.sdk import Tool as _Tool
from openhands.sdk.context.condenser import (
    NoCondensationAvailableException as _NoCondensationAvailableException,
)
from openhands.sdk.conversation.state import (
    ConversationExecutionStatus as _ConversationExecutionStatus,
)
from openhands.sdk.conversation.state import ConversationState as _ConversationState
from openhands.sdk.event import AgentErrorEvent as _AgentErrorEvent
from openhands.sdk.event import Event as _Event
from openhands.sdk.event import MessageEvent as _MessageEvent
from openhands.sdk.event import UserRejectObservation as _UserRejectObservation
from openhands.sdk.llm import ImageContent as _ImageContent
from openhands.sdk.llm.utils.model_features import get_features as _get_features
from openhands.sdk.security.confirmation_policy import AlwaysConfirm as _AlwaysConfirm
from openhands.sdk.security.confirmation_policy import ConfirmRisky as _ConfirmRisky
from openhands.sdk.security.confirmation_policy import NeverConfirm as _NeverConfirm
from openhands.sdk.security.llm_analyzer import LLMSecurityAnalyzer as _LLMSecurityAnalyzer
from openhands.sdk.security.risk import SecurityRisk as _SecurityRisk
from openhands.tools.file_editor import FileEditorTool as _FileEditorTool
from openhands.tools.task_tracker import TaskTrackerTool as _TaskTrackerTool
from openhands.tools.terminal import TerminalTool as _TerminalTool

from trio_acp.openhands.sdk import error_bodies, tool_schemas
from trio_acp.openhands.sdk.credential_guard import CredentialGuard as _CredentialGuard
from trio_acp.openhands.sdk.file_store import MaskingFileStore as _MaskingFileStore
from trio_acp.openhands.sdk.llm import SessionLLM as _SessionLLM

# Before any model call: litellm caches the HTTP clients it builds.
error_bodies.install()
# Before any tool is converted for a model call.
tool_schemas.install()


class Sdk:
    """The SDK's classes the agent builds its objects from, typed as the SDK types them.

    One instance, `SDK`; `sdk/__init__.py`'s functions (`build_llm`, `confirmation_setup`,
    ...) take it, so that their callers need no SDK import.
    """

    LLM: Final = _LLM
    SessionLLM: Final = _SessionLLM
    Agent: Final = _Agent
    Conversation: Final = _Conversation
    LocalConversation: Final = _LocalConversation
    MaskingFileStore: Final = _MaskingFileStore
    Message: Final = _Message
    MessageEvent: Final = _MessageEvent
    AgentErrorEvent: Final = _AgentErrorEvent
    UserRejectObservation: Final = _UserRejectObservation
    TextContent: Final = _TextContent
    ImageContent: Final = _ImageContent
    Tool: Final = _Tool
    ExecutionStatus: Final = _ConversationExecutionStatus
    ConversationState: Final = _ConversationState
    LLMSummarizingCondenser: Final = _LLMSummarizingCondenser
    NoCondensationAvailableException: Final = _NoCondensationAvailableException
    Event: Final = _Event
    AlwaysConfirm: Final = _AlwaysConfirm
    NeverConfirm: Final = _NeverConfirm
    ConfirmRisky: Final = _ConfirmRisky
    LLMSecurityAnalyzer: Final = _LLMSecurityAnalyzer
    CredentialGuard: Final = _CredentialGuard
    SecurityRisk: Final = _SecurityRisk
    get_features: Final = staticmethod(_get_features)
    TerminalTool: Final = _TerminalTool
    FileEditorTool: Final = _FileEditorTool
    TaskTrackerTool: Final = _TaskTrackerTool


SDK: Final = Sdk()
