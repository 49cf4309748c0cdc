"""What a session's bridge carries to its outbox: one frozen class per kind.

SDK callbacks (on the SDK's threads) post `SdkEvent` and `TokenChunk`; the session posts
`SessionNote` (updates of its own: usage, titles) and `ModelRetry` (a model call failed and
is retried: its note, after what the failed call streamed is closed). Each carries the turn it
belongs to (`seq`, None between turns), so the outbox can drop what a finished turn's
stragglers post. `EndTurn` is the payload of the flush marker that closes a turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from trio_acp.schema import SessionUpdate

if TYPE_CHECKING:
    from trio_acp.openhands.sdk.classes import Event


@attrs.frozen
class SdkEvent:
    """An event of the conversation (`openhands.sdk` Event), to translate."""

    event: Event
    seq: int | None


# Not frozen, unlike the others: one is made per streamed token, in the SDK's thread, and a
# frozen attrs class's __init__ (object.__setattr__ per field) costs twice as much.
@attrs.define
class TokenChunk:
    """One streamed chunk of the model's reply (a LiteLLM delta), to translate."""

    chunk: object  # litellm's `ModelResponseStream`, read duck-typed (translate/fields.py)
    seq: int | None


@attrs.frozen
class SessionNote:
    """An ACP update the session made itself; sent as it is."""

    update: SessionUpdate
    seq: int | None


@attrs.frozen
class ModelRetry:
    """A model call failed and is retried: close what it streamed, then send `note`."""

    note: SessionUpdate
    seq: int | None


BridgeItem = SdkEvent | TokenChunk | SessionNote | ModelRetry


@attrs.frozen
class EndTurn:
    """Flush payload: turn `seq` is over (its response goes next)."""

    seq: int
    fail_open: str | None  # close unfinished tool calls as failed with this reason
