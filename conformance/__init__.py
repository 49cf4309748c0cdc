"""An ACP (Agent Client Protocol v1) conformance suite for any agent command.

It launches the agent as a subprocess, talks raw newline-delimited JSON-RPC to it over
stdio, drives it with a scripted model (`scenarios.py`, `profiles.py`) and checks the
protocol's rules, each with a stable id, the rule it checks and a level (`model.py`):

    python -m trio_acp_conformance -- AGENT COMMAND...
    trio-acp conformance --json -- AGENT COMMAND...

See ``conformance/README.md``.
"""

__version__ = "0.1.0"
