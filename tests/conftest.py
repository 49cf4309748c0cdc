"""Shared test set-up.

The OpenHands SDK (and litellm under it) must see these before anything imports it; setting
them here, before collection imports any test module, makes that true for the whole session.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
