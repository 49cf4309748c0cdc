"""Stand-ins for the OpenHands SDK's event, action and observation classes and litellm's
stream chunks, for the translation tests of the fast layer (tests/conftest.py,
`FAST_LAYER`): importing the SDK costs ~8 s of CPU per process, and the translator only
duck-types these classes (by class name along the MRO, then attributes; see
`trio_acp/openhands/translate/translator.py`).

Each stand-in has the SDK class's name, the base-class names the translator dispatches
on, and the SDK's fields and defaults (openhands-sdk/-tools 1.58, litellm as locked). They
are checked against the real classes by running the very same tests on them:
`test_translate_on_the_sdk.py` loads the tests that import this module with
`_sdk_classes.py` (the real classes under the same names) in its place.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

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

Source = Literal["agent", "user", "environment", "hook"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


# --- content (openhands.sdk.llm) -------------------------------------------------------


class BaseContent(_Model):
    cache_prompt: bool = False


class TextContent(BaseContent):
    type: Literal["text"] = "text"
    text: str


class ImageContent(BaseContent):
    type: Literal["image"] = "image"
    image_urls: list[str]


class MessageToolCall(_Model):
    id: str
    responses_item_id: str | None = None
    name: str
    arguments: str
    origin: Literal["completion", "responses"]


class Message(_Model):
    role: Literal["user", "system", "assistant", "tool"]
    content: list[TextContent | ImageContent] = Field(default_factory=list)
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    reasoning_content: str | None = None
    thinking_blocks: list[Any] = Field(default_factory=list)
    responses_reasoning_item: Any = None


# --- actions and observations (openhands.sdk.tool, openhands.tools) ---------------------


class Schema(_Model):
    pass


class Action(Schema):
    pass


class Observation(Schema):
    content: list[TextContent | ImageContent] = Field(default_factory=list)
    is_error: bool = False

    @classmethod
    def from_text(cls, text: str, is_error: bool = False, **kwargs: Any) -> Self:
        return cls(content=[TextContent(text=text)], is_error=is_error, **kwargs)

    @property
    def text(self) -> str:
        return "".join(item.text for item in self.content if isinstance(item, TextContent))


class FinishAction(Action):
    message: str


class FinishObservation(Observation):
    pass


class ThinkAction(Action):
    thought: str


class ThinkObservation(Observation):
    pass


class TerminalAction(Action):
    command: str
    is_input: bool = False
    timeout: float | None = None
    reset: bool = False


class CmdOutputMetadata(_Model):
    exit_code: int = -1
    pid: int = -1
    username: str | None = None
    hostname: str | None = None
    working_dir: str | None = None
    py_interpreter_path: str | None = None
    prefix: str = ""
    suffix: str = ""


class TerminalObservation(Observation):
    command: str | None
    exit_code: int | None = None
    timeout: bool = False
    metadata: CmdOutputMetadata = Field(default_factory=CmdOutputMetadata)
    full_output_save_dir: str | None = None


EditorCommand = Literal["view", "create", "str_replace", "insert", "undo_edit"]


class FileEditorAction(Action):
    command: EditorCommand
    path: str
    file_text: str | None = None
    old_str: str | None = None
    new_str: str | None = None
    insert_line: int | None = None
    view_range: list[int] | None = None


class FileEditorObservation(Observation):
    command: EditorCommand
    path: str | None = None
    prev_exist: bool = True
    old_content: str | None = None
    new_content: str | None = None


class TaskItem(_Model):
    title: str
    notes: str = ""
    status: Literal["todo", "in_progress", "done"] = "todo"


class TaskTrackerAction(Action):
    command: Literal["view", "plan"] = "view"
    task_list: list[TaskItem] = Field(default_factory=list)


class TaskTrackerObservation(Observation):
    command: Literal["view", "plan"]
    task_list: list[TaskItem] = Field(default_factory=list)


class TaskAction(Action):
    description: str | None = None
    prompt: str
    subagent_type: str = "general-purpose"
    resume: str | None = None
    max_turns: int | None = None


class TaskObservation(Observation):
    task_id: str
    subagent: str
    status: str


# --- events (openhands.sdk.event) -------------------------------------------------------


class Event(_Model):
    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    timestamp: str = Field(default_factory=lambda: datetime.now().isoformat())
    source: Source = "environment"
    parent_id: str | None = None


class LLMConvertibleEvent(Event):
    pass


class ActionEvent(LLMConvertibleEvent):
    source: Source = "agent"
    thought: list[TextContent]
    reasoning_content: str | None = None
    thinking_blocks: list[Any] = Field(default_factory=list)
    responses_reasoning_item: Any = None
    action: Action | None = None
    tool_name: str
    tool_call_id: str
    tool_call: MessageToolCall
    llm_response_id: str
    security_risk: Any = "UNKNOWN"
    critic_result: Any = None
    summary: str | None = None


class ObservationBaseEvent(LLMConvertibleEvent):
    tool_name: str
    tool_call_id: str


class ObservationEvent(ObservationBaseEvent):
    observation: Observation
    action_id: str
    extended_content: list[TextContent] = Field(default_factory=list)


class AgentErrorEvent(ObservationBaseEvent):
    source: Source = "agent"
    error: str
    classification: Any = None


class UserRejectObservation(ObservationBaseEvent):
    rejection_reason: str = "User rejected the action"
    rejection_source: Literal["user", "hook"] = "user"
    action_id: str


class MessageEvent(LLMConvertibleEvent):
    source: Source
    llm_message: Message
    llm_response_id: str | None = None
    activated_skills: list[str] = Field(default_factory=list)
    extended_content: list[TextContent] = Field(default_factory=list)
    sender: str | None = None
    critic_result: Any = None


class SystemPromptEvent(LLMConvertibleEvent):
    source: Source = "agent"
    system_prompt: TextContent
    tools: list[Any]
    dynamic_context: TextContent | None = None


class CondensationSummaryEvent(LLMConvertibleEvent):
    summary: str


class Condensation(Event):
    forgotten_event_ids: set[str] = Field(default_factory=set)
    summary: str | None = None
    summary_offset: int | None = None
    llm_response_id: str


class CondensationRequest(Event):
    pass


class PauseEvent(Event):
    source: Source = "user"


class InterruptEvent(Event):
    source: Source = "user"


class TokenEvent(Event):
    source: Source
    prompt_token_ids: list[int]
    response_token_ids: list[int]


class LLMCompletionLogEvent(Event):
    filename: str
    log_data: str
    model_name: str = "unknown"
    usage_id: str = "default"


class ConversationErrorEvent(Event):
    source: Source
    code: str
    detail: str
    classification: Any = None


# --- litellm's stream chunks (litellm.types.utils) -------------------------------------


class Function(_Model):
    name: str | None = None
    arguments: str = ""


class ChatCompletionDeltaToolCall(_Model):
    id: str | None = None
    function: Function
    type: str | None = None
    index: int


class Delta(_Model):
    content: str | None = None
    role: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[ChatCompletionDeltaToolCall] | None = None
    function_call: Any = None
    thinking_blocks: Any = None
    provider_specific_fields: Any = None


class StreamingChoices(_Model):
    index: int = 0
    delta: Delta = Field(default_factory=Delta)
    finish_reason: str | None = None
    logprobs: Any = None


class ModelResponseStream(_Model):
    id: str
    choices: list[StreamingChoices] = Field(default_factory=list)
    model: str | None = None
    object: str = "chat.completion.chunk"
    system_fingerprint: str | None = None
    usage: Any = None
