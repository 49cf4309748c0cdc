"""The CI proof: the suite against trio-acp itself.

Every mandatory check passes; every capability check passes where trio-acp advertises the
capability and is skipped where it does not; advisory checks never fail.  A check that was
not exercised would be "not tested": that is allowed for advisory checks only.
"""

from __future__ import annotations

import sys

import pytest

from trio_acp_conformance.model import Level, Status
from trio_acp_conformance.report import to_markdown

from ._runs import run


# Three agent processes start in the run (the main one, and two the editor checks
# initialize with capabilities of their own); on a loaded machine each takes a minute.
@pytest.mark.timeout(600)
async def test_trio_acp_conforms(scratch) -> None:
    report = await run([sys.executable, "-m", "trio_acp"], scratch)
    table = to_markdown(report)
    problems = []
    for r in report.results:
        level = r.check.level
        allowed = {
            Level.MANDATORY: {Status.PASSED},
            Level.CAPABILITY: {Status.PASSED, Status.SKIPPED},
            Level.ADVISORY: {Status.PASSED, Status.NOT_TESTED, Status.SKIPPED},
        }[level]
        if r.status not in allowed:
            problems.append(f"{r.check.id} ({level.value}): {r.status.value} — {r.detail}")
    assert not problems, "\n".join(problems) + "\n\n" + table
    assert report.exit_code == 0
    # The capability checks that apply are the ones trio-acp advertises.
    caps = report.agent["agentCapabilities"]
    by_id = {r.check.id: r for r in report.results}
    if caps.get("sessionCapabilities", {}).get("close") is not None:
        assert by_id["ACP-CLOSE-001"].status is Status.PASSED
    if not caps.get("loadSession"):
        assert by_id["ACP-LOAD-001"].status is Status.SKIPPED
    # trio-acp speaks ACP v2 (docs/v2.md): every v2 check applies and passes.
    v2 = {r.check.id: r.status for r in report.results if r.check.id.startswith("v2/")}
    assert v2 and set(v2.values()) == {Status.PASSED}, v2
