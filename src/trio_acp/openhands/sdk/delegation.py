"""The SDK classes of delegation (the `task` tool): what `setup/subagents.py` describes,
on the SDK's side. The sub-agents' hub, their questions and their stopping stay there.

They override the SDK's `TaskManager` hooks `_get_sub_agent_from_factory`,
`_set_confirmation_policy` and `_run_until_finished` (reliance.py lists them, with their
signatures), pass the delegation to the sub-agent's visualizer through the thread-local
`subagents.current`, and replace the SDK's `task_tool_set` registry entry with ours
(`register`, once per process).

Imports the SDK: imported inside a function after the load (`setup/subagents.py`,
`agent_setup.py`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable

from openhands.sdk import Agent
from openhands.sdk.conversation.impl.local_conversation import LocalConversation
from openhands.sdk.conversation.state import ConversationExecutionStatus, ConversationState
from openhands.sdk.conversation.visualizer import ConversationVisualizerBase
from openhands.sdk.event import ActionEvent, Event, ObservationBaseEvent
from openhands.sdk.security import AlwaysConfirm, ConfirmationPolicyBase
from openhands.sdk.subagent import SubAgentScope
from openhands.sdk.subagent.registry import AgentFactory
from openhands.sdk.tool import ToolDefinition, register_tool
from openhands.tools.task import TaskToolSet
from openhands.tools.task.definition import TaskAction, TaskObservation
from openhands.tools.task.impl import TaskExecutor
from openhands.tools.task.manager import ConfirmationHandler, TaskManager
from openhands.tools.terminal import TerminalTool

from trio_acp.openhands.permissions import run_gate, turn_points
from trio_acp.openhands.permissions.tool_processes import terminal_params
from trio_acp.openhands.sdk import mask_in_conversation
from trio_acp.openhands.setup import subagents
from trio_acp.openhands.setup.subagent_run import run_until_stopped


class SubagentView(ConversationVisualizerBase):
    """The session conversation's visualizer: shows nothing itself; hands the SDK a
    sub-visualizer for each sub-agent (the SDK's hook for showing delegation)."""

    def __init__(self, hub: subagents.Hub | None = None) -> None:
        super().__init__()
        self.hub = hub

    def on_event(self, event: Event) -> None:
        pass  # the session's own callbacks show the conversation's events

    def create_sub_visualizer(self, agent_id: str) -> ConversationVisualizerBase | None:
        d = getattr(subagents.current, "delegation", None)
        if self.hub is None or d is None:
            return None
        return _SubView(self.hub, d)


class _SubView(ConversationVisualizerBase):
    def __init__(self, hub: subagents.Hub, d: subagents.Delegation) -> None:
        super().__init__()
        self._hub, self._d = hub, d

    def on_event(self, event: Event) -> None:
        if isinstance(event, ActionEvent):
            self._d.tool_started(event.tool_call_id)
        elif isinstance(event, ObservationBaseEvent):
            self._d.tool_ended(event.tool_call_id)
        self._hub.post(self._d, event)
        # The sub-agent's own thread, in its step: once its turn is cancelled, it takes
        # no further step (no model call) — its run ends here, with this event shown.
        # (Stopping it otherwise waits for the step to end and a pause to win its lock.)
        gate = run_gate.current()
        if self._d.stopped.is_set() or (gate is not None and gate.closed.is_set()):
            raise subagents.SubagentStopped("The user cancelled; the sub-agent was stopped.")


class SessionTaskManager(TaskManager):
    def _get_sub_agent_from_factory(self, factory: AgentFactory) -> Agent:
        agent = super()._get_sub_agent_from_factory(factory)
        tools = [
            t.model_copy(update={"params": terminal_params(t.params)})
            if t.name == TerminalTool.name
            else t
            for t in agent.tools
        ]
        return agent.model_copy(update={"tools": tools})

    def _set_confirmation_policy(
        self,
        conversation: LocalConversation,
        confirmation_policy: ConfirmationPolicyBase | None,
    ) -> None:
        # The agent file's own policy may only ask more than the session's.
        parent = self.parent_conversation.state
        own = (
            confirmation_policy
            if isinstance(confirmation_policy, AlwaysConfirm)
            else parent.confirmation_policy
        )
        conversation.set_confirmation_policy(own)
        conversation.set_security_analyzer(parent.security_analyzer)

    def _run_until_finished(self, task_id: str, conversation: LocalConversation) -> None:
        d: subagents.Delegation | None = getattr(subagents.current, "delegation", None)
        hub = getattr(subagents.current, "hub", None)
        if d is not None:
            d.conversation = conversation
        if isinstance(hub, subagents.Hub) and hub.secrets is not None:
            mask_in_conversation(conversation, hub.secrets.forms)
        waiting = ConversationExecutionStatus.WAITING_FOR_CONFIRMATION
        while True:
            if d is not None and d.stopped.is_set():
                raise subagents.SubagentStopped("The user cancelled; the sub-agent was stopped.")
            run_until_stopped(conversation, d)
            if d is not None and d.stopped.is_set():
                raise subagents.SubagentStopped("The user cancelled; the sub-agent was stopped.")
            if conversation.state.execution_status != waiting:
                return
            pending = ConversationState.get_unmatched_actions(conversation.state.events)
            if not pending:
                return
            if not isinstance(hub, subagents.Hub) or d is None:
                answer, reason = subagents.STOP, "No one could be asked to approve it."
            else:
                answer, reason = hub.ask(d, pending)
            if answer == subagents.STOP:
                conversation.reject_pending_actions(reason or "Not approved.")
                raise subagents.SubagentStopped(f"The sub-agent was stopped: {reason}")
            if answer == subagents.REJECT:
                conversation.reject_pending_actions(reason or "The user rejected it.")


class SessionTaskExecutor(TaskExecutor):
    def __init__(self, manager: TaskManager) -> None:
        super().__init__(manager)
        self._hub: subagents.Hub | None = None

    def __call__(
        self, action: TaskAction, conversation: LocalConversation | None = None
    ) -> TaskObservation:
        try:
            turn_points.reached("task", action)
            return self._delegate(action, conversation)
        finally:
            turn_points.reached("task:over", action)

    def _delegate(
        self, action: TaskAction, conversation: LocalConversation | None
    ) -> TaskObservation:
        # Without the session's hub (a conversation not made by a session) nobody can
        # be asked: a hub that serves no turn stops a sub-agent at its first question.
        hub = subagents.hub_of(conversation) or subagents.Hub()
        self._hub = hub
        label = action.description or action.subagent_type or "sub-agent"
        call_id = subagents.delegating_call_id(conversation, action)
        # Through the run's gate (run_gate.py): a sub-agent either starts before a
        # cancel closes it, and is then stopped and waited for by the turn, or never.
        gate = run_gate.current()
        begin = functools.partial(hub.begin, call_id, label)
        d = gate.admit(begin, what="sub-agent") if gate is not None else begin()
        subagents.current.delegation, subagents.current.hub = d, hub
        try:
            return super().__call__(action, conversation)
        finally:
            subagents.current.delegation = subagents.current.hub = None
            hub.end(d)

    def interrupt(self) -> None:
        if self._hub is not None:
            self._hub.interrupt()

    def stop_subagents(self, stop_processes: Callable[[LocalConversation], object]) -> None:
        if self._hub is not None:
            self._hub.stop_all(stop_processes)


class SessionTaskToolSet(TaskToolSet):
    @classmethod
    def create(  # type: ignore[override]  # the SDK's TaskToolSet.create, as it declares it
        cls,
        conv_state: ConversationState,
        confirmation_handler: ConfirmationHandler | None = None,
        sub_agent_scope: SubAgentScope | dict[str, bool] | None = None,
    ) -> list[ToolDefinition]:
        tools = TaskToolSet.create(conv_state, sub_agent_scope=sub_agent_scope)
        scope = SubAgentScope.model_validate(sub_agent_scope or {})
        executor = SessionTaskExecutor(SessionTaskManager(sub_agent_scope=scope))
        return [tool.set_executor(executor) for tool in tools]


@functools.cache
def register() -> None:
    """Register `SessionTaskToolSet` as the SDK's `task_tool_set`; once per process."""
    # Replacing the SDK's entry is the point: its "duplicate tool name" warning is not news.
    registry_log = logging.getLogger("openhands.sdk.tool.registry")
    level = registry_log.level
    registry_log.setLevel(logging.ERROR)
    try:
        register_tool(TaskToolSet.name, SessionTaskToolSet)
    finally:
        registry_log.setLevel(level)


def subagent_view(hub: subagents.Hub) -> SubagentView:
    """The visualizer of a session's SDK conversation, posting to `hub`."""
    register()
    return SubagentView(hub)
