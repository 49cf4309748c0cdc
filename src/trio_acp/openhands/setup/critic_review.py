"""The critic's verdict on an answer, what the user sees of it, and iterative refinement.

The OpenHands CLI attaches the SDK's API-based critic (`critic.py` builds it) and, when
`enable_iterative_refinement` is on, drives refinement itself rather than through the SDK's
`IterativeRefinementConfig` (which acts on the `finish` tool only): whenever the agent's
answer carries a critic result that calls for it, the CLI sends a follow-up message and the
agent goes on, at most `max_refinement_iterations` times per user message
(`openhands_cli/tui/utils/critic/refinement.py`, `tui/core/refinement_controller.py`). We
do the same, inside the same ACP prompt turn (`turn.py`), with the CLI's rule and message:

- refine when the predicted success is below `critic_threshold`, or when any agent
  behavioral issue's probability reaches `issue_threshold`;
- the follow-up names the iteration (`1/3`), the score and the issues that triggered it;
- the counter starts at 0 with every prompt of the user.

What the client sees (docs: README "Coming from the OpenHands CLI"):

- the verdict as a completed `tool_call` of kind `think` titled with the score (every client
  renders tool calls as a block of their own, apart from the agent's reply, as the CLI shows
  its critic panel apart); its content lists the issues at or above `issue_threshold` and
  whether a refinement follows; `rawOutput` and `_meta.trioAcp.critic` carry the figures;
- the follow-up message as a `user_message_chunk` (it is a user message, sent on the
  user's behalf) marked `_meta.trioAcp.refinement = {iteration, maxIterations}`;
- on session/load, each verdict again after its answer (`replay_verdict`);
- a critic that could not evaluate the answer (endpoint down, no chat template) as a
  warning `notice`, or a thought for a client without notices; the turn ends normally.

Pure: no trio, no SDK import (events and critic results are duck-typed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from trio_acp import schema
from trio_acp.openhands.translate.content import class_names, text_item
from trio_acp.openhands.translate.notices import supports_notices
from trio_acp.openhands.translate.shapes import SdkObject
from trio_acp.openhands.translate.text import one_line

if TYPE_CHECKING:
    from trio_acp.openhands.setup.user_setup import CriticSettings


@attrs.frozen
class Issue:
    name: str
    display_name: str
    probability: float


@attrs.frozen
class CriticOutcome:
    """The critic's verdict on the last answer of a run; `score` None: it could not evaluate."""

    answer_id: str
    score: float | None
    # Agent behavioral issues the critic reported (its own display threshold applied).
    issues: tuple[Issue, ...] = ()
    error: str | None = None


def is_answer(event: SdkObject) -> bool:
    """The agent's final answer of a run: a message of the agent, or its `finish` call."""
    names = class_names(event)
    if "MessageEvent" in names:
        message = getattr(event, "llm_message", None)
        return getattr(event, "source", None) == "agent" or (
            getattr(message, "role", None) == "assistant"
        )
    if "ActionEvent" in names:
        return "FinishAction" in class_names(getattr(event, "action", None))
    return False


def outcome_of(events: Sequence[SdkObject], error: str | None = None) -> CriticOutcome | None:
    """The verdict on the last answer among `events` (one run's), None if it gave none.

    The SDK evaluates the answer before emitting it and leaves `critic_result` None when the
    evaluation failed (it logs why: `error`)."""
    for event in reversed(events):
        if not is_answer(event):
            continue
        answer_id = str(getattr(event, "id", ""))
        result = getattr(event, "critic_result", None)
        score = getattr(result, "score", None)
        if result is None or not isinstance(score, int | float):
            return CriticOutcome(answer_id, None, error=error)
        return CriticOutcome(answer_id, float(score), _issues(getattr(result, "metadata", None)))
    return None


def _issues(metadata: SdkObject) -> tuple[Issue, ...]:
    categorized = metadata.get("categorized_features") if isinstance(metadata, dict) else None
    found = categorized.get("agent_behavioral_issues") if isinstance(categorized, dict) else None
    out = []
    for item in found if isinstance(found, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("probability"), int | float):
            continue
        name = str(item.get("name", "unknown"))
        out.append(
            Issue(
                name,
                str(item.get("display_name") or name.replace("_", " ").title()),
                float(item["probability"]),
            )
        )
    return tuple(sorted(out, key=lambda i: i.probability, reverse=True))


def high_issues(outcome: CriticOutcome, issue_threshold: float) -> tuple[Issue, ...]:
    return tuple(i for i in outcome.issues if i.probability >= issue_threshold)


def wants_refinement(outcome: CriticOutcome, settings: CriticSettings) -> bool:
    """The CLI's `should_trigger_refinement`, given the refinement switch is on."""
    if outcome.score is None or not settings.enable_iterative_refinement:
        return False
    return outcome.score < settings.critic_threshold or bool(
        high_issues(outcome, settings.issue_threshold)
    )


def refinement_message(outcome: CriticOutcome, iteration: int, settings: CriticSettings) -> str:
    """The CLI's `build_refinement_message`, word for word."""
    assert outcome.score is not None
    lines = [
        f"The task appears incomplete (iteration {iteration}/"
        f"{settings.max_refinement_iterations}, "
        f"predicted success likelihood: {outcome.score * 100:.1f}%).",
        "",
    ]
    issues = high_issues(outcome, settings.issue_threshold)
    if issues:
        lines.append("**Detected issues requiring attention:**")
        lines.extend(f"- {i.display_name} ({i.probability:.0%})" for i in issues)
        lines.append("")
    lines += [
        "Please review what you've done and verify each requirement is met.",
        "List what's working and what needs fixing, then complete the task.",
    ]
    return "\n".join(lines)


def stars(score: float) -> str:
    filled = round(score * 5)
    return "★" * filled + "☆" * (5 - filled)


def verdict_update(
    outcome: CriticOutcome, settings: CriticSettings, *, refining: int | None, exhausted: bool
) -> schema.ToolCallStart:
    """The verdict as a completed `think` tool call. `refining`: the iteration that follows
    (None: none); `exhausted`: refinement was called for but the iterations are used up."""
    assert outcome.score is not None
    issues = high_issues(outcome, settings.issue_threshold)
    lines = [f"Predicted success: {outcome.score * 100:.1f}%"]
    if issues:
        lines.append(
            "Issues: " + ", ".join(f"{i.display_name} ({i.probability:.0%})" for i in issues)
        )
    maximum = settings.max_refinement_iterations
    if refining is not None:
        lines.append(f"Refining ({refining}/{maximum}): the agent is asked to review its work.")
    elif exhausted:
        lines.append(f"Not refining again: {maximum} of {maximum} refinements done.")
    data = {
        "score": outcome.score,
        "issues": [
            {"name": i.name, "displayName": i.display_name, "probability": i.probability}
            for i in issues
        ],
        "refinement": {"iteration": refining, "maxIterations": maximum}
        if refining is not None
        else None,
    }
    return schema.ToolCallStart(
        tool_call_id=f"critic-{outcome.answer_id}",
        title=f"Critic: {stars(outcome.score)} {outcome.score * 100:.0f}% predicted success",
        kind="think",
        status="completed",
        content=[text_item("\n".join(lines))],
        raw_output=data,
        meta={"trioAcp": {"critic": data}},
    )


def refinement_update(
    text: str, iteration: int, settings: CriticSettings, message_id: str
) -> schema.UserMessageChunk:
    return schema.UserMessageChunk(
        content=schema.TextContent(text=text),
        message_id=message_id,
        meta={
            "trioAcp": {
                "refinement": {
                    "iteration": iteration,
                    "maxIterations": settings.max_refinement_iterations,
                }
            }
        },
    )


def failure_update(
    client: object, outcome: CriticOutcome
) -> schema.NoticeUpdate | schema.AgentThoughtChunk:
    reason = one_line(outcome.error, 1000) if outcome.error else "see the agent's log"
    title = "The critic could not evaluate the agent's answer"
    if supports_notices(client):
        return schema.NoticeUpdate(severity="warning", title=title, description=reason)
    return schema.AgentThoughtChunk(content=schema.TextContent(text=f"\n\n({title}: {reason})\n"))


def settings_notice(client: object, warning: str | None) -> schema.NoticeUpdate | None:
    """`cli_config.json` could not be used (the CLI then takes its defaults silently): a
    notice after session/new, for a client with notices (the reason is in the log anyway)."""
    if warning is None or not supports_notices(client):
        return None
    return schema.NoticeUpdate(
        severity="warning",
        title="cli_config.json is not usable; the critic uses the default settings",
        description=one_line(warning, 1000),
    )


def review_updates(
    client: object,
    outcome: CriticOutcome,
    settings: CriticSettings,
    iteration: int,
) -> tuple[list[schema.SessionUpdate], int | None]:
    """What the user sees of `outcome` after `iteration` refinements this turn, and the
    iteration to run next (None: the turn is over)."""
    if outcome.score is None:
        return [failure_update(client, outcome)], None
    wanted = wants_refinement(outcome, settings)
    following = iteration + 1 if wanted and iteration < settings.max_refinement_iterations else None
    return [
        verdict_update(
            outcome, settings, refining=following, exhausted=wanted and following is None
        )
    ], following


def replay_verdict(
    event: SdkObject, settings: CriticSettings | None
) -> schema.ToolCallStart | None:
    """session/load: the verdict to show right after `event`, if it is an answer the critic
    judged (the refinement that followed, if any, shows as the user message it was)."""
    if settings is None or not is_answer(event):
        return None
    outcome = outcome_of([event])
    if outcome is None or outcome.score is None:
        return None
    return verdict_update(outcome, settings, refining=None, exhausted=False)
