"""Asking the user before the agent acts: one `session/request_permission` per action.

When the SDK stops with WAITING_FOR_CONFIRMATION, each pending action is checked against
the session's "always" rules and, if none applies, put to the user with a preview (the
command, or the diff of an edit) and the security analyzer's risk. It fails closed:
anything but an explicit allow — a reject, a cancelled outcome, an error, a malformed or
unknown answer, a cancelled turn — means nothing runs. An action that reads trio-acp's own
credential files is asked every time, in every mode, whatever the rules (credential_files.py).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypedDict

import trio

from trio_acp import schema
from trio_acp.openhands.editor.client_calls import ANSWER_TIMEOUT_VAR, configured_answer_timeout
from trio_acp.openhands.permissions.credential_files import CredentialFiles, CredentialRead
from trio_acp.openhands.permissions.policy import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    ALWAYS_APPROVE,
    LLM_APPROVE,
    REJECT_ALWAYS,
    REJECT_ONCE,
    Rule,
    RuleBook,
    Scope,
    action_scope,
    permission_options,
)
from trio_acp.openhands.translate import permission_preview, present, tool_arguments, tool_locations
from trio_acp.openhands.translate.shapes import ToolArgs
from trio_acp.openhands.translate.tools import Reader
from trio_acp.rpc import ErrorCode, PeerClosed, RequestError

if TYPE_CHECKING:
    from trio_acp.openhands.editor.session_roots import SessionRoots

log = logging.getLogger(__name__)

CANCELLED = "cancelled"
# How much of a file the permission preview may read to show an edit's diff.
PREVIEW_LIMIT = 256 * 1024


class PermissionClient(Protocol):
    async def request_permission(
        self, request: schema.RequestPermissionRequest
    ) -> schema.RequestPermissionResponse: ...


class Asker(Protocol):
    """What asking permission needs of its session (nothing else of it)."""

    @property
    def id(self) -> uuid.UUID: ...

    @property
    def cwd(self) -> str: ...

    @property
    def rules(self) -> RuleBook: ...

    @property
    def client(self) -> PermissionClient: ...

    async def flush_turn_updates(self) -> None: ...

    async def send_update(self, update: schema.SessionUpdate) -> None: ...


class PendingAction(Protocol):
    """What asking reads of a waiting action by name: an SDK `ActionEvent`, or a sub-agent's
    under its nested tool call id (setup/subagents.py). The rest is read duck-typed, as the
    translator reads it (`tool_arguments`; `security_risk`, `summary`, a sub-agent's `nesting`)."""

    @property
    def tool_name(self) -> str: ...

    @property
    def tool_call_id(self) -> str: ...


class PendingBatch(Protocol):
    """The actions waiting for a decision, and the one way to refuse them (the SDK has no
    per-action reject): the session's `Conversation`, or a sub-agent's batch (subagents.py)."""

    async def pending_actions(self) -> Sequence[PendingAction]: ...

    async def reject_pending(self, reason: str) -> None: ...


class _Answer(TypedDict, total=False):
    """How the permission request ended: the client's answer, or why there is none."""

    response: schema.RequestPermissionResponse
    error: Exception


class PermissionFailed(Exception):
    """The permission request failed or was answered with something unusable."""


def action_arguments(action: PendingAction) -> ToolArgs:
    """The arguments of a pending action, parsed as the translator parses them."""
    return tool_arguments(action)


def _read(path: str) -> str | None:
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > PREVIEW_LIMIT:
            return None
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def preview(
    tool: str, args: ToolArgs, cwd: str, risk: str | None, read: Reader = _read
) -> list[schema.ToolCallContent]:
    """What the user sees before saying yes: the tool catalog's preview (the command, or
    the edit as a diff), and the security analyzer's risk. `read` gives a file's text
    (the disk, or the editor's buffer: `editor_workspace.EditorWorkspace.preview_reader`)."""
    content = permission_preview(tool, args, cwd, read)
    if risk and risk.upper() != "UNKNOWN":
        content.append(
            schema.ContentToolCallContent(
                content=schema.TextContent(text=f"Security risk: {risk.lower()}")
            )
        )
    return content


async def ask(
    session: Asker,
    action: PendingAction,
    scope: Scope,
    cancel_event: trio.Event,
    credential: CredentialRead | None = None,
) -> str:
    """Put one action to the user; returns an option kind, or CANCELLED. Raises PermissionFailed.

    An action that reads a credential file (`credential`) is asked with a question that
    says so, and without "Always allow": it is asked every time."""
    args = action_arguments(action)
    risk = getattr(getattr(action, "security_risk", None), "value", None)
    # The request must stand on its own: a client may render it (or decide on it, e.g.
    # auto-approve reads) without the tool_call it refers to. Title, kind and locations
    # come from the translator's own `present`, so both always agree.
    title, kind, locations = present(
        action.tool_name, args, getattr(action, "summary", None), cwd=session.cwd
    )
    # A sub-agent's action: titled and tagged as its tool call is (translate/subagents.py).
    nesting = getattr(action, "nesting", None)
    if nesting is not None:
        title = f"{nesting.label}: {title}"
    read = _read
    workspace = getattr(session, "workspace", None)
    if workspace is not None and locations and kind == "edit":
        # The diff the user approves is against what they see: the editor's buffer.
        read = await workspace.preview_reader([p for p, _ in locations], fallback=_read)
    content = preview(action.tool_name, args, session.cwd, risk, read)
    options = permission_options(scope.label())
    if credential is not None:
        title = f"Read {credential.path} ({credential.holds})? {title}"
        warning = schema.TextContent(text=credential.warning())
        content.insert(0, schema.ContentToolCallContent(content=warning))
        options = [o for o in options if o.kind != ALLOW_ALWAYS]
    tool_call = schema.ToolCallUpdate(
        tool_call_id=action.tool_call_id,
        title=title,
        kind=kind,
        name=action.tool_name or None,
        status="pending",
        content=content or None,
        locations=tool_locations(locations),
        raw_input=args or None,
        meta=nesting.meta if nesting is not None else None,
    )
    request = schema.RequestPermissionRequest(
        session_id=str(session.id), tool_call=tool_call, options=options
    )
    result: _Answer = {}
    # A person answers this: no short timeout; the turn's cancel (`cancel_event`), the
    # session's end (our cancellation) and the client's exit (PeerClosed) end the wait,
    # and an operator's TRIO_ACP_ANSWER_TIMEOUT bounds it (client_calls.py).
    bound = configured_answer_timeout()
    with trio.move_on_after(bound) as waiting:
        await _request_or_cancel(session, request, cancel_event, result)
    if waiting.cancelled_caught:
        raise PermissionFailed(
            f"the client did not answer the permission request within {bound:g} s "
            f"({ANSWER_TIMEOUT_VAR})"
        )
    if cancel_event.is_set():
        return CANCELLED
    error = result.get("error")
    if isinstance(error, RequestError) and error.code == ErrorCode.REQUEST_CANCELLED:
        return CANCELLED  # the client withdrew the question ($/cancel_request): same as a cancel
    if error is not None:
        raise PermissionFailed(f"the permission request failed: {error}")
    outcome = result["response"].outcome
    if isinstance(outcome, schema.CancelledPermissionOutcome):
        return CANCELLED
    if isinstance(outcome, schema.SelectedPermissionOutcome) and outcome.option_id in {
        o.option_id for o in options
    }:
        return outcome.option_id
    raise PermissionFailed(
        f"the client answered with an option we did not offer: {schema.to_wire(outcome)!r}"
    )


async def _request_or_cancel(
    session: Asker,
    request: schema.RequestPermissionRequest,
    cancel_event: trio.Event,
    result: _Answer,
) -> None:
    """The permission request, raced with the turn's cancel; fills `result`."""
    async with trio.open_nursery() as nursery:

        async def watch_cancel() -> None:
            await cancel_event.wait()
            nursery.cancel_scope.cancel()  # sends $/cancel_request for our request

        async def request_it() -> None:
            try:
                result["response"] = await session.client.request_permission(request)
            except (RequestError, PeerClosed) as exc:
                result["error"] = exc
            except Exception as exc:  # e.g. a malformed answer (SchemaError): fail closed
                result["error"] = exc
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch_cancel)
        nursery.start_soon(request_it)


def _risky(action: PendingAction) -> bool:
    """Whether llm-approve asks about `action`: as the SDK's `ConfirmRisky(threshold=HIGH)`
    decides (sdk.py, `confirmation_setup`), a HIGH or an unknown risk."""
    risk = getattr(getattr(action, "security_risk", None), "value", None)
    return not isinstance(risk, str) or risk.upper() not in ("LOW", "MEDIUM")


def _outside(scope: Scope, roots: SessionRoots) -> bool:
    if scope.tool == "terminal":
        return False
    target = scope.target
    return isinstance(target, str) and os.path.isabs(target) and not roots.contains(target)


async def confirm_pending(session: Asker, conv: PendingBatch, cancel_event: trio.Event) -> str:
    """Decide on every pending action. Returns "continue" or CANCELLED; raises PermissionFailed.

    With any rejection, the SDK rejects the whole pending batch (it has no per-action
    reject), so nothing of that batch runs and the model is told which the user refused.
    """
    pending = await conv.pending_actions()
    # The tool calls were announced as they streamed; they must be on the wire before a
    # permission request that refers to them.
    await session.flush_turn_updates()
    refused: list[str] = []
    allowed: list[str] = []
    credentials: CredentialFiles | None = getattr(session, "credential_files", None)
    for action in pending:
        args = action_arguments(action)
        scope = action_scope(action.tool_name, args, session.cwd)
        credential = (
            credentials.read_by(action.tool_name, args, session.cwd) if credentials else None
        )
        rule = session.rules.match(scope)
        roots = getattr(session, "roots", None)
        if rule is not None and rule.allow and roots is not None and _outside(scope, roots):
            # "Always allow" for a whole tool was given about the session's workspace: a
            # file outside every root (cwd + additionalDirectories) is asked about, unless
            # a rule names that very path. Reject rules hold everywhere (fail closed).
            exact = [r for r in session.rules.rules if r.target is not None and r.matches(scope)]
            rule = exact[0] if exact else None
        if credential is not None and rule is not None and rule.allow:
            # Reading trio-acp's own credentials is asked every time (credential_files.py);
            # a reject rule still rejects it unasked (fail closed).
            rule = None
        if rule is not None:
            decision = ALLOW_ONCE if rule.allow else REJECT_ONCE
            log.info("rule %r decided %s for %s", rule.describe(), decision, scope)
        elif credential is None and getattr(session, "mode", None) == ALWAYS_APPROVE:
            # The SDK stopped for another action of this batch, one that reads a
            # credential file (sdk.py, `confirmation_setup`), or an agent-server stops
            # for every action (`decides_for_mode`): this one runs unasked.
            decision = ALLOW_ONCE
        elif (
            credential is None
            and getattr(conv, "decides_for_mode", False)
            and getattr(session, "mode", None) == LLM_APPROVE
            and not _risky(action)
        ):
            # An agent-server stops for every action in llm-approve (it cannot load our
            # credential guard: remote_conversation.py): what its SDK would have run
            # unasked, rated below HIGH by the model, runs unasked.
            decision = ALLOW_ONCE
        else:
            decision = await ask(session, action, scope, cancel_event, credential)
        if decision == CANCELLED:
            return CANCELLED
        if decision in (ALLOW_ALWAYS, REJECT_ALWAYS):
            session.rules.add(Rule(scope.tool, scope.target, allow=decision == ALLOW_ALWAYS))
        if decision in (REJECT_ONCE, REJECT_ALWAYS):
            refused.append(scope.label())
        else:
            allowed.append(action.tool_call_id)
    if refused:
        reason = "The user rejected: " + ", ".join(refused) + ". Nothing in this batch was run."
        await conv.reject_pending(reason)
    else:
        for tool_call_id in allowed:
            await session.send_update(
                schema.ToolCallProgress(tool_call_id=tool_call_id, status="in_progress")
            )
    return "continue"
