"""What the SDK's WebSocket thread hands a remote conversation (remote.py): `Inbox`
dedupes events, hands them and the streamed deltas on, and tracks the run's end from the
server's state snapshots.

Runs on the SDK's thread; never blocks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import ConversationStateUpdateEvent, Event

#: The terminal tool's name: its calls are what a cancel may have to stop (remote.py).
TERMINAL_TOOL = "terminal"


# Events that answer a response's actions: the next model call may stream after them.
_ANSWERS = frozenset(
    {"ObservationEvent", "UserRejectObservation", "AgentErrorEvent", "ConversationErrorEvent"}
)


class Inbox:
    """What the SDK's WebSocket thread calls: dedupe, hand on, track the run's end.

    Runs on the SDK's thread; never blocks (a set, a deque append via `on_event`, and
    `run_sync_soon`).
    """

    def __init__(
        self,
        token: trio.lowlevel.TrioToken,
        on_event: Callable[[Event], None],
        on_token: Callable[[object], None],
    ):
        from trio_acp.openhands.sdk import remote_client

        self._token = token
        self._on_event = on_event
        self._on_token = on_token
        self._is_state_update = remote_client.is_state_update
        self._is_delta = remote_client.is_delta
        # Deltas carry no response id, and each has an id of its own. The chunks of one model
        # response must share one (the translator matches the final message to what was
        # streamed under it, and repeats nothing): a response's deltas are those between two
        # conversation events.
        self._response = uuid.uuid4().hex
        self._chunk = lambda event: remote_client.stream_chunk(self._response, event)
        self.seen: set[str] = set()
        # Deltas now would be late ones of a response already complete (`_track_quiet`).
        self.quiet = False
        self.terminal_calls: set[str] = set()
        # Set (in Trio) when a terminal call is announced: a cancel waiting for one
        # (`wait_terminal_call`).
        self._terminal_called: trio.Event | None = None
        self.status: str | None = None
        # The run being waited for: armed before the run is triggered; `running` once the
        # server said so; `over` set (in Trio) by the first non-running snapshot after that.
        self.armed = False
        self.running = False
        self.over: trio.Event | None = None
        self.over_status: str | None = None
        self.forwarded = 0
        # When the socket last brought anything: a sign of life (`_watch`).
        self.heard = time.monotonic()

    def __call__(self, event: Event) -> None:
        self.heard = time.monotonic()
        if self._is_delta(event):
            if not self.quiet:
                self._on_token(self._chunk(event))
            return
        if self._is_state_update(event):
            self._state(event)
            return
        self.deliver(event)

    def deliver(self, event: Event) -> None:
        if event.id in self.seen:
            return
        self.seen.add(event.id)
        self.forwarded += 1
        self._response = uuid.uuid4().hex
        self._track_quiet(event)
        self._track_terminal(event)
        self._on_event(event)

    def _track_quiet(self, event: Event) -> None:
        # The server publishes deltas and events on separate paths, and a fast reply's last
        # deltas can reach the socket after the event that completes the response: taken
        # for a new response, they would repeat its text. No model call can stream between
        # a response's end (its actions, or its final message) and what answers it (the
        # actions' observations, or the user's next message): deltas arriving then are late.
        name = type(event).__name__
        source = getattr(event, "source", None)
        if name == "ActionEvent" or (name == "MessageEvent" and source == "agent"):
            self.quiet = True
        elif name == "MessageEvent" or name in _ANSWERS:
            self.quiet = False

    def _track_terminal(self, event: Event) -> None:
        # Terminal calls announced and not yet answered: what a cancel may have to stop.
        call_id = getattr(event, "tool_call_id", None)
        if call_id is None:
            return
        if type(event).__name__ == "ActionEvent":
            if getattr(event, "tool_name", None) == TERMINAL_TOOL:
                self.terminal_calls.add(call_id)
                waiter = self._terminal_called
                if waiter is not None:
                    try:
                        self._token.run_sync_soon(waiter.set)
                    except trio.RunFinishedError:
                        pass
        else:  # an observation, a rejection or an error answers it
            self.terminal_calls.discard(call_id)

    async def wait_terminal_call(self) -> None:
        """In Trio: until a terminal call is under way (at once if one is).

        The server may start a command before its announcement reaches us (the socket's
        thread lags under load): a cancel then waits here for it while the server's
        interrupt is under way (remote.py `interrupt`).
        """
        called = trio.Event()
        # Installed before looking, so an announcement in between still wakes us.
        self._terminal_called = called
        try:
            if not self.terminal_calls:
                await called.wait()
        finally:
            self._terminal_called = None

    def _state(self, event: ConversationStateUpdateEvent) -> None:
        if event.key == "full_state" and isinstance(event.value, dict):
            status = event.value.get("execution_status")
            full = True
        elif event.key == "execution_status":
            status, full = event.value, False
        else:
            return
        status = str(getattr(status, "value", status))
        self.status = status
        if not self.armed:
            return
        if status == "running":
            self.running = True
            return
        # A per-field status is a hint: FINISHED may still be reverted by the server's stop
        # hooks, and ERROR comes before the error event that says why. The post-run full
        # snapshot, published after the run's events, is what says the run is over (the
        # REST watch stands in if the socket loses it).
        if full and (self.running or status in ("error", "stuck")):
            self.finish(status)

    def finish(self, status: str) -> None:
        over = self.over
        if over is None or self.over_status is not None:
            return
        self.over_status = status
        try:
            self._token.run_sync_soon(over.set)
        except trio.RunFinishedError:
            pass
