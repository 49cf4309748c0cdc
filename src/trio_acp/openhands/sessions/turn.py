"""One prompt turn: run the conversation until it is over, asking permission as it stops
for it, interrupting it on cancel, and answering with the stop reason.

The turn reaches its session only through `TurnHost` (the conversation, the outbox and
the few session duties a turn has: slash commands, the session index, usage, asking
permission), so it runs as well on a fake conversation (`trio_acp.testing`).
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol

import trio

from trio_acp import schema
from trio_acp.connection import ClientProxy
from trio_acp.openhands.backends.conversation import (
    ERROR,
    FINISHED,
    STUCK,
    WAITING_FOR_CONFIRMATION,
    Conversation,
    Run,
)
from trio_acp.openhands.errors import internal, reraise, sole_error
from trio_acp.openhands.permissions import turn_points
from trio_acp.openhands.permissions.confirm import CANCELLED, PendingBatch, PermissionFailed
from trio_acp.openhands.sessions.outbox import Outbox
from trio_acp.openhands.setup.critic_review import (
    refinement_message,
    refinement_update,
    review_updates,
)
from trio_acp.openhands.setup.subagents import serve_subagents, wait_for_subagents
from trio_acp.openhands.setup.user_setup import CriticSettings
from trio_acp.openhands.translate import one_line
from trio_acp.openhands.translate.messages import prompt_sender
from trio_acp.openhands.translate.model_failures import describe_model_failure
from trio_acp.openhands.translate.prompt import AudioPart, ImagePart, TextPart, prompt_to_parts
from trio_acp.rpc import RequestError

log = logging.getLogger(__name__)

# How long a cancelled turn may take to stop the conversation before we give up waiting
# and answer anyway. interrupt() lands in milliseconds; this bounds a misbehaving tool.
CANCEL_DEADLINE = 10.0

STUCK_MESSAGE = (
    "\n\nI stopped: I was going around in circles (repeating the same step with the same "
    "result). Tell me what to try differently, or give me more to go on."
)


class TurnHost(Protocol):
    """What a turn needs of its session."""

    conversation: Conversation | None
    outbox: Outbox

    @property
    def model(self) -> str: ...

    # The client's end of the connection: what it advertised decides how notes are shown.
    client: ClientProxy
    # The critic settings of cli_config.json when the agent has a critic, else None.
    critic: CriticSettings | None

    async def execute_command(self, name: str, arg: str) -> str: ...

    def record_turn(self, blocks: list[schema.ContentBlock], seq: int) -> None: ...

    def post_usage(self, seq: int) -> None: ...

    async def confirm_pending(self, conv: PendingBatch, cancel_event: trio.Event) -> str: ...

    async def send_update(self, update: schema.SessionUpdate) -> None: ...

    async def note_cut_short(self, since: int, *, cancelled: bool) -> None: ...


async def play_prompt(
    host: TurnHost,
    blocks: list[schema.ContentBlock],
    cancel_event: trio.Event,
    seq: int,
    *,
    command: tuple[str, str] | None,
    message_id: str | None = None,
) -> schema.PromptResponse:
    """Turn `seq`: the slash `command` (`commands.parse` of `blocks`, parsed once by the
    caller), or the prompt sent to the conversation and run. `message_id`: the id the
    client has for the prompt (a v2 client's, v2/gateway.py), kept with the user message
    for replays (translate/messages.py).

    `cancel_event` is the turn's one cancel mechanism: a session/cancel sets it, and so
    does the request's own cancel, converted once (`with_one_cancel`)."""
    outbox = host.outbox
    outbox.begin_turn(seq)
    stop_reason: str | None = None
    sent = False
    try:
        if command is not None:
            text = await host.execute_command(*command)
            await host.send_update(schema.AgentMessageChunk(content=schema.TextContent(text=text)))
            stop_reason = "cancelled" if cancel_event.is_set() else "end_turn"
            return schema.PromptResponse(stop_reason=stop_reason)
        parts = prompt_to_parts(blocks)
        if not parts:
            raise RequestError.invalid_params("the prompt has no content")
        host.record_turn(blocks, seq)
        conv = host.conversation
        assert conv is not None
        if conv.status() == WAITING_FOR_CONFIRMATION:
            # Left waiting by an earlier process (crash, kill) or turn: the SDK would run
            # those actions as approved on the next run. Nobody approved them.
            await _reject_pending(
                conv, "Not approved before the session was reopened; nothing was run."
            )
        start = conv.event_count()
        sent = True  # from here the message may reach the conversation, even if cut short
        turn_points.reached("send", parts)
        await _send_unless_cancelled(conv, parts, cancel_event, prompt_sender(message_id))
        if cancel_event.is_set():
            stop_reason = "cancelled"
        else:
            stop_reason = await _run_until_over(host, conv, cancel_event, start)
            if host.critic is not None:
                stop_reason = await _review_and_refine(host, conv, cancel_event, start, stop_reason)
            if stop_reason == "end_turn" and conv.status() == STUCK:
                # The SDK's stuck detector stopped a loop (the same action and result
                # over and over, or talking to itself): the turn is over, say why.
                await host.send_update(
                    schema.AgentMessageChunk(content=schema.TextContent(text=STUCK_MESSAGE))
                )
        host.post_usage(seq)
    finally:
        # Every update of this turn goes out before its response, errors included;
        # tool calls the turn announced but never finished are closed as failed.
        fail_open = (
            None
            if stop_reason == "end_turn"
            else ("Cancelled." if stop_reason == "cancelled" else "The turn ended with an error.")
        )
        # Shielded: this also runs when the turn's last-resort deadline cut it
        # (`with_one_cancel`), and the turn's end must still be recorded and shown.
        with trio.move_on_after(CANCEL_DEADLINE, shield=True):
            if sent and host.conversation is not None:
                # The sub-agents' last events come from their own threads (subagents.py).
                await wait_for_subagents(host.conversation)
                if stop_reason is None or stop_reason == "cancelled":
                    # Cut short: what it streamed is all shown (and journaled) first, then
                    # kept with the note (the SDK saves no event for a cut reply).
                    await outbox.flush()
                    await host.note_cut_short(start, cancelled=stop_reason == "cancelled")
        # Bounded and shielded itself; it closes the turn however it ends.
        await outbox.end_turn(seq, fail_open, within=CANCEL_DEADLINE)
    if stop_reason == "end_turn":
        stop_reason = {"length": "max_tokens", "content_filter": "refusal"}.get(
            outbox.finish_reason or "", "end_turn"
        )
    return schema.PromptResponse(stop_reason=stop_reason)


async def _send_unless_cancelled(
    conv: Conversation,
    parts: list[TextPart | ImagePart | AudioPart],
    cancel_event: trio.Event,
    sender: str | None = None,
) -> None:
    """Send the prompt; a cancel, before or during the send, stops waiting for it where
    the conversation says its sending may be left to finish on its own
    (`send_abandonable`: tools still starting, MCP servers up to their bound; an
    agent-server's first message waits for the server to start the tools, seconds).
    The turn ends `cancelled` and the conversation notes the interruption after the
    message (`note_interruption`); the next send goes after it. A send to a ready local
    conversation is short (its lock): it is awaited whole."""
    send = functools.partial(conv.send_message, parts)
    if sender is not None:
        send = functools.partial(conv.send_message, parts, sender=sender)
    if not getattr(conv, "send_abandonable", False):
        await send()
        return
    async with trio.open_nursery() as nursery:

        async def cut_short() -> None:
            await cancel_event.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(cut_short)
        await send()
        nursery.cancel_scope.cancel()


async def _review_and_refine(
    host: TurnHost, conv: Conversation, cancel_event: trio.Event, start: int, stop_reason: str
) -> str:
    """Show the critic's verdict on each answer; while it calls for refinement, send the
    CLI's follow-up and run again, in this same turn (critic_review.py). The counter
    starts at 0 with every prompt."""
    iteration = 0
    while stop_reason == "end_turn" and conv.status() == FINISHED:
        outcome = conv.critic_outcome(start)
        critic = host.critic
        if outcome is None or critic is None:  # (an outcome comes only with a critic)
            break
        updates, following = review_updates(host.client, outcome, critic, iteration)
        for update in updates:
            host.outbox.post_note(update)
        if following is None or cancel_event.is_set():
            break
        iteration = following
        text = refinement_message(outcome, iteration, critic)
        host.outbox.post_note(refinement_update(text, iteration, critic, str(uuid.uuid4())))
        start = conv.event_count()
        await _send_unless_cancelled(conv, [TextPart(text)], cancel_event)
        if cancel_event.is_set():
            return "cancelled"
        stop_reason = await _run_until_over(host, conv, cancel_event, start)
    return stop_reason


async def _run_until_over(
    host: TurnHost, conv: Conversation, cancel_event: trio.Event, start: int
) -> str:
    """Run the conversation until the turn is over, asking permission as it stops for it.

    A cancel — session/cancel, or this request's own (`$/cancel_request`, also while a
    permission request is pending; the connection closing), which `with_one_cancel`
    turned into the same event — stops the conversation, nothing pending runs, and the
    answer is the `cancelled` stop reason rather than an error.
    """
    while True:
        outcome = await _run_conversation_once(conv, cancel_event, start, host.model, host)
        if outcome == "cancelled" and conv.status() == WAITING_FOR_CONFIRMATION:
            # The next run would take the pending actions as approved.
            await _reject_pending(conv, "The user cancelled before approving this action.")
        if outcome != "confirm":
            return outcome
        try:
            decision = await host.confirm_pending(conv, cancel_event)
        except PermissionFailed as exc:
            # Fail closed: nothing pending runs, and the turn ends with the reason.
            await _reject_pending(conv, "The permission request failed; nothing was run.")
            raise internal(f"{exc}; nothing was run") from None
        except BaseException:
            # Whatever else went wrong, the actions that were waiting must not be left
            # pending: the next run would take them as approved.
            await _reject_pending(conv, "No approval was given; nothing was run.")
            raise
        if decision == CANCELLED or cancel_event.is_set():
            # Rejected now, or the next run would take the pending actions as approved.
            await _reject_pending(conv, "The user cancelled before approving this action.")
            return "cancelled"


async def _reject_pending(conv: Conversation, reason: str) -> None:
    # Shielded: pending actions left as they are would run as approved on the next run,
    # so this must happen even when the turn's last-resort deadline has cut it.
    with trio.move_on_after(CANCEL_DEADLINE, shield=True):
        await conv.reject_pending(reason)


async def _run_conversation_once(
    conv: Conversation,
    cancel_event: trio.Event,
    start: int,
    model: str,
    host: TurnHost | None = None,
) -> str:
    run = conv.start_run()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_interrupt_when, cancel_event, conv, run)
            if host is not None:  # sub-agents ask the user through the running turn
                await nursery.start(serve_subagents, host, conv, cancel_event)
            error = await run.outcome()
            nursery.cancel_scope.cancel()
    except BaseException:
        # A failure here, or the turn's last-resort deadline: the conversation must
        # still stop before we let go of it (shielded: that deadline has passed).
        with trio.move_on_after(CANCEL_DEADLINE, shield=True):
            cancel_event.set()
            await interrupt_until_done(conv, run)
        raise
    if cancel_event.is_set():
        return "cancelled"
    return stop_reason(conv, start, error, model)


async def _interrupt_when(cancel_event: trio.Event, conv: Conversation, run: Run) -> None:
    await cancel_event.wait()
    with trio.move_on_after(CANCEL_DEADLINE):
        await interrupt_until_done(conv, run)


async def interrupt_until_done(conv: Conversation, run: Run) -> None:
    # interrupt() lands only once arun() has registered its task; a cancel that races
    # the run's first instructions falls back to pause(), which arun() then
    # overrides. Interrupting again until the run is over closes that window.
    delay = 0.02
    first = True
    while not run.done():
        await conv.interrupt()
        if first:
            first = False
            # Shielded: the interrupt may end the run before it returns, and the caller
            # then cancels us; the tools' processes and the sub-agents, which the
            # interrupt does not reach, must still be stopped (bounded: subagents.py).
            with trio.move_on_after(CANCEL_DEADLINE, shield=True):
                await conv.stop_tools()
        with trio.move_on_after(delay):
            await run.wait_done()
        delay = min(delay * 2, 0.5)


def stop_reason(conv: Conversation, start: int, error: BaseException | None, model: str) -> str:
    """How a run that was not cancelled ended: a stop reason, "confirm", or a RequestError."""
    status = conv.status()
    if status == FINISHED and error is None:
        return "end_turn"
    if status == WAITING_FOR_CONFIRMATION and error is None:
        return "confirm"
    code, detail = conv.last_error(start)
    if code == "MaxIterationsReached":
        return "max_turn_requests"
    if error is not None or status == ERROR:
        failure = describe_model_failure(error, code, detail, model)
        if failure is not None:  # the model call failed: say what, and what to do
            raise internal(
                failure.message,
                {"code": code, "status": status, "model": failure.data()},
            )
        message = detail or (str(error) if error is not None else "the agent failed")
        raise internal(
            f"the agent's turn failed ({code or type(error).__name__}): {one_line(message, 2000)}",
            {"code": code, "status": status},
        )
    # PAUSED, STUCK, IDLE: the turn is over without an error.
    return "end_turn"


async def with_one_cancel(
    cancel: Callable[[], None], turn: Callable[[], Awaitable[schema.PromptResponse]]
) -> schema.PromptResponse:
    """Run a prompt's `turn` with one cancel mechanism: its ticket's event.

    The request's own cancel — `$/cancel_request` for the prompt, the connection
    closing — cancels this task's scope. Here, and only here, it becomes the turn's
    cancel (`cancel()` sets the ticket's event, as session/cancel does): the turn is
    shielded from the scope, stops the conversation, and answers `cancelled`, a result,
    never an error (docs/ARCHITECTURE.md#d6-cancel-is-a-result-bounded-in-time). A turn
    that a cancel has not ended within CANCEL_DEADLINE (a tool, the client, not
    answering) is cut then, as a last resort, and answers `cancelled` too.
    """
    answer: list[schema.PromptResponse] = []
    # Shielded, so the request's cancel reaches the turn only as the event.
    turn_scope = trio.CancelScope(shield=True)

    async def request_cancelled() -> None:
        try:
            await trio.sleep_forever()
        finally:
            if not answer:  # not the end of the turn: the request was cancelled
                cancel()
                turn_scope.deadline = min(
                    turn_scope.deadline, trio.current_time() + CANCEL_DEADLINE
                )

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request_cancelled)
            with turn_scope:
                answer.append(await turn())
            if turn_scope.cancelled_caught:
                answer.append(schema.PromptResponse(stop_reason="cancelled"))
            nursery.cancel_scope.cancel()
    except BaseException as exc:
        if answer and only_cancelled(exc):
            # The request's own Cancelled, once the turn has answered: the answer is the
            # result (the scope is left without another checkpoint).
            return answer[-1]
        error = sole_error(exc)
        if isinstance(error, BaseExceptionGroup) or not isinstance(error, Exception):
            raise
        reraise(error)  # the turn's one failure, not Trio's group
    return answer[-1]


def only_cancelled(exc: BaseException) -> bool:
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(only_cancelled(e) for e in exc.exceptions)
    return False
