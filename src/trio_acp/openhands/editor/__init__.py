"""The editor as the workspace: files and terminals through the client's fs/* and terminal/* methods.

See docs/ARCHITECTURE.md "Inside `trio_acp.openhands`".
"""
