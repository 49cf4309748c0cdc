"""What the tests that run the OpenHands agent in process share (tests/openhands, tests/editor).

The fixtures built on it (`llm`, `env`) are in tests/conftest.py; a module whose model or
environment differs defines its own, with `agent_env`. Importing the SDK takes ~7 s, so
it happens once per test process (`loader`), never per test.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trio_acp.openhands.sdk import SdkLoader
from trio_acp.testing import ScriptedLLM, scripted_env

_LOADER: SdkLoader | None = None


def loader() -> SdkLoader:
    """The SDK loader every in-process agent of this test process shares (one import)."""
    global _LOADER
    if _LOADER is None:
        _LOADER = SdkLoader()
    return _LOADER


def agent_env(llm: ScriptedLLM, home: Path, **overrides: str | None) -> dict[str, str]:
    """An in-process agent's environment: this process's, the scripted model at `llm`, the
    OpenHands home `home`, one attempt per model call, every action approved; `overrides`
    on top (None removes a variable)."""
    env = dict(os.environ)
    env.update(scripted_env(llm.base_url))
    env.update(
        OPENHANDS_PERSISTENCE_DIR=str(home),
        LLM_NUM_RETRIES="1",
        LLM_TIMEOUT="30",
        TRIO_ACP_DEFAULT_MODE="always-approve",
    )
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


class RecordingClient:
    """A client that keeps every session update and is never asked for permission."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    async def session_update(self, params: Any) -> None:
        self.updates.append(params.update)

    async def request_permission(self, params: Any) -> Any:
        raise AssertionError("no permission requests here (always-approve)")

    def of(self, kind: type) -> list[Any]:
        return [u for u in self.updates if isinstance(u, kind)]
