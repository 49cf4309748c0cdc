"""How an agent is pointed at the scripted server: its environment variables and LLM settings."""

from __future__ import annotations

from typing import Any

__all__ = [
    "DEFAULT_MODEL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "fast_llm_kwargs",
    "scripted_env",
]

#: Model name to use with litellm / OpenHands: ``LLM(model=DEFAULT_MODEL, base_url=...)``.
DEFAULT_MODEL = "openai/scripted"
#: Environment variables through which a subprocess agent gets the scripted server.
ENV_BASE_URL = "TRIO_ACP_LLM_BASE_URL"
ENV_MODEL = "TRIO_ACP_LLM_MODEL"
ENV_API_KEY = "TRIO_ACP_LLM_API_KEY"


def scripted_env(
    base_url: str, model: str = DEFAULT_MODEL, api_key: str = "scripted"
) -> dict[str, str]:
    """Environment for a subprocess agent using the scripted server at ``base_url``."""
    return {
        ENV_BASE_URL: base_url,
        ENV_MODEL: model,
        ENV_API_KEY: api_key,
        "LLM_BASE_URL": base_url,
        "LLM_MODEL": model,
        "LLM_API_KEY": api_key,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENHANDS_SUPPRESS_BANNER": "1",
    }


def fast_llm_kwargs(base_url: str, **overrides: Any) -> dict[str, Any]:
    """``openhands.sdk.LLM(**fast_llm_kwargs(url))``: streaming, and failing fast on faults.

    The SDK defaults (``num_retries=5``, ``retry_min_wait=8``, ``retry_multiplier=8``,
    ``retry_max_wait=64``, ``timeout=300``) turn one HTTP 500 into minutes of back-off.  Here:
    ``num_retries=1`` (tenacity ``stop_after_attempt``: 1 = a single attempt), no waits,
    ``timeout=5`` (seconds; httpx read timeout, so a stalled stream fails after 5 s).
    """
    kwargs: dict[str, Any] = {
        "model": DEFAULT_MODEL,
        "base_url": base_url,
        "api_key": "scripted",
        "usage_id": "agent",
        "stream": True,
        "num_retries": 1,
        "retry_min_wait": 0,
        "retry_max_wait": 0,
        "retry_multiplier": 0,
        "timeout": 5,
    }
    kwargs.update(overrides)
    return kwargs
