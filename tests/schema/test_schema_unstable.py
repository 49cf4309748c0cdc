"""The hand-written unstable types (schema/unstable.py) against the official
`schema.unstable.json`: each example encodes to a valid value of the def of the same name
and decodes back to itself."""

from __future__ import annotations

import pytest

from trio_acp import schema
from trio_acp.schema import from_wire, to_wire
from trio_acp.schema import unstable as u
from trio_acp.testing.wire_check import _validators

EXAMPLES = [
    u.SessionCapabilities(
        fork=u.SessionForkCapabilities(),
        system_prompt=u.SessionSystemPromptCapabilities(
            mode=u.SessionSystemPromptModeCapabilities(
                override=u.SessionSystemPromptOverrideCapabilities()
            )
        ),
        title=u.SessionTitleCapabilities(),
        status=u.SessionStatusCapabilities(),
    ),
    u.SystemPrompt(mode="append", content=[schema.TextContent(text="be brief")]),
    u.NewSessionRequest(
        cwd="/w",
        system_prompt=u.SystemPrompt(mode="override", content=[schema.TextContent(text="x")]),
    ),
    u.LoadSessionRequest(session_id="s", cwd="/w"),
    u.ResumeSessionRequest(session_id="s", cwd="/w"),
    u.ForkSessionRequest(session_id="s", cwd="/w"),
    u.SetSessionTitleRequest(session_id="s", title="t"),
    u.SetSessionTitleResponse(title="t"),
    u.SessionStatusRequest(session_id="s"),
    u.SessionStatusResponse(status="saved"),
    u.PromptResponse(
        stop_reason="end_turn",
        usage=u.Usage(total_tokens=3, input_tokens=2, output_tokens=1, thought_tokens=0),
    ),
    u.AgentAuthCapabilities(logout=schema.LogoutCapabilities(), status=u.AuthStatusCapabilities()),
    u.AuthStatusRequest(),
    u.AuthStatusResponse(state="authenticated", accounts=[u.AuthAccount(label="m", active=True)]),
    u.AuthStatusUpdateNotification(state="unauthenticated"),
    u.ClientCapabilities(plan=u.PlanCapabilities(), subagents=u.SubagentCapabilities()),
    u.InitializeRequest(
        protocol_version=1, client_capabilities=u.ClientCapabilities(plan=u.PlanCapabilities())
    ),
    u.SessionArchiveCapabilities(),
    u.ArchiveSessionRequest(session_id="s"),
    u.ArchiveSessionResponse(),
    u.UnarchiveSessionRequest(session_id="s"),
    u.UnarchiveSessionResponse(),
    u.ListSessionsRequest(cwd="/w", archived="only"),
    u.SessionInfo(session_id="s", cwd="/w", archived=True),
    u.ListSessionsResponse(sessions=[u.SessionInfo(session_id="s", cwd="/w", archived=False)]),
    u.SubagentUpdate(
        session_id="s/c", title="t", description="d", state=u.SubagentState(state="running")
    ),
    u.SubagentUpdate(
        session_id="s/c", state=u.SubagentState(state="idle", stop_reason="cancelled")
    ),
    u.SubagentUpdate(
        session_id="s/c",
        state=u.SubagentState(
            state="idle", stop_reason="error", error=schema.Error(code=-32603, message="m")
        ),
    ),
]


@pytest.mark.parametrize("value", EXAMPLES, ids=lambda v: type(v).__name__)
def test_matches_the_unstable_schema_and_round_trips(value):
    cls, document = _validators(unstable=True)
    name = type(value).__name__
    root = {k: v for k, v in document.items() if k in ("$schema", "$defs")}
    wire = to_wire(value)
    errors = [e.message for e in cls({**root, "$ref": f"#/$defs/{name}"}).iter_errors(wire)]
    assert errors == []
    assert from_wire(type(value), wire) == value


def test_every_unstable_class_has_an_example():
    import attrs

    classes = {n for n in u.__all__ if attrs.has(getattr(u, n))}
    assert classes - {type(v).__name__ for v in EXAMPLES} <= {
        "ForkSessionResponse",
        "SessionForkCapabilities",
        "SessionSystemPromptModeCapabilities",
        "SessionSystemPromptOverrideCapabilities",
        "SessionSystemPromptCapabilities",
        "SessionTitleCapabilities",
        "SessionStatusCapabilities",
        "AuthStatusCapabilities",
        "AuthAccount",
        "Usage",
        "PlanCapabilities",
        "SubagentCapabilities",
        "SubagentState",  # the schema's StateUpdate: in SubagentUpdate's examples
    }
