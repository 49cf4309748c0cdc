"""Sessions and their turns: one session per nursery, its turns, its outbox, sessions on disk.

See docs/ARCHITECTURE.md "Inside `trio_acp.openhands`".
"""
