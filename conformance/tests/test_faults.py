"""Every check bites: each fails on a deliberately broken agent.

``FAULT_FOR`` maps every check id to a fault of ``agents/faulty_agent.py`` that breaks
exactly the rule the check is about.  Each check runs alone against its faulty agent and
must fail; the unbroken agent passes the whole suite; and for a few faults the whole suite
runs to show that the other mandatory checks are not affected (the fault is local).
"""

from __future__ import annotations

import pytest

from trio_acp_conformance.model import REGISTRY, Level, Status

from ._runs import run_many
from .agents.faulty_agent import FAULTS
from .conftest import faulty_command

FAULT_FOR = {
    "ACP-INIT-001": "version-string",
    "ACP-INIT-002": "echo-version",
    "ACP-INIT-003": "require-client-caps",
    "ACP-INIT-004": "no-agent-info",
    "ACP-AUTH-001": "terminal-auth",
    "ACP-AUTH-002": "auth-required-no-methods",
    "ACP-JSONRPC-001": "int-id-as-string",
    "ACP-JSONRPC-002": "string-id-mangled",
    "ACP-JSONRPC-003": "unknown-method-code",
    "ACP-JSONRPC-004": "invalid-params-code",
    "ACP-JSONRPC-005": "wedge-after-error",
    "ACP-JSONRPC-006": "die-on-garbage",
    "ACP-JSONRPC-007": "parse-error-code",
    "ACP-JSONRPC-008": "answer-notifications",
    "ACP-TRANSPORT-001": "junk-stdout",
    "ACP-TRANSPORT-002": "latin1-stdout",
    "ACP-TRANSPORT-003": "small-frames",
    "ACP-TRANSPORT-004": "no-exit-on-eof",
    "ACP-SESSION-001": "same-session-id",
    "ACP-SESSION-002": "unknown-session-ok",
    "ACP-SESSION-003": "update-before-new",
    "ACP-PROMPT-001": "bad-stop-reason",
    "ACP-PROMPT-002": "wrong-session-id",
    "ACP-PROMPT-003": "reject-text",
    "ACP-PROMPT-004": "reject-resource-link",
    "ACP-PROMPT-005": "thought-not-message",
    "ACP-PROMPT-006": "reject-image",
    "ACP-PROMPT-007": "reject-embedded",
    "ACP-PROMPT-008": "reject-audio",
    "ACP-PROMPT-009": "late-updates",
    "ACP-META-001": "reject-meta",
    "ACP-EXT-001": "ext-not-answered",
    "ACP-EXT-002": "ext-unknown-result",
    "ACP-CANCEL-001": "cancel-end-turn",
    "ACP-CANCEL-002": "updates-after-cancel",
    "ACP-CANCEL-003": "wedge-after-cancel",
    "ACP-CANCEL-004": "slow-cancel",
    "ACP-CANCEL-005": "cancel-waits-for-tool",
    "ACP-CANCEL-006": "cancel-misses-early",
    "ACP-CANCEL-007": "refuse-while-busy",
    "ACP-PROMPT-010": "queue-unordered",
    "ACP-MODES-004": "mode-not-saved",
    "ACP-PERM-001": "perm-dup-options",
    "ACP-PERM-002": "perm-allow-ignored",
    "ACP-PERM-003": "perm-reject-runs",
    "ACP-PERM-004": "perm-cancel-runs",
    "ACP-PERM-005": "perm-unrenderable",
    "ACP-MODES-001": "bad-current-mode",
    "ACP-MODES-002": "set-mode-fails",
    "ACP-MODES-003": "set-mode-unknown-ok",
    "ACP-CONFIG-001": "bad-config-current",
    "ACP-CONFIG-002": "config-partial",
    "ACP-CONFIG-003": "boolean-config",
    "ACP-LOAD-001": "load-replay-after",
    "ACP-LOAD-002": "load-no-user",
    "ACP-LOAD-003": "load-unknown-ok",
    "ACP-RESUME-001": "resume-replays",
    "ACP-CLOSE-001": "close-keeps-session",
    "ACP-CLOSE-002": "close-no-cancel",
    "ACP-LIST-001": "list-missing",
    "ACP-DELETE-001": "delete-keeps",
    "ACP-CAPS-001": "fs-without-cap",
    "ACP-CAPS-002": "terminal-without-cap",
    "ACP-CAPS-003": "elicit-without-cap",
    "ACP-SCHEMA-001": "schema-violation",
    "ACP-SCHEMA-002": "custom-root-key",
    "ACP-ERROR-001": "multiline-error",
    "ACP-EDITOR-001": "write-with-read-only",
    "ACP-EDITOR-002": "edit-on-disk",
    "ACP-EDITOR-003": "read-disk",
    "ACP-EDITOR-004": "no-release",
    "ACP-EDITOR-005": "terminal-not-embedded",
    "ACP-EDITOR-006": "cancel-no-kill",
    # ACP v2 (checks/v2.py): the faulty agent speaks v2 through trio-acp's gateway.
    "v2/ACP-INIT-001": "v2-init-error",
    "v2/ACP-INIT-201": "v2-version-3",
    "v2/ACP-INIT-003": "v2-echo-version",
    "v2/ACP-INIT-202": "v2-no-downgrade",
    "v2/ACP-INIT-203": "v2-no-info",
    "v2/ACP-INIT-204": "v2-boolean-caps",
    "v2/ACP-SCHEMA-001": "v2-init-invalid",
    "v2/ACP-SESSION-001": "v2-empty-session-id",
    "v2/ACP-SESSION-002": "same-session-id",
    "v2/ACP-PROMPT-201": "v2-no-message-id",
    "v2/ACP-PROMPT-203": "v2-no-user-message",
    "v2/ACP-STATE-201": "v2-no-running",
    "v2/ACP-STATE-202": "v2-no-idle",
    "v2/ACP-STATE-203": "bad-stop-reason",
    "v2/ACP-PATCH-201": "v2-chunk-no-message-id",
    "v2/ACP-PATCH-203": "v2-same-message-id",
    "v2/ACP-PERM-201": "v2-perm-no-title",
    "v2/ACP-PATCH-209": "v2-no-requires-action",
    "v2/ACP-PATCH-204": "v2-tool-no-id",
    "v2/ACP-CANCEL-201": "cancel-end-turn",
    "v2/ACP-LIST-201": "v2-list-null",
    "v2/ACP-RESUME-202": "v2-late-replay",
    "v2/ACP-RESUME-204": "v2-new-replay-id",
    "v2/ACP-PROMPT-205": "v2-v1-update",
    "v2/ACP-CLIENTCAP-202": "v2-fs-call",
    "v2/tool_call-cancel": "v2-cancel-error",
    "v2/cancel-unknown": "v2-cancel-unknown-ok",
    "v2/ACP-PATCH-206": "v2-terminal-relative-cwd",
    "v2/ACP-PATCH-207": "v2-terminal-bad-base64",
}

#: Faults whose whole-suite run shows they are local: the failing checks are exactly these,
#: and every other mandatory check still passes.
LOCAL = {
    "no-agent-info": {"ACP-INIT-004"},
    "terminal-auth": {"ACP-AUTH-001"},
    "ext-unknown-result": {"ACP-EXT-002"},
    "list-missing": {"ACP-LIST-001"},
    "custom-root-key": {"ACP-SCHEMA-002"},
    "perm-reject-runs": {"ACP-PERM-003"},
    "perm-unrenderable": {"ACP-PERM-005"},
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    jobs = {f"only-{cid}": (faulty_command(fault), [cid]) for cid, fault in FAULT_FOR.items()}
    jobs["baseline"] = (faulty_command(None), None)
    for fault in LOCAL:
        jobs[f"full-{fault}"] = (faulty_command(fault), None)
    return run_many(jobs, root, limit=12)


def test_every_check_has_a_fault() -> None:
    assert set(FAULT_FOR) == set(REGISTRY), (
        f"checks without a fault: {sorted(set(REGISTRY) - set(FAULT_FOR))}; "
        f"unknown ids: {sorted(set(FAULT_FOR) - set(REGISTRY))}"
    )
    assert set(FAULT_FOR.values()) <= set(FAULTS)


@pytest.mark.timeout(600)
def test_unbroken_agent_passes_everything(reports) -> None:
    report = reports["baseline"]
    bad = [
        f"{r.check.id}: {r.status.value} {r.detail}"
        for r in report.results
        if r.status is not Status.PASSED
    ]
    assert not bad, "\n".join(bad)
    assert report.exit_code == 0


@pytest.mark.timeout(600)
@pytest.mark.parametrize("check_id", sorted(FAULT_FOR))
def test_check_fails_on_its_fault(reports, check_id: str) -> None:
    report = reports[f"only-{check_id}"]
    [result] = report.results
    assert result.check.id == check_id
    assert result.status is Status.FAILED, (
        f"{check_id} with --fault {FAULT_FOR[check_id]}: {result.status.value} — {result.detail}"
    )
    assert report.exit_code == (0 if result.check.level is Level.ADVISORY else 1)


#: Advisory checks whose failure detail, when it starts so, is only their time bound.
TIME_BOUND_ONLY = {"ACP-EDITOR-006": "the response came "}


def _only_slow(check_id: str, detail: str | None) -> bool:
    prefix = TIME_BOUND_ONLY.get(check_id)
    return prefix is not None and (detail or "").startswith(prefix)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("fault", sorted(LOCAL))
def test_fault_is_local(reports, fault: str) -> None:
    report = reports[f"full-{fault}"]
    # An advisory check's time bound missed by the test agent under the suite's own load
    # (ACP-EDITOR-006 at 2.1 s for its 2 s, CI on two cores) says nothing about whether a
    # fault is local; what the check verifies besides the time still counts.
    failed = {
        r.check.id
        for r in report.results
        if r.status is Status.FAILED and not _only_slow(r.check.id, r.detail)
    }
    other = {
        r.check.id: r.status.value
        for r in report.results
        if r.check.level is Level.MANDATORY
        and r.status is not Status.PASSED
        and r.check.id not in LOCAL[fault]
    }
    # On a mismatch, say why each unexpected check failed (a timing flake has shown up here
    # under heavy load, ACP-CLOSE-002 once or twice; its detail is what tells).
    unexpected = {
        r.check.id: r.detail
        for r in report.results
        if r.status is Status.FAILED and r.check.id not in LOCAL[fault]
    }
    assert failed == LOCAL[fault], unexpected or report.results
    assert not other, other
