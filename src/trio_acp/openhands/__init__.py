"""The OpenHands-backed ACP agent: the only package of trio-acp that imports `openhands.*`.

See docs/ARCHITECTURE.md for its modules, its threads and a turn's life.
"""
