"""The real SDK and litellm classes under the names `_sdk_standins.py` gives its stand-ins
(`test_translate_on_the_sdk.py` runs the translation tests on these)."""

from __future__ import annotations

from litellm.types.utils import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    ModelResponseStream,
    StreamingChoices,
)
from openhands.sdk.event import (
    ActionEvent,
    AgentErrorEvent,
    Condensation,
    CondensationRequest,
    CondensationSummaryEvent,
    InterruptEvent,
    LLMCompletionLogEvent,
    MessageEvent,
    ObservationEvent,
    PauseEvent,
    SystemPromptEvent,
    TokenEvent,
    UserRejectObservation,
)
from openhands.sdk.event.conversation_error import ConversationErrorEvent
from openhands.sdk.llm import ImageContent, Message, MessageToolCall, TextContent
from openhands.sdk.tool.builtins import (
    FinishAction,
    FinishObservation,
    ThinkAction,
    ThinkObservation,
)
from openhands.tools.file_editor import FileEditorAction, FileEditorObservation
from openhands.tools.task import TaskAction, TaskObservation
from openhands.tools.task_tracker import TaskTrackerAction, TaskTrackerObservation
from openhands.tools.task_tracker.definition import TaskItem
from openhands.tools.terminal import TerminalAction, TerminalObservation

__all__ = [
    "ActionEvent",
    "AgentErrorEvent",
    "ChatCompletionDeltaToolCall",
    "Condensation",
    "CondensationRequest",
    "CondensationSummaryEvent",
    "ConversationErrorEvent",
    "Delta",
    "FileEditorAction",
    "FileEditorObservation",
    "FinishAction",
    "FinishObservation",
    "Function",
    "ImageContent",
    "InterruptEvent",
    "LLMCompletionLogEvent",
    "Message",
    "MessageEvent",
    "MessageToolCall",
    "ModelResponseStream",
    "ObservationEvent",
    "PauseEvent",
    "StreamingChoices",
    "SystemPromptEvent",
    "TaskAction",
    "TaskItem",
    "TaskObservation",
    "TaskTrackerAction",
    "TaskTrackerObservation",
    "TerminalAction",
    "TerminalObservation",
    "TextContent",
    "ThinkAction",
    "ThinkObservation",
    "TokenEvent",
    "UserRejectObservation",
]
