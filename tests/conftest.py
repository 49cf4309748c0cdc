"""Shared test set-up.

The OpenHands SDK (and litellm under it) must see these before anything imports it; setting
them here, before collection imports any test module, makes that true for the whole session.
The fixtures below are the defaults of the tests that run an agent on the scripted model;
they import lazily, so that the pure tests do not pay for it.

`--fast` (`scripts/dev test-fast`) runs the fast layer only: the tests of the pure modules
(FAST_LAYER below), with the SDK's import refused, so that a fast test that comes to import
`openhands` or `litellm` (~8 s of CPU per process) fails instead of slowing the layer down.
`tests/test_fast_layer.py` keeps the full suite checking it too.
"""

import importlib.abc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
# The agents the tests launch start the ordinary way (README, "Warm start", which is on by
# default): tests that look at the agent's process tree need it to be the launched process,
# and no test may leave a detached warm server behind. The warm tests turn it on again,
# with their servers in this session's own directory, whose servers are all stopped at the
# end (`warm.stop_all_under`).
os.environ["TRIO_ACP_WARM"] = "0"
WARM_DIR = tempfile.mkdtemp(prefix="trio-acp-warm-tests-")
os.environ["TRIO_ACP_WARM_DIR"] = WARM_DIR


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from trio_acp.warm import stop_all_under

    stop_all_under(Path(WARM_DIR))
    shutil.rmtree(WARM_DIR, ignore_errors=True)


#: The test files that take longest, longest first (a whole-suite run's durations, summed per
#: file; each is 45-230 s on the 2-core machine under load). They run first, so that parallel
#: workers (`scripts/dev test`: pytest-xdist, whole files per worker) do not end on them while
#: the others wait; the other files follow in collection order. Only the suite's time depends
#: on this list: a file missing from it, or gone, changes nothing else.
SLOWEST_FIRST = (
    "tests/remote/test_conformance_on_agent_server.py",
    "tests/e2e/test_permissions_official_python.py",
    "tests/e2e/test_openhands_official_python.py",
    "tests/remote/test_remote_conversation.py",
    "tests/e2e/test_turns_official_python.py",
    "conformance/tests/test_against_trio_acp.py",
    "tests/e2e/test_process_death.py",
    "tests/remote/test_e2e_turns.py",
    "tests/remote/test_e2e_lifecycle.py",
    "tests/schema/test_schema_official.py",
    "tests/remote/test_e2e_session_options.py",
    "tests/e2e/test_warm_start.py",
    "tests/e2e/test_editor_official_ts.py",
    "tests/e2e/test_hostile_input.py",
    "tests/openhands/test_damaged_sessions.py",
    "tests/e2e/test_secrets_canary.py",
    "tests/e2e/test_concurrent_sessions.py",
    "tests/openhands/test_agent_in_process.py",
    "conformance/tests/test_faults.py",
    "tests/e2e/test_acpx_client.py",
    "tests/registry/test_uvx_launch.py",
    "tests/e2e/test_terminal_auth_official_python.py",
    "tests/e2e/test_critic_official_python.py",
    "tests/e2e/test_models_fork_official_python.py",
    "tests/schema/test_schema_fuzz.py",
    "tests/e2e/test_editor_official_python.py",
    "tests/e2e/test_prompt_blocks_and_home.py",
    "tests/e2e/test_model_failures_official_python.py",
    "tests/e2e/test_subagents_official_python.py",
    "tests/e2e/test_v2_official_ts.py",
    "tests/e2e/test_v2_wire.py",
)


#: The fast layer: the tests of the modules that need neither the SDK nor an agent process
#: (schema, rpc, connection, translation, prompt, permissions, stores, the turn on a fake
#: conversation...). A directory takes every test file under it. A file that comes to need
#: the SDK fails under `--fast`: make it pure again (the translation tests use
#: tests/openhands/_sdk_standins.py) or take it out of this list.
FAST_LAYER = (
    "tests/schema",
    "tests/rpc",
    "tests/connection",
    "tests/test_credentials.py",
    "tests/test_layers.py",
    "tests/editor/test_client_calls.py",
    "tests/editor/test_person_waits.py",
    "tests/editor/test_session_roots.py",
    "tests/editor/test_terminal_meta.py",
    "tests/openhands/test_bridge.py",
    "tests/openhands/test_collector.py",
    "tests/openhands/test_confirm.py",
    "tests/openhands/test_critic_fast.py",
    "tests/openhands/test_interrupt.py",
    "tests/openhands/test_mcp_startup.py",
    "tests/openhands/test_chat_stream.py",
    "tests/openhands/test_model_failure_policy.py",
    "tests/openhands/test_outbox_at_once.py",
    "tests/openhands/test_paths.py",
    "tests/openhands/test_prompt.py",
    "tests/openhands/test_recovery.py",
    "tests/openhands/test_sdk_internals.py",
    "tests/openhands/test_store_hostile_files.py",
    "tests/openhands/test_store_list_cache.py",
    "tests/openhands/test_store_list_saved.py",
    "tests/openhands/test_store_list_walk.py",
    "tests/openhands/test_subagent_translate.py",
    "tests/openhands/test_subagents_hub.py",
    "tests/openhands/test_tool_call_stops.py",
    "tests/openhands/test_tool_catalog.py",
    "tests/openhands/test_translate.py",
    "tests/openhands/test_translate_speedups.py",
    "tests/openhands/test_translate_streams.py",
    "tests/openhands/test_turn_fast.py",
    "tests/testing/test_scripted_server.py",
)
#: What the fast layer never imports.
SDK_PACKAGES = ("openhands", "litellm")
ROOT = Path(__file__).resolve().parents[1]
_FAST_PATHS = tuple(ROOT / entry for entry in FAST_LAYER)


class SdkImportInFastLayer(AssertionError):
    """Not an ImportError: `pytest.importorskip` or an `except ImportError` must not turn
    the refusal into a skipped test or a quietly different code path."""


class _RefuseSdk(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] in SDK_PACKAGES:
            raise SdkImportInFastLayer(
                f"the fast layer imports no SDK, but {name!r} was imported: make the test "
                "pure (tests/openhands/_sdk_standins.py) or take its file out of FAST_LAYER "
                "(tests/conftest.py)"
            )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="run only the fast layer (FAST_LAYER in tests/conftest.py), refusing the SDK",
    )


class FastLayer:
    """The plugin `--fast` registers: it collects the fast layer only and refuses the SDK.

    A plugin rather than this conftest's own hooks: a conftest's `pytest_ignore_collect`
    only sees the paths under its directory, and testpaths has conformance/tests too.
    """

    def __init__(self) -> None:
        already = sorted(m for m in sys.modules if m.partition(".")[0] in SDK_PACKAGES)
        if already:
            raise pytest.UsageError(f"--fast: the SDK was imported before the tests: {already}")
        sys.meta_path.insert(0, _RefuseSdk())

    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        path = collection_path.resolve()
        if any(
            path == fast or fast in path.parents or path in fast.parents for fast in _FAST_PATHS
        ):
            return None  # in the layer, or a directory on the way to it
        return True


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--fast"):
        config.pluginmanager.register(FastLayer(), "trio-acp-fast-layer")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # pytest collects a directory in path order even where testpaths names a file of it
    # first; xdist keeps this order (pyproject: --no-loadscope-reorder). A stable sort: each
    # file's tests stay together and in their order.
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


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
