"""Shared test set-up.

The OpenHands SDK (and litellm under it) must see these before anything imports it; setting
them here, before collection imports any test module, makes that true for the whole session.
The fixtures below are the defaults of the tests that run an agent on the scripted model;
they import lazily, so that the pure tests do not pay for it.
"""

import os

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
# The agents the tests launch start the ordinary way, even if the developer runs a warm
# server (README, "Warm start"): tests that look at the agent's process tree need it to be
# the launched process. tests/e2e/test_warm_start.py uses a server of its own.
os.environ.setdefault("TRIO_ACP_WARM", "0")


@pytest.fixture(scope="module")
def llm():
    """The scripted model server, one per test module (a module that scripts scenarios of
    its own defines its own `llm`)."""
    from trio_acp.testing import ScriptedLLM

    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def env(llm, tmp_path):
    """An in-process agent's environment on `llm`, its OpenHands home in the test's
    tmp_path (tests/_inprocess.py, `agent_env`)."""
    from _inprocess import agent_env

    return agent_env(llm, tmp_path / "home")
