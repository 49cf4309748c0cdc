"""`python -m bench.credentials_masking`: what masking the agent's credentials costs.

Per streamed chunk (`UpdateMask.apply`, as the session's pump calls it once per batch;
here one chunk per call, the worst case: it holds back a possible start of a secret) and per
outgoing frame (`SecretValues.mask_bytes`, as the connection's writer calls it through the
agent's `mask_frame`; a 64 KiB one with and without line ends), with no secret configured,
one API key, and three secrets.
The text is the `long` scenario's (4-character tokens), plus a hostile one where every
chunk ends in the key's first characters, so the mask holds back text on every chunk.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import json
import time

from trio_acp import schema
from trio_acp.credentials import SecretValues, UpdateMask
from trio_acp.testing.scenarios import long_text

KEY = "sk-proj-" + "a1B2c3D4e5" * 4 + "xyz"  # 51 characters, like an OpenAI key
OTHERS = ["AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"]


def _chunks(text: str, size: int) -> list[schema.AgentMessageChunk]:
    return [
        schema.AgentMessageChunk(
            content=schema.TextContent(text=text[i : i + size]), message_id="m"
        )
        for i in range(0, len(text), size)
    ]


def per_chunk(values: list[str], chunks: list[schema.AgentMessageChunk]) -> float:
    mask = UpdateMask(SecretValues(values))
    start = time.perf_counter()
    for chunk in chunks:
        mask.apply([chunk])
    mask.apply([], release=True)
    return (time.perf_counter() - start) / len(chunks) * 1e6


def per_frame(values: list[str], frame: bytes, n: int) -> float:
    secrets = SecretValues(values)
    start = time.perf_counter()
    for _ in range(n):
        secrets.mask_bytes(frame)
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    ordinary = _chunks(long_text(20_000), 4)
    hostile = _chunks("ok sk-pr" * 20_000, 8)  # every chunk ends in the key's first 5 characters
    small = json.dumps(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": "s" * 36,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": "m" * 36,
                    "content": {"type": "text", "text": "042 "},
                },
            },
        }
    ).encode()
    text = long_text(16_000)
    big = json.dumps({"text": text}).encode()  # a 64 KiB tool output
    # The same in lines of 70 characters: a backslash in the frame (`\\n`), so base64
    # wrapped across lines is looked for too (credentials.py, `_Wrapped`).
    lines = json.dumps({"text": "\n".join(text[i : i + 70] for i in range(0, len(text), 70))})
    print(
        "secrets      | µs/chunk ordinary | µs/chunk hostile | µs/frame 0.2 KiB | µs/frame 64 KiB"
        " | µs/frame 64 KiB lines"
    )
    for label, values in [("none", []), ("API key", [KEY]), ("3 secrets", [KEY, *OTHERS])]:
        print(
            f"{label:<12} | {per_chunk(values, ordinary):17.2f} | {per_chunk(values, hostile):16.2f}"
            f" | {per_frame(values, small, 20_000):16.2f} | {per_frame(values, big, 500):15.1f}"
            f" | {per_frame(values, lines.encode(), 500):21.1f}"
        )


if __name__ == "__main__":
    main()
