"""The critic's classification API, scripted: what the scripted server answers on `/classify`.

The OpenHands SDK's API-based critic (`openhands.sdk.critic.impl.api`) POSTs
``{"model": "critic", "input": "<the conversation rendered with its chat template>"}`` to
``<server_url>/classify`` (the OpenHands LLM proxy serves it under ``<base_url>/vllm``) and
reads ``data[0].probs``: one probability per label, in the order of :data:`CRITIC_LABELS`.

Scripting is stateless, as for the chat scenarios: the prompt carries a tag
``[critic:STEP,STEP,...]`` and the server takes the step for the number of user turns that
follow the tag in the rendered input (0 for the first answer; each refinement message is a
user turn, so it moves to the next step; the last step repeats). Turns are counted in the
ChatML the critic's Qwen template renders (``<|im_start|>user``, tool results excluded). A
step is a score with optional issues, ``0.4+insufficient_testing=0.9+loop_behavior=0.8``, or
a fault: ``httpNNN`` (that status, an OpenAI-shaped error body) or ``stall`` (no answer
until the client leaves). Without a tag the answer is :data:`DEFAULT_SCORE`, no issues.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

__all__ = [
    "CRITIC_LABELS",
    "DEFAULT_SCORE",
    "CriticStep",
    "classification_payload",
    "critic_step",
]

#: The label space of the SDK's `CriticClient.all_labels` (success first), in its order.
CRITIC_LABELS: tuple[str, ...] = (
    "success",
    "sentiment_positive",
    "sentiment_neutral",
    "sentiment_negative",
    "misunderstood_intention",
    "did_not_follow_instruction",
    "insufficient_analysis",
    "insufficient_clarification",
    "improper_tool_use_or_setup",
    "loop_behavior",
    "insufficient_testing",
    "insufficient_debugging",
    "incomplete_implementation",
    "file_management_errors",
    "scope_creep",
    "risky_actions_or_permission",
    "other_agent_issue",
    "infrastructure_external_issue",
    "infrastructure_agent_caused_issue",
    "clarification_or_restatement",
    "correction",
    "direction_change",
    "vcs_update_requests",
    "progress_or_scope_concern",
    "frustration_or_complaint",
    "removal_or_reversion_request",
    "other_user_issue",
)
DEFAULT_SCORE = 0.9

_TAG = re.compile(r"\[critic:([^\]\n]*)\]")
_USER_TURN = re.compile(r"<\|im_start\|>user\n(?!\s*<tool_response>)")
_FAULT = re.compile(r"^(?:http(\d{3})|stall)$")


@attrs.frozen
class CriticStep:
    score: float = DEFAULT_SCORE
    issues: tuple[tuple[str, float], ...] = ()
    fault: str | None = None  # "httpNNN" or "stall"

    @property
    def http_status(self) -> int | None:
        match = _FAULT.match(self.fault or "")
        return int(match.group(1)) if match and match.group(1) else None


def _parse_step(text: str) -> CriticStep:
    text = text.strip()
    if _FAULT.match(text):
        return CriticStep(fault=text)
    score, *issues = text.split("+")
    parsed = []
    for item in issues:
        name, _, value = item.partition("=")
        if name.strip() not in CRITIC_LABELS:
            raise ValueError(f"unknown critic label {name.strip()!r}")
        parsed.append((name.strip(), float(value)))
    return CriticStep(float(score), tuple(parsed))


def critic_step(rendered: str) -> CriticStep:
    """The scripted step for one `/classify` input (the last tag in it wins)."""
    tags = list(_TAG.finditer(rendered))
    if not tags:
        return CriticStep()
    tag = tags[-1]
    steps = [s for s in tag.group(1).split(",") if s.strip()]
    if not steps:
        return CriticStep()
    index = len(_USER_TURN.findall(rendered, tag.end()))
    return _parse_step(steps[min(index, len(steps) - 1)])


def classification_payload(step: CriticStep, model: str) -> dict[str, Any]:
    """The `/classify` answer for `step` (vLLM's classification response)."""
    probs = dict.fromkeys(CRITIC_LABELS, 0.0)
    probs["success"] = step.score
    probs.update(step.issues)
    return {
        "id": "classify-scripted",
        "object": "list",
        "created": 0,
        "model": model,
        "data": [
            {
                "index": 0,
                "label": None,
                "probs": [probs[label] for label in CRITIC_LABELS],
                "num_classes": len(CRITIC_LABELS),
            }
        ],
        "usage": {"prompt_tokens": 0, "total_tokens": 0, "completion_tokens": 0},
    }
