"""The outbox marks the last update of each batch for an immediate write
(`session/update` sent `at_once`, `trio_acp.rpc.Peer.notify`): the pump waits after it, so the connection need not wake
its writer for it. The others queue, so a batch still leaves in one write."""

from __future__ import annotations

from typing import Any

import trio

from trio_acp import schema
from trio_acp.credentials import SecretValues, UpdateMask
from trio_acp.openhands.sessions.outbox import Outbox
from trio_acp.openhands.translate import Translator


def _chunk(text: str, message_id: str) -> schema.AgentMessageChunk:
    return schema.AgentMessageChunk(content=schema.TextContent(text=text), message_id=message_id)


async def test_only_the_last_update_of_a_batch_is_marked() -> None:
    sent: list[tuple[str, bool]] = []

    async def send_update(update: Any, *, at_once: bool = False) -> None:
        sent.append((update.content.text, at_once))

    outbox = Outbox(Translator("/"), UpdateMask(SecretValues()), send_update)
    outbox.begin_turn(1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outbox.pump)
        # Three updates that do not coalesce (different messages), in one batch.
        for i, mid in enumerate(["m1", "m2", "m3"]):
            outbox.post_note(_chunk(f"u{i}", mid))
        await outbox.flush()
        outbox.post_note(_chunk("alone", "m4"))
        await outbox.flush()
        nursery.cancel_scope.cancel()
    assert sent == [("u0", False), ("u1", False), ("u2", True), ("alone", True)]
