"""The command line: --json shape, exit codes, --list, and `trio-acp conformance`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trio_acp_conformance.model import REGISTRY

from .conftest import faulty_command

RUNNER = [sys.executable, "-m", "trio_acp_conformance"]


def run_cli(*args: str, prefix: list[str] = RUNNER) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120)


def test_list() -> None:
    proc = run_cli("--list")
    assert proc.returncode == 0
    listed = [line.split()[0] for line in proc.stdout.splitlines()]
    assert listed == list(REGISTRY)


def test_no_command_is_a_usage_error() -> None:
    proc = run_cli("--json")
    assert proc.returncode == 2
    assert "after --" in proc.stderr


@pytest.mark.timeout(180)
def test_json_shape_and_success() -> None:
    proc = run_cli(
        "--json", "--no-download", "--only", "ACP-INIT,ACP-JSONRPC-003", "--", *faulty_command()
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["suite"]["name"] == "acp-conformance"
    assert report["exit_code"] == 0
    assert report["agent"]["agentInfo"] == {"name": "faulty-agent", "version": "0.1.0"}
    assert report["agent"]["protocolVersion"] == 1
    ids = [c["id"] for c in report["checks"]]
    assert ids == [
        "ACP-INIT-001",
        "ACP-INIT-002",
        "ACP-INIT-003",
        "ACP-INIT-004",
        "ACP-JSONRPC-003",
    ]
    for c in report["checks"]:
        assert set(c) == {
            "id",
            "title",
            "area",
            "level",
            "capability",
            "rule",
            "status",
            "detail",
            "duration",
        }
        assert c["status"] == "passed"
        assert c["level"] in ("mandatory", "capability", "advisory")
        assert c["rule"]
    assert report["summary"]["passed"] == 5
    assert report["summary"]["failed_required"] == 0


@pytest.mark.timeout(180)
def test_mandatory_failure_exits_nonzero() -> None:
    proc = run_cli(
        "--json", "--no-download", "--only", "ACP-INIT-001", "--", *faulty_command("version-string")
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    [check] = report["checks"]
    assert check["status"] == "failed" and check["level"] == "mandatory"
    assert "'1'" in check["detail"]
    assert report["summary"]["failed_required"] == 1


@pytest.mark.timeout(180)
def test_advisory_failure_exits_zero_and_table(tmp_path) -> None:
    md = tmp_path / "report.md"
    proc = run_cli(
        "--no-download",
        "--markdown",
        str(md),
        "--only",
        "ACP-INIT-004",
        "--",
        *faulty_command("no-agent-info"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "ACP-INIT-004" in proc.stdout and "failed" in proc.stdout
    assert "| ACP-INIT-004 | advisory | **failed** |" in md.read_text()


@pytest.mark.timeout(180)
def test_trio_acp_conformance_subcommand() -> None:
    proc = run_cli(
        "conformance",
        "--json",
        "--no-download",
        "--only",
        "ACP-INIT-001",
        "--",
        *faulty_command("version-string"),
        prefix=[sys.executable, "-m", "trio_acp"],
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["checks"][0]["status"] == "failed"
