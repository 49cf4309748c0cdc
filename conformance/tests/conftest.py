"""Shared set-up for the conformance suite's own tests.

Agents under test are subprocesses; the OpenHands SDK (in trio-acp) and litellm must see
these before they start, and the runs below pass the environment on.
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

import trio_acp_conformance.checks  # noqa: F401 - registers every check

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
# No agent under test may start a detached warm server (tests/conftest.py does the same).
os.environ["TRIO_ACP_WARM"] = "0"
WARM_DIR = tempfile.mkdtemp(prefix="trio-acp-warm-tests-")
os.environ["TRIO_ACP_WARM_DIR"] = WARM_DIR


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    from trio_acp.warm import stop_all_under

    stop_all_under(Path(WARM_DIR))
    shutil.rmtree(WARM_DIR, ignore_errors=True)


FAULTY_AGENT = Path(__file__).parent / "agents" / "faulty_agent.py"


def faulty_command(fault: str | None = None) -> list[str]:
    return [sys.executable, str(FAULTY_AGENT)] + (["--fault", fault] if fault else [])


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return tmp_path / "scratch"
