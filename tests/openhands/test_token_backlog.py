"""A client that stops reading mid-stream: what waits in the session's bridge is bounded by
the text, not by the number of tokens (trio_acp/openhands/sessions/token_backlog.py), and
the client reads every character, in order, once it reads again."""

from __future__ import annotations

from typing import Any

import trio

from trio_acp import schema
from trio_acp.credentials import SecretValues, UpdateMask
from trio_acp.openhands.sessions.outbox import Outbox
from trio_acp.openhands.sessions.token_backlog import BACKLOG
from trio_acp.openhands.translate import Translator


class Delta:
    def __init__(self, content: str | None = None, reasoning: str | None = None) -> None:
        self.content = content
        self.reasoning_content = reasoning
        self.tool_calls = None


class Choice:
    def __init__(self, delta: Delta, finish_reason: str | None = None) -> None:
        self.index = 0
        self.delta = delta
        self.finish_reason = finish_reason


class Chunk:
    """What the translator reads of litellm's `ModelResponseStream`."""

    def __init__(self, rid: str, delta: Delta, finish_reason: str | None = None) -> None:
        self.id = rid
        self.choices = [Choice(delta, finish_reason)]
        self.usage = None


def stream(n: int) -> list[Chunk]:
    thinking = [Chunk("r1", Delta(reasoning=f"t{i} ")) for i in range(n // 4)]
    text = [Chunk("r1", Delta(content=f"w{i} ")) for i in range(n)]
    return [*thinking, *text, Chunk("r1", Delta(), finish_reason="length")]


async def test_a_client_that_stops_reading_mid_stream_holds_back_text_not_chunks() -> None:
    sent: list[Any] = []
    reading = trio.Event()
    stuck = trio.Event()

    async def send_update(update: Any, *, at_once: bool = False) -> None:
        if not reading.is_set():
            stuck.set()
            await reading.wait()  # the client reads nothing
        sent.append(update)

    outbox = Outbox(Translator("/"), UpdateMask(SecretValues()), send_update)
    outbox.begin_turn(1)
    chunks = stream(20_000)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(outbox.pump)
            outbox.post_token(Chunk("r0", Delta(content="first ")))
            await stuck.wait()

            def sdk_thread() -> None:
                for chunk in chunks:
                    outbox.post_token(chunk)

            await trio.to_thread.run_sync(sdk_thread)
            # 25,001 chunks posted while the pump could send nothing.
            assert len(outbox.bridge) <= BACKLOG + 3
            reading.set()
            await outbox.end_turn(1, None, within=30)
            nursery.cancel_scope.cancel()
    thoughts = "".join(u.content.text for u in sent if isinstance(u, schema.AgentThoughtChunk))
    text = "".join(u.content.text for u in sent if isinstance(u, schema.AgentMessageChunk))
    assert thoughts == "".join(f"t{i} " for i in range(5_000))
    assert text == "first " + "".join(f"w{i} " for i in range(20_000))
    # One message per response, the thought before the text, as streamed.
    kinds = [type(u).__name__ for u in sent]
    assert kinds.index("AgentThoughtChunk") < kinds.index("AgentMessageChunk", 1)
    assert outbox.finish_reason == "length"  # the last chunk was not merged away
