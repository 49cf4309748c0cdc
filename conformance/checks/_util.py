"""Small helpers shared by the check modules."""

from __future__ import annotations

import json
from typing import Any

from ..context import SESSION_LEVEL_UPDATES, STOP_REASONS, Turn
from ..harness import AgentProcess, Frame, Reply, _id_key
from ..model import Failed


def brief(value: Any, n: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return text if len(text) <= n else text[: n - 3] + "..."


def require_result(reply: Reply, what: str) -> Any:
    """The reply's result, or Failed saying what came instead."""
    if not reply.ok:
        raise Failed(f"{what}: {reply.describe()}")
    return reply.result


def require_stop_reason(turn: Turn, what: str = "session/prompt") -> str:
    if turn.reply is None:
        raise Failed(f"{what}: no response")
    result = require_result(turn.reply, what)
    reason = result.get("stopReason") if isinstance(result, dict) else None
    if reason not in STOP_REASONS:
        raise Failed(f"{what}: stopReason {reason!r} is not one of {sorted(STOP_REASONS)}")
    return reason


def responses_with_loose_id(agent: AgentProcess, sent_id: Any, after: int) -> list[Frame]:
    """Responses after ``after`` whose id equals ``sent_id`` loosely (5 == "5")."""
    out = []
    for f in agent.since(after):
        if f.is_response and str(f.msg.get("id")) == str(sent_id):
            out.append(f)
    return out


def exact_id(frame: Frame, sent_id: Any) -> bool:
    return _id_key(frame.msg.get("id")) == _id_key(sent_id)


def late_turn_updates(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f.update_kind not in SESSION_LEVEL_UPDATES]


def turn_update_since(agent: AgentProcess, session_id: str, mark: int) -> bool:
    """Whether a turn update (not a session-level one) for ``session_id`` arrived after ``mark``.

    The sign that a prompt sent at ``mark`` is under way: a session-level update such as the
    ``available_commands_update`` an agent sends right after ``session/new`` answered can
    arrive after the mark and say nothing about the turn (checks that close or cancel a
    running turn waited for it and sent their request before the turn had started).
    """
    return any(
        f.method == "session/update"
        and f.session_id == session_id
        and f.update_kind not in SESSION_LEVEL_UPDATES
        for f in agent.since(mark)
    )
