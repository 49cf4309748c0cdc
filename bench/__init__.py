"""Benchmarks for trio-acp: `python -m bench` (see bench/README.md).

Benchmarks print figures; they assert nothing (tests assert behaviour).
"""
