"""The conformance suite against `trio-acp --agent-server URL`: the checks whose outcome
depends on where the conversation runs (prompt turns, streaming, cancel, permissions, the
session lifecycle, modes and options), through a real agent-server.

The protocol-only checks (JSON-RPC framing, transport, initialize, schema) do not depend on
it; `conformance/tests/test_against_trio_acp.py` runs the whole suite against a local
trio-acp. ACP-CANCEL-004 (an advisory 2 s bound on a cancel) is left out: a cancel that
lands while the server is still starting the conversation's tools on its first run waits
for the server's own interrupt (docs/agent-server.md, "Events, cancel, permissions").
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import trio_acp_conformance.checks  # noqa: F401 - registers every check
from trio_acp_conformance.context import RunConfig
from trio_acp_conformance.model import Level, Status
from trio_acp_conformance.report import to_markdown
from trio_acp_conformance.runner import run_suite

CHECKS = [
    "ACP-SESSION-001",
    "ACP-SESSION-002",
    "ACP-PROMPT-001",
    "ACP-PROMPT-002",
    "ACP-PROMPT-003",
    "ACP-PROMPT-004",
    "ACP-PROMPT-005",
    "ACP-CANCEL-001",
    "ACP-CANCEL-002",
    "ACP-CANCEL-003",
    "ACP-CANCEL-005",
    "ACP-PERM-001",
    "ACP-PERM-002",
    "ACP-PERM-003",
    "ACP-PERM-004",
    "ACP-PERM-005",
    "ACP-LOAD-001",
    "ACP-LOAD-002",
    "ACP-LOAD-003",
    "ACP-RESUME-001",
    "ACP-CLOSE-001",
    "ACP-LIST-001",
    "ACP-DELETE-001",
    "ACP-MODES-001",
    "ACP-CONFIG-001",
]


@pytest.mark.timeout(400)
async def test_trio_acp_on_an_agent_server_conforms(server, tmp_path: Path) -> None:
    config = RunConfig(
        command=[sys.executable, "-m", "trio_acp", "--agent-server", server.url],
        scratch=tmp_path / "scratch",
        extra_env={"TRIO_ACP_AGENT_SERVER_API_KEY": server.api_key},
        only=CHECKS,
        allow_schema_download=False,
    )
    report = await run_suite(config)
    table = to_markdown(report)
    allowed = {
        Level.MANDATORY: {Status.PASSED},
        Level.CAPABILITY: {Status.PASSED, Status.SKIPPED},
        Level.ADVISORY: {Status.PASSED, Status.NOT_TESTED, Status.SKIPPED},
    }
    problems = [
        f"{r.check.id} ({r.check.level.value}): {r.status.value} — {r.detail}"
        for r in report.results
        if r.status not in allowed[r.check.level]
    ]
    assert not problems, "\n".join(problems) + "\n\n" + table
    assert {r.check.id for r in report.results} >= set(CHECKS)
    assert report.exit_code == 0
    # The sessions ran there: the server holds conversations, trio-acp's store only indexes.
    assert any(server.conversations.iterdir())
