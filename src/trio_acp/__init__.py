"""trio-acp: an ACP v1 agent and protocol stack built on Trio."""

__version__ = "0.1.0"
