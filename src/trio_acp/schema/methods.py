"""Which params and result types go with which ACP method."""

from typing import Any

import attrs

from . import types as t

__all__ = [
    "AGENT_METHODS",
    "CANCEL_REQUEST_METHOD",
    "CLIENT_METHODS",
    "PROTOCOL_METHODS",
    "PROTOCOL_VERSION",
    "MethodSpec",
]

#: The ACP version this package speaks (an integer on the wire, not a string).
PROTOCOL_VERSION = 1

#: Protocol-level cancellation of a request, usable in both directions.
CANCEL_REQUEST_METHOD = "$/cancel_request"


@attrs.frozen
class MethodSpec:
    """One ACP method: its name, the type of its params, the type of its result.

    ``params`` and ``result`` are what ``from_wire``/``to_wire`` take: a class, or a union
    alias for the two elicitation types. ``result`` is None for a notification.
    """

    method: str
    params: Any
    result: Any | None

    @property
    def is_notification(self) -> bool:
        return self.result is None


def _table(*specs: MethodSpec) -> dict[str, MethodSpec]:
    return {s.method: s for s in specs}


#: Methods an agent serves (client -> agent), by name.
AGENT_METHODS: dict[str, MethodSpec] = _table(
    MethodSpec("initialize", t.InitializeRequest, t.InitializeResponse),
    MethodSpec("authenticate", t.AuthenticateRequest, t.AuthenticateResponse),
    MethodSpec("logout", t.LogoutRequest, t.LogoutResponse),
    MethodSpec("session/new", t.NewSessionRequest, t.NewSessionResponse),
    MethodSpec("session/load", t.LoadSessionRequest, t.LoadSessionResponse),
    MethodSpec("session/list", t.ListSessionsRequest, t.ListSessionsResponse),
    MethodSpec("session/resume", t.ResumeSessionRequest, t.ResumeSessionResponse),
    MethodSpec("session/close", t.CloseSessionRequest, t.CloseSessionResponse),
    MethodSpec("session/delete", t.DeleteSessionRequest, t.DeleteSessionResponse),
    MethodSpec("session/set_mode", t.SetSessionModeRequest, t.SetSessionModeResponse),
    MethodSpec(
        "session/set_config_option",
        t.SetSessionConfigOptionRequest,
        t.SetSessionConfigOptionResponse,
    ),
    MethodSpec("session/prompt", t.PromptRequest, t.PromptResponse),
    MethodSpec("session/cancel", t.CancelNotification, None),
)

#: Methods a client serves (agent -> client), by name.
CLIENT_METHODS: dict[str, MethodSpec] = _table(
    MethodSpec("session/update", t.SessionNotification, None),
    MethodSpec(
        "session/request_permission", t.RequestPermissionRequest, t.RequestPermissionResponse
    ),
    MethodSpec("fs/read_text_file", t.ReadTextFileRequest, t.ReadTextFileResponse),
    MethodSpec("fs/write_text_file", t.WriteTextFileRequest, t.WriteTextFileResponse),
    MethodSpec("terminal/create", t.CreateTerminalRequest, t.CreateTerminalResponse),
    MethodSpec("terminal/output", t.TerminalOutputRequest, t.TerminalOutputResponse),
    MethodSpec("terminal/release", t.ReleaseTerminalRequest, t.ReleaseTerminalResponse),
    MethodSpec(
        "terminal/wait_for_exit", t.WaitForTerminalExitRequest, t.WaitForTerminalExitResponse
    ),
    MethodSpec("terminal/kill", t.KillTerminalRequest, t.KillTerminalResponse),
    MethodSpec("elicitation/create", t.CreateElicitationRequest, t.CreateElicitationResponse),
    MethodSpec("elicitation/complete", t.CompleteElicitationNotification, None),
)

#: Methods either side may send.
PROTOCOL_METHODS: dict[str, MethodSpec] = _table(
    MethodSpec(CANCEL_REQUEST_METHOD, t.CancelRequestNotification, None),
)
