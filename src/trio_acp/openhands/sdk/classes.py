"""The SDK's classes, for annotations outside the door (`if TYPE_CHECKING:` imports only:
this module imports the SDK, which the rest of the code imports only through `loaded.py`).
Not named `types`: a submodule's import sets the package's attribute of that name, which
would shadow the standard `types` module `__init__.py` uses."""

from __future__ import annotations

from typing import Protocol

from openhands.sdk import LLM as LLM
from openhands.sdk import Agent as Agent
from openhands.sdk import AgentBase as AgentBase
from openhands.sdk import AgentContext as AgentContext
from openhands.sdk import ImageContent as ImageContent
from openhands.sdk import LocalConversation as LocalConversation
from openhands.sdk import Message as Message
from openhands.sdk import RemoteConversation as RemoteConversation
from openhands.sdk import TextContent as TextContent
from openhands.sdk import Tool as Tool
from openhands.sdk.context.condenser import CondenserBase as CondenserBase
from openhands.sdk.conversation.state import ConversationState as ConversationState
from openhands.sdk.critic.impl.api import APIBasedCritic as APIBasedCritic
from openhands.sdk.event import ActionEvent as ActionEvent
from openhands.sdk.event import ConversationStateUpdateEvent as ConversationStateUpdateEvent
from openhands.sdk.event import Event as Event
from openhands.sdk.event import StreamingDeltaEvent as StreamingDeltaEvent
from openhands.sdk.hooks import HookConfig as HookConfig
from openhands.sdk.llm.streaming import LLMStreamChunk as LLMStreamChunk
from openhands.sdk.llm.utils.metrics import Metrics as Metrics
from openhands.sdk.mcp.client import MCPClient as MCPClient
from openhands.sdk.mcp.config import MCPServer as MCPServer
from openhands.sdk.mcp.tool import MCPToolDefinition as MCPToolDefinition
from openhands.sdk.mcp.utils import MCPToolProvider as MCPToolProvider
from openhands.sdk.security.analyzer import SecurityAnalyzerBase as SecurityAnalyzerBase
from openhands.sdk.security.confirmation_policy import (
    ConfirmationPolicyBase as ConfirmationPolicyBase,
)
from openhands.sdk.skills import Skill as Skill
from openhands.sdk.tool import Action as Action
from openhands.sdk.tool import ToolExecutor as ToolExecutor
from openhands.sdk.workspace import RemoteWorkspace as RemoteWorkspace
from openhands.tools.file_editor import FileEditorTool as FileEditorTool
from openhands.tools.terminal import TerminalAction as TerminalAction
from openhands.tools.terminal import TerminalTool as TerminalTool
from openhands.tools.terminal.definition import TerminalObservation as TerminalObservation


class ObservedConversation(Protocol):
    """The SDK conversation's methods that its `@observe` decorator (lmnr) leaves typed as
    taking `Never` on a fresh mypy run (backends/remote.py and setup/subagent_run.py cast
    to this)."""

    def send_message(self, message: Message, sender: str | None = None, /) -> None: ...

    def run(self, *, blocking: bool) -> None: ...

    async def arun(self) -> None: ...
