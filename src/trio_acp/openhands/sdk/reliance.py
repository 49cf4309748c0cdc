"""What trio-acp relies on in the OpenHands SDK (and litellm), one line each: the table the
drift check (tests/openhands/test_sdk_drift.py) runs against the installed version.

Every private method the door overrides or calls, with the parameters its code expects;
every module-level name it replaces or reads; every event class the translation handles,
with the fields it reads; every instance attribute it reaches into. Adding a reliance is
one line here; an SDK upgrade is: run the drift check, fix what it names in this folder.

A target is ``"module:Qualified.name"``. `check` imports the SDK: call it after the load
(a test, `python -c`), never on the Trio thread.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import inspect
from collections.abc import Iterable
from pathlib import Path

import attrs

#: What a reliance is (`Reliance.kind`).
OVERRIDE = "override"  # a method our class overrides: same parameters, and ours defines it
CALL = "call"  # a function or method we call: it takes these parameters
NAME = "name"  # a module-level name or class attribute we read or replace
FIELDS = "fields"  # a pydantic model (an event, an action...) and the fields we read
ATTRIBUTE = "attribute"  # an instance attribute the class's own code sets (``self.<name>``)
DEFINED = "defined"  # a module-level name, found in the module's source without importing it


@attrs.frozen
class Reliance:
    """One piece of the SDK we rely on (see the module doc)."""

    kind: str
    target: str
    #: OVERRIDE: the SDK method's parameters, as `signature_of` writes them; CALL: the
    #: parameters we pass by name (each must be taken).
    params: str = ""
    #: FIELDS: the fields read. OVERRIDE: our overriding class (``module:Class``).
    names: tuple[str, ...] = ()
    by: str = ""


def overrides(target: str, params: str, by: str) -> Reliance:
    return Reliance(OVERRIDE, target, params, by=by)


def calls(target: str, params: str = "") -> Reliance:
    return Reliance(CALL, target, params)


def name(target: str) -> Reliance:
    return Reliance(NAME, target)


def fields(target: str, *names: str) -> Reliance:
    return Reliance(FIELDS, target, names=names)


def attribute(target: str) -> Reliance:
    return Reliance(ATTRIBUTE, target)


def defined(target: str) -> Reliance:
    """For a module whose import has effects (the agent-server's app: its config read)."""
    return Reliance(DEFINED, target)


_EVENT = "openhands.sdk.event:"
_LLM = "trio_acp.openhands.sdk.llm:SessionLLM"
_TASKS = "trio_acp.openhands.sdk.delegation:SessionTaskManager"
_EDITOR = "trio_acp.openhands.sdk.file_editor:ClientFileEditor"
_FILE_EDITOR = "openhands.tools.file_editor.editor:FileEditor"
_TERMINAL = "openhands.tools.terminal.terminal.subprocess_terminal:SubprocessTerminal"
_SOCKET = "openhands.sdk.conversation.impl.remote_conversation:WebSocketCallbackClient"

RELIANCE: tuple[Reliance, ...] = (
    # llm.py: the session's model.
    overrides("openhands.sdk.llm:LLM._atransport_call", "*, messages, enable_streaming, on_token, **kwargs", _LLM),
    overrides("openhands.sdk.llm:LLM._transport_call", "*, messages, enable_streaming, on_token, **kwargs", _LLM),
    overrides("openhands.sdk.llm:LLM.retry_decorator", "num_retries, retry_exceptions, retry_min_wait, retry_max_wait, retry_multiplier, retry_listener", _LLM),
    calls("openhands.sdk.llm:LLM.agenerate"),
    calls("openhands.sdk.llm:LLM.generate"),
    name("openhands.sdk.llm.exceptions:LLMContextWindowExceedError"),
    fields("openhands.sdk.llm:LLM", "num_retries", "retry_multiplier", "retry_min_wait", "retry_max_wait", "stream", "usage_id", "model", "base_url", "api_key"),
    name("openhands.sdk.llm.llm_profile_store:_DEFAULT_PROFILE_DIR"),
    calls("openhands.sdk.llm.llm_profile_store:LLMProfileStore.load", "name"),
    calls("openhands.sdk.llm.utils.model_features:get_features", "model, overrides"),
    # token_counts.py: the condenser's counts, message by message, as the SDK would count them.
    overrides("openhands.sdk.llm:LLM.get_token_count", "messages, tools, add_security_risk_prediction", _LLM),
    calls("openhands.sdk.llm:LLM.format_messages_for_llm", "messages"),
    calls("openhands.sdk.llm:LLM.should_mock_tool_calls", "tools"),
    calls("openhands.sdk.tool:ToolDefinition.to_openai_tool", "add_security_risk_prediction"),
    fields("openhands.sdk.llm:LLM", "custom_tokenizer"),
    calls("litellm:token_counter", "model, messages, tools, count_response_tokens"),
    # fast_stream.py: the streaming fast path, called as the SDK's own `_atransport_call`.
    name("openhands.sdk.llm.llm:litellm_acompletion"),
    calls("openhands.sdk.llm:LLM._aget_litellm_auth_values"),
    calls("openhands.sdk.llm:LLM._prepare_transport_kwargs", "messages, enable_streaming, auth_values"),
    calls("openhands.sdk.llm:LLM._aiter_with_idle_timeout", "stream"),
    calls("openhands.sdk.llm.streaming:_invoke_token_callback", "cb, chunk"),
    name("openhands.sdk.llm.streaming:AnyTokenCallbackType"),
    # ... and litellm's OpenAI stream under it, read by us and finished by litellm.
    attribute("litellm.litellm_core_utils.streaming_handler:CustomStreamWrapper.completion_stream"),
    attribute("litellm.litellm_core_utils.streaming_handler:CustomStreamWrapper.custom_llm_provider"),
    attribute("litellm.litellm_core_utils.streaming_handler:CustomStreamWrapper.response_uptil_now"),
    attribute("litellm.litellm_core_utils.streaming_handler:CustomStreamWrapper.sent_first_chunk"),
    calls("litellm.litellm_core_utils.streaming_handler:CustomStreamWrapper._log_stream_failure_and_raise", "e"),
    calls("litellm:stream_chunk_builder", "chunks, messages"),
    name("litellm:REPEATED_STREAMING_CHUNK_LIMIT"),
    calls("litellm:InternalServerError", "message, model, llm_provider"),
    attribute("openai._streaming:AsyncStream.response"),
    attribute("openai._streaming:AsyncStream._client"),
    attribute("openai._streaming:AsyncStream._cast_to"),
    calls("openai:AsyncOpenAI._process_response_data", "data, cast_to, response"),
    # error_bodies.py: litellm's transport factory.
    calls("litellm.llms.custom_httpx.http_handler:AsyncHTTPHandler._create_async_transport"),
    # tool_schemas.py: the per-class schema it caches.
    name("openhands.sdk.tool.schema:Schema.to_mcp_schema"),
    # file_store.py: the conversation's files.
    name("openhands.sdk.conversation.persistence_const:EVENTS_DIR"),
    name("openhands.sdk.conversation.persistence_const:EVENT_NAME_RE"),
    calls("openhands.sdk:LocalFileStore.read", "path"),
    calls("openhands.sdk:LocalFileStore.list", "path"),
    calls("openhands.sdk:LocalFileStore.write", "path, contents"),
    calls("openhands.sdk.conversation.secret_registry:SecretRegistry.track_exported_values", "values"),
    # __init__.py: forks, recovery.
    calls("openhands.sdk:LocalConversation.fork", "conversation_id"),
    calls("openhands.sdk:LocalConversation.reject_pending_actions", "reason"),
    calls("openhands.sdk.conversation.state:ConversationState.get_unmatched_actions", "events"),
    # stored_events.py: a load's views of the event files. What the SDK's open checks, done
    # the same way (the active branch from the leaf, the reserved root id); the validators
    # a view does without (their effect done by `kind` and the key checks).
    calls("openhands.sdk.conversation.event_store:EventLog.path_to_root", "leaf_id"),
    calls("openhands.sdk.conversation.event_store:EventLog._effective_parent_id", "idx, event"),
    name("openhands.sdk.event.types:ROOT_PARENT_ID"),
    calls("openhands.sdk.utils.models:DiscriminatedUnionMixin.resolve_kind", "kind"),
    name("openhands.sdk.utils.models:DiscriminatedUnionMixin._validate_subtype"),
    name("openhands.sdk.event.base:Event._reject_reserved_id"),
    name("openhands.sdk.llm.message:TextContent._handle_deprecated_fields"),
    # delegation.py: the task tool's sub-agents.
    overrides("openhands.tools.task.manager:TaskManager._get_sub_agent_from_factory", "factory", _TASKS),
    overrides("openhands.tools.task.manager:TaskManager._set_confirmation_policy", "conversation, confirmation_policy", _TASKS),
    overrides("openhands.tools.task.manager:TaskManager._run_until_finished", "task_id, conversation", _TASKS),
    attribute("openhands.tools.task.manager:TaskManager.parent_conversation"),
    overrides("openhands.tools.task.impl:TaskExecutor.__call__", "action, conversation", "trio_acp.openhands.sdk.delegation:SessionTaskExecutor"),
    overrides("openhands.tools.task:TaskToolSet.create", "conv_state, confirmation_handler, sub_agent_scope", "trio_acp.openhands.sdk.delegation:SessionTaskToolSet"),
    overrides("openhands.sdk.conversation.visualizer:ConversationVisualizerBase.create_sub_visualizer", "agent_id", "trio_acp.openhands.sdk.delegation:SubagentView"),
    calls("openhands.sdk.tool:register_tool", "name, factory"),
    calls("openhands.tools.preset.default:register_builtins_agents", "enable_browser"),
    name("openhands.sdk.conversation.visualizer:ConversationVisualizerBase"),
    name("openhands.sdk.subagent:SubAgentScope"),
    # file_editor.py: the file editor over the editor's files.
    overrides(f"{_FILE_EDITOR}.read_file", "path, start_line, end_line, encoding", _EDITOR),
    overrides(f"{_FILE_EDITOR}._count_lines", "path, encoding", _EDITOR),
    overrides(f"{_FILE_EDITOR}.write_file", "path, file_text, encoding", _EDITOR),
    overrides(f"{_FILE_EDITOR}.insert", "path, insert_line, new_str, encoding", _EDITOR),
    overrides(f"{_FILE_EDITOR}.validate_path", "command, path", _EDITOR),
    overrides(f"{_FILE_EDITOR}.__call__", "*, command, path, file_text, view_range, old_str, new_str, insert_line", _EDITOR),
    calls(f"{_FILE_EDITOR}.validate_file", "path"),
    calls(f"{_FILE_EDITOR}._make_output"),
    attribute(f"{_FILE_EDITOR}._history_manager"),
    calls("openhands.tools.file_editor.utils.history:FileHistoryManager.add_history"),
    attribute("openhands.tools.file_editor.utils.history:FileHistoryManager.cache"),
    # (ClientFileEditorExecutor's __init__ replaces the parent's, setting what it sets.)
    attribute("openhands.tools.file_editor.impl:FileEditorExecutor.editor"),
    attribute("openhands.tools.file_editor.impl:FileEditorExecutor.allowed_edits_files"),
    name("openhands.tools.file_editor.utils.config:SNIPPET_CONTEXT_WINDOW"),
    calls("openhands.tools.file_editor.definition:FileEditorObservation.from_text", "text, command, prev_exist, path, old_content, new_content"),
    # terminal_tools.py, terminal_gate.py, permissions/tool_processes.py: the terminal.
    overrides("openhands.sdk.tool:ToolExecutor.__call__", "action, conversation", "trio_acp.openhands.sdk.terminal_tools:ClientTerminalExecutor"),
    calls("openhands.tools.terminal.definition:TerminalObservation.from_text", "text, command, is_error, exit_code, timeout, metadata"),
    fields("openhands.tools.terminal.metadata:CmdOutputMetadata", "exit_code", "working_dir"),
    fields("openhands.tools.terminal:TerminalAction", "command", "is_input", "timeout", "reset"),
    overrides(f"{_TERMINAL}.send_keys", "text, enter", ""),
    overrides(f"{_TERMINAL}.interrupt", "", ""),
    calls(f"{_TERMINAL}.read_screen"),
    attribute(f"{_TERMINAL}.output_lock"),
    attribute(f"{_TERMINAL}.output_buffer"),
    attribute(f"{_TERMINAL}._pty_master_fd"),
    attribute(f"{_TERMINAL}.process"),
    attribute("openhands.tools.terminal.impl:TerminalExecutor._session"),
    # terminal_start.py: the shell started on first use, ready on its prompt (the SDK's
    # `initialize` done our way: its helpers, and the attributes it sets).
    overrides(f"{_TERMINAL}.initialize", "", ""),
    overrides(f"{_TERMINAL}.close", "", ""),
    overrides(f"{_TERMINAL}.read_screen", "", ""),
    overrides(f"{_TERMINAL}.clear_screen", "", ""),
    calls(f"{_TERMINAL}._read_output_continuously_pty"),
    calls(f"{_TERMINAL}._write_pty", "data"),
    attribute(f"{_TERMINAL}.PS1"),
    attribute(f"{_TERMINAL}.shell_path"),
    attribute(f"{_TERMINAL}._env"),
    attribute(f"{_TERMINAL}.reader_thread"),
    attribute(f"{_TERMINAL}.work_dir"),
    attribute(f"{_TERMINAL}._initialized"),
    attribute(f"{_TERMINAL}._closed"),
    calls("openhands.tools.terminal.env:build_terminal_env", "extra_env"),
    calls("openhands.tools.terminal.terminal.process_priority:process_priority_prefix", "env"),
    # (terminal_gate.keep_subprocess_on_reset replaces the name the executor's reset calls.)
    name("openhands.tools.terminal.impl:create_terminal_session"),
    calls("openhands.tools.terminal.terminal.factory:create_terminal_session", "work_dir, terminal_type"),
    attribute("openhands.tools.terminal.terminal.terminal_session:TerminalSession.terminal"),
    name("openhands.tools.terminal.constants:CMD_OUTPUT_PS1_END"),
    # mcp_clients.py: one MCP client per server.
    calls("openhands.sdk.mcp.utils:_prepare_mcp_config", "mcp_config"),
    calls("openhands.sdk.mcp.utils:_connect_and_list_tools", "client"),
    calls("openhands.sdk.mcp.utils:_ToolListChangedHandler.__init__", "client, on_tools_changed"),
    attribute("openhands.sdk.mcp.utils:_ToolListChangedHandler._client"),
    name("openhands.sdk.mcp.utils:log_handler"),
    calls("openhands.sdk.mcp.client:MCPClient.call_async_from_sync", "timeout"),
    overrides("openhands.sdk.mcp.client:MCPClient.list_tools", "max_pages", ""),
    overrides("openhands.sdk.mcp.client:MCPClient.call_tool_mcp", "name, arguments, progress_handler, timeout, meta", ""),
    attribute("openhands.sdk.mcp.client:MCPClient._tools_reconciled_callback"),
    calls("openhands.sdk.mcp.client:MCPClient.sync_close"),
    # agent_setup.py: skills, hooks, the critic.
    calls("openhands.sdk.critic.impl.api:APIBasedCritic._get_template_renderer"),
    attribute("openhands.sdk.critic.impl.api:APIBasedCritic._client"),
    attribute("openhands.sdk.critic.impl.api:APIBasedCritic._template_renderer"),
    calls("openhands.sdk.critic.impl.api.chat_template:ChatTemplateRenderer", "chat_template"),
    name("openhands.sdk.skills.skill:PUBLIC_SKILLS_PATH_ENV"),
    name("openhands.sdk.skills.skill:PUBLIC_SKILLS_REF"),
    calls("openhands.sdk.skills.skill:load_public_skills"),
    calls("openhands.sdk.context:load_project_skills"),
    calls("openhands.sdk.skills:merge_skills_by_name"),
    calls("openhands.sdk.hooks:HookConfig.load", "path"),
    calls("openhands.sdk.tool.registry:list_registered_tools"),
    # remote_client.py: a conversation on an agent-server.
    name(_SOCKET),
    overrides(f"{_SOCKET}._client_loop", "", ""),
    overrides(f"{_SOCKET}.stop", "", ""),
    attribute(f"{_SOCKET}._stop"),
    calls("openhands.sdk:RemoteConversation", "agent, workspace, conversation_id, callbacks, visualizer, max_iteration_per_run, delete_on_close, hook_config"),
    calls("openhands.sdk.workspace:RemoteWorkspace", "host, api_key, working_dir, read_timeout"),
    fields(f"{_EVENT}StreamingDeltaEvent", "content", "reasoning_content"),
    fields(f"{_EVENT}ConversationStateUpdateEvent", "key", "value"),
    name("openhands.sdk.conversation.conversation_stats:ConversationStats"),
    # agent_server.py: `trio-acp agent-server`.
    defined("openhands.agent_server.api:export_session_api_key"),
    fields("openhands.agent_server.config:Config", "session_api_keys"),
    calls("openhands.agent_server.config:get_default_config"),
    calls("openhands.agent_server.__main__:main"),
    # What the rest reads of the SDK's objects beyond its public API: through internals.py
    # (the shells to stop, the editors' undo directories, a conversation's visualizer,
    # its agent's initializer and MCP tool provider), duck-typed.
    attribute("openhands.sdk.conversation.impl.local_conversation:LocalConversation._visualizer"),
    attribute("openhands.sdk.conversation.impl.local_conversation:LocalConversation._mcp_tool_provider"),
    calls("openhands.sdk.conversation.impl.local_conversation:LocalConversation._ensure_agent_ready"),
    name("openhands.sdk:Agent.tools_map"),
    fields("openhands.sdk.tool:ToolDefinition", "executor"),
    name("openhands.sdk.tool:ToolDefinition.name"),
    attribute("openhands.tools.file_editor.utils.file_cache:FileCache.directory"),
    fields("openhands.sdk.conversation.state:ConversationState", "execution_status", "confirmation_policy", "security_analyzer", "secret_registry", "agent"),
    name("openhands.sdk.conversation.state:ConversationState.events"),
    # translate/: the events translated (translator.py's handlers), the fields they read.
    fields(f"{_EVENT}MessageEvent", "id", "llm_message", "sender", "source"),
    fields("openhands.sdk:Message", "role", "content", "reasoning_content"),
    fields(f"{_EVENT}ActionEvent", "action", "llm_response_id", "summary", "thought", "tool_call_id", "tool_name", "tool_call", "security_risk"),
    fields(f"{_EVENT}ObservationBaseEvent", "tool_call_id"),
    fields(f"{_EVENT}ObservationEvent", "observation", "tool_call_id", "tool_name", "action_id"),
    fields(f"{_EVENT}AgentErrorEvent", "error", "tool_call_id", "tool_name"),
    fields(f"{_EVENT}UserRejectObservation", "rejection_reason", "rejection_source", "tool_call_id", "tool_name", "action_id"),
    fields(f"{_EVENT}Condensation", "forgotten_event_ids", "id", "summary"),
    fields(f"{_EVENT}CondensationSummaryEvent", "id", "summary"),
    fields(f"{_EVENT}CondensationRequest", "id"),
    fields("openhands.sdk.event.conversation_error:ConversationErrorEvent", "code", "detail"),
    fields(f"{_EVENT}InterruptEvent"),
    fields(f"{_EVENT}SystemPromptEvent"),
    fields(f"{_EVENT}SecurityAnalysisEvent"),
    fields(f"{_EVENT}TokenEvent"),
    fields(f"{_EVENT}LLMCompletionLogEvent"),
    fields(f"{_EVENT}HookExecutionEvent"),
    fields(f"{_EVENT}PauseEvent"),
)  # fmt: skip


def sdk_version() -> str:
    """The installed versions, as the drift check's messages name them."""
    found = []
    for dist in ("openhands-sdk", "openhands-tools", "openhands-agent-server", "litellm"):
        try:
            found.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{dist} (not installed)")
    return ", ".join(found)


def resolve(target: str) -> object:
    """The object a target names; raises LookupError saying which part is missing."""
    module_name, _, qualified = target.partition(":")
    try:
        obj: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise LookupError(f"no module {module_name} ({exc})") from None
    path = module_name
    for part in qualified.split(".") if qualified else []:
        path += ("." if path != module_name else ":") + part
        try:
            obj = inspect.getattr_static(obj, part)
        except AttributeError:
            try:  # a module's lazy export (its `__getattr__`)
                obj = getattr(obj, part)
            except AttributeError:
                raise LookupError(f"no {path}") from None
    return obj


def signature_of(function: object) -> str:
    """A function's parameters, without `self`/`cls` or annotations: ``"a, *, b, **kw"``."""
    if isinstance(function, (staticmethod, classmethod)):
        function = function.__func__
    if not callable(function):
        raise TypeError(f"{function!r} is not a callable object")  # as inspect says it
    out: list[str] = []
    star = False
    for param in inspect.signature(function).parameters.values():
        if param.name in ("self", "cls") and not out:
            continue
        if param.kind is param.VAR_POSITIONAL:
            out.append("*" + param.name)
            star = True
        elif param.kind is param.VAR_KEYWORD:
            out.append("**" + param.name)
        elif param.kind is param.KEYWORD_ONLY:
            if not star:
                out.append("*")
                star = True
            out.append(param.name)
        else:
            out.append(param.name)
    return ", ".join(out)


def _takes(function: object, names: Iterable[str]) -> list[str]:
    """The names `function` does not take (none when it takes ``**kwargs``)."""
    if isinstance(function, (staticmethod, classmethod)):
        function = function.__func__
    if not callable(function):
        return []
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return []
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    return [n for n in names if n not in params]


def _split(params: str) -> list[str]:
    return [p.strip().lstrip("*") for p in params.split(",") if p.strip() not in ("", "*")]


def _model_fields(model: object) -> set[str]:
    found = getattr(model, "model_fields", None)
    return set(found) if isinstance(found, dict) else set()


def _sets_attribute(cls: type, attr: str) -> bool:
    """Whether the class (or a base in the SDK) sets or declares `attr`."""
    for klass in cls.__mro__:
        if attr in vars(klass) or attr in getattr(klass, "__annotations__", {}):
            return True
        if attr in _model_fields(klass) or attr in getattr(klass, "__private_attributes__", {}):
            return True
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            # inspect cannot find a class whose __module__ was rewritten (openai's streams
            # say "openai"): its __init__'s source, then, which its code object locates.
            try:
                source = inspect.getsource(vars(klass)["__init__"])
            except (KeyError, OSError, TypeError):
                continue
        if f"self.{attr} " in source or f"self.{attr}:" in source or f"self.{attr}=" in source:
            return True
    return False


def _defines(module_name: str, attr: str) -> bool:
    """Whether the module's source binds `attr` at its top level (not importing it)."""
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise LookupError(f"no module {module_name}")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == attr:
                return True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == attr for a in node.names):
                return True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == attr for t in targets):
                return True
    return False


def problem(reliance: Reliance) -> str | None:
    """What is wrong with one reliance on the installed SDK, or None."""
    if reliance.kind == DEFINED:
        module_name, _, attr = reliance.target.partition(":")
        try:
            bound = _defines(module_name, attr)
        except (LookupError, ImportError, OSError, SyntaxError) as exc:
            return f"defined {reliance.target}: {exc}"
        return None if bound else f"defined {reliance.target}: no {reliance.target}"
    try:
        obj = resolve(reliance.target)
    except LookupError as exc:
        if reliance.kind != ATTRIBUTE:
            return f"{reliance.kind} {reliance.target}: {exc}"
        obj = None
    if reliance.kind == OVERRIDE:
        found = signature_of(obj)
        if found != reliance.params:
            return (
                f"override {reliance.target}: the SDK's parameters are ({found}), "
                f"ours expect ({reliance.params})"
            )
        if reliance.by:
            method = reliance.target.rpartition(".")[2]
            try:
                ours = resolve(reliance.by)
            except LookupError as exc:
                return f"override {reliance.target}: our class {reliance.by}: {exc}"
            if method not in vars(ours):
                return f"override {reliance.target}: {reliance.by} does not define {method}"
            missing = _takes(vars(ours)[method], _split(reliance.params))
            if missing:
                return f"override {reliance.target}: {reliance.by} does not take {missing}"
        return None
    if reliance.kind == CALL:
        if not callable(obj) and not isinstance(obj, (staticmethod, classmethod)):
            return f"call {reliance.target}: not callable"
        missing = _takes(obj, _split(reliance.params))
        if missing:
            return f"call {reliance.target}: takes no {', '.join(missing)}"
        return None
    if reliance.kind == FIELDS:
        if not isinstance(obj, type):
            return f"fields {reliance.target}: not a class"
        known = _model_fields(obj)
        missing = [n for n in reliance.names if n not in known]
        return f"fields {reliance.target}: no field {', '.join(missing)}" if missing else None
    if reliance.kind == ATTRIBUTE:
        owner, _, attr = reliance.target.rpartition(".")
        try:
            cls = resolve(owner)
        except LookupError as exc:
            return f"attribute {reliance.target}: {exc}"
        if not isinstance(cls, type) or not _sets_attribute(cls, attr):
            return f"attribute {reliance.target}: the class never sets it"
        return None
    return None  # NAME: resolving it was the check


def check(table: Iterable[Reliance] = RELIANCE) -> list[str]:
    """Every problem of `table` on the installed SDK (empty: all there)."""
    return [found for reliance in table if (found := problem(reliance)) is not None]


def report(problems: list[str]) -> str:
    """The drift check's message: the installed versions, then each missing piece."""
    return (
        f"The installed SDK ({sdk_version()}) lacks what trio-acp relies on; fix "
        "trio_acp/openhands/sdk/ (the table: sdk/reliance.py):\n"
        + "\n".join(f"- {found}" for found in problems)
    )
