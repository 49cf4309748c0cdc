"""The user's OpenHands set-up: model, settings, MCP, hooks, skills, critic, sub-agents.

See docs/ARCHITECTURE.md "Inside `trio_acp.openhands`".
"""
