"""The approval modes' ids and names (the OpenHands CLI's confirmation modes); pure, and
light: the settings (`setup/settings.py`) check a configured mode against them, and they
are read to answer `initialize`, before the rest of the agent is imported
(`openhands/front.py`). `policy.py` is what the modes do.
"""

from __future__ import annotations

ALWAYS_ASK = "always-ask"
ALWAYS_APPROVE = "always-approve"
LLM_APPROVE = "llm-approve"

MODES: list[tuple[str, str, str]] = [
    (ALWAYS_ASK, "Always ask", "Ask before every action the agent takes."),
    (ALWAYS_APPROVE, "Always approve", "Run every action without asking."),
    (
        LLM_APPROVE,
        "Ask when risky",
        "Ask only for actions the LLM security analyzer rates high risk.",
    ),
]
MODE_IDS = [m[0] for m in MODES]
