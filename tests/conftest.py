"""Shared test set-up.

The OpenHands SDK (and litellm under it) must see these before anything imports it; setting
them here, before collection imports any test module, makes that true for the whole session.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
# The agents the tests launch start the ordinary way, even if the developer runs a warm
# server (README, "Warm start"): tests that look at the agent's process tree need it to be
# the launched process. tests/e2e/test_warm_start.py uses a server of its own.
os.environ.setdefault("TRIO_ACP_WARM", "0")
