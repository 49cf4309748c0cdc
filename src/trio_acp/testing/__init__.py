"""Test support: a scripted OpenAI-compatible LLM server and its built-in scenarios."""

from trio_acp.testing.scripted_llm import (
    DEFAULT_MODEL,
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_MODEL,
    FINISHED_TEXT,
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
from trio_acp.testing.scenarios import BUILTIN_SCENARIOS, scenario_prompt
