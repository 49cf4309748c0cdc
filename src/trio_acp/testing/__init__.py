"""Test support: a scripted OpenAI-compatible LLM server and its scenarios, an in-memory
agent/client pair, and (in `wire_check`) a frame checker against the official schema."""

from trio_acp.testing.pair import open_in_memory_pair
from trio_acp.testing.scenarios import BUILTIN_SCENARIOS, scenario_prompt
from trio_acp.testing.scripted_llm import (
    DEFAULT_MODEL,
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_MODEL,
    FINISHED_TEXT,
    Reply,
    RequestContext,
    RequestRecord,
    Scenario,
    ScriptedLLM,
    ToolCall,
    Turn,
    fast_llm_kwargs,
    load_script_file,
    message_text,
    parse_tags,
    scripted_env,
)

__all__ = [
    "BUILTIN_SCENARIOS",
    "DEFAULT_MODEL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "FINISHED_TEXT",
    "Reply",
    "RequestContext",
    "RequestRecord",
    "Scenario",
    "ScriptedLLM",
    "ToolCall",
    "Turn",
    "fast_llm_kwargs",
    "load_script_file",
    "message_text",
    "open_in_memory_pair",
    "parse_tags",
    "scenario_prompt",
    "scripted_env",
]
