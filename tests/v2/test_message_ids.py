"""A v2 prompt's message id reaches the v1 agent, which keeps it with the message for
replays (ACP-RESUME-204; translate/messages.py): pure, on the gateway alone."""

from __future__ import annotations

from test_gateway import SID, Wire

from trio_acp.openhands.translate.messages import prompt_message_id


def test_the_agent_gets_the_message_id_the_client_was_answered_with():
    wire = Wire()
    wire.open_session()
    ids = []
    for n, meta in [(1, None), (2, {"trioAcp": {"other": 1}, "client": True})]:
        params = {"sessionId": SID, "prompt": [{"type": "text", "text": f"hi {n}"}]}
        if meta is not None:
            params["_meta"] = meta
        wire.from_client({"id": n, "method": "session/prompt", "params": params})
        client, agent = wire.take()
        [answer] = [f for f in client if f.get("id") == n]
        mid = answer["result"]["messageId"]
        [sent] = [f for f in agent if f.get("method") == "session/prompt"]
        assert prompt_message_id(sent["params"]["_meta"]) == mid
        if meta is not None:  # the client's own _meta goes on beside it
            assert sent["params"]["_meta"]["client"] is True
            assert sent["params"]["_meta"]["trioAcp"]["other"] == 1
        wire.from_agent({"id": sent["id"], "result": {"stopReason": "end_turn"}})
        wire.take()
        ids.append(mid)
    # Unique beyond this connection: another gateway never hands out the same ids.
    other = Wire()
    other.open_session()
    other.from_client(
        {"id": 1, "method": "session/prompt", "params": {"sessionId": SID, "prompt": []}}
    )
    client, _ = other.take()
    assert client[0]["result"]["messageId"] not in ids
    assert len(set(ids)) == 2
