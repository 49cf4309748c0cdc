"""The OpenHands-backed ACP agent: the only package of trio-acp that imports `openhands.*`.

Its public entry points, for a Trio program that runs the agent (`embedding.py`):

- `open_openhands(client, env=...)`: the agent in this process, driven through an
  `AgentProxy` (README, "The library").
- `open_openhands_agent(env=...)`: the ACP `Agent` object, to serve on a stream of yours.

See docs/ARCHITECTURE.md for its modules, its threads and a turn's life.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trio_acp.openhands.embedding import OpenHandsAgent, open_openhands, open_openhands_agent

__all__ = ["OpenHandsAgent", "open_openhands", "open_openhands_agent"]


def __getattr__(name: str) -> Any:
    # Imported on first use, not with the package: every module under it (the pure
    # `translate/` too) imports this package first, and the agent's modules would cost
    # each of them ~1 s (tests/conftest.py, the fast layer).
    if name in __all__:
        from trio_acp.openhands import embedding

        return getattr(embedding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
