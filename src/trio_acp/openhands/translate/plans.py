"""The plan, as a client that advertises the unstable `plan` capability takes it.

Such a client gets `plan_update` (a plan with an id, `{"type": "items", ...}`) in place of
the stable `plan`, and `plan_removed` when the plan is emptied; every other client gets
the stable `plan` as before. An OpenHands session has one plan, its task list (the task
tracker tool, `results.py`), hence one id per session.

The unstable variants are not in the generated union (schema/types.py): they go out as
`UnknownVariant`s, which encode exactly as given (schema/_variants.py).
"""

from __future__ import annotations

import attrs

from trio_acp import schema
from trio_acp.schema import UnknownVariant

#: The id of a session's one plan (its task list).
PLAN_ID = "tasks"


def for_plan_client(update: schema.SessionUpdate) -> schema.SessionUpdate | UnknownVariant:
    """`update` for a client with the `plan` capability (others: leave it as it is)."""
    if not isinstance(update, schema.AgentPlanUpdate):
        return update
    if not update.entries:
        return UnknownVariant(
            tag="plan_removed", data={"sessionUpdate": "plan_removed", "planId": PLAN_ID}
        )
    entries = [schema.to_wire(entry) for entry in update.entries]
    plan = {"type": "items", "planId": PLAN_ID, "entries": entries}
    return UnknownVariant(tag="plan_update", data={"sessionUpdate": "plan_update", "plan": plan})


def spell_for_client(
    caps: schema.ClientCapabilities, notification: schema.SessionNotification
) -> schema.SessionNotification:
    """The `ClientProxy.update_hook` (connection/_agent_side.py): the plan by the client's
    capabilities (`plan` is in the unstable `ClientCapabilities`, schema/unstable.py)."""
    if getattr(caps, "plan", None) is None:
        return notification
    update = for_plan_client(notification.update)
    if update is notification.update:
        return notification
    return attrs.evolve(notification, update=update)
