"""The conversation behind a session: in-process (the SDK on a loop thread) or on an OpenHands agent-server.

See docs/ARCHITECTURE.md "Inside `trio_acp.openhands`".
"""
