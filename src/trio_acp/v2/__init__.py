"""ACP v2 (draft) for a client that asks for it, on the unchanged v1 agent.

- `frames` (pure): one v1 params/result/update in v2's spelling, and back.
- `gateway` (pure, sans-io): the state of one v2 connection (requests in flight, each
  session's turn and queued prompts) and what each frame becomes.
- `stream` (Trio): `negotiated_stream`, which picks v1 or v2 from the client's first
  frame and runs the gateway for v2.

This package module imports none of them, so the pure ones stay free of Trio.
docs/v2.md describes what a v2 client sees.
"""
