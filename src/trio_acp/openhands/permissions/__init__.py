"""Permissions and what a cancel closes: modes, rules, the questions asked, processes tools start.

See docs/ARCHITECTURE.md "Inside `trio_acp.openhands`".
"""
