"""The fast layer (`scripts/dev test-fast`, tests/conftest.py `FAST_LAYER`) stays free of
the SDK: the full suite, which imports the SDK anyway, checks that every test file of the
layer is collected with the SDK's import refused, and that the refusal is real."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pytest(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.timeout(300)
def test_the_fast_layer_is_collected_without_the_sdk():
    from conftest import FAST_LAYER

    done = _pytest("--fast", "--collect-only", "-q")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    collected = {line.split("::", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    for entry in FAST_LAYER:
        assert any(path == entry or path.startswith(entry + "/") for path in collected), entry
    assert not any(path.startswith(("tests/e2e/", "conformance/")) for path in collected)


@pytest.mark.timeout(300)
def test_a_fast_test_that_imports_the_sdk_fails(tmp_path):
    # A throwaway test file placed in the layer: the guard must fail it, never skip it.
    probe = ROOT / "tests" / "rpc" / f"test_zz_probe_{os.getpid()}.py"
    probe.write_text(
        "import pytest\n\ndef test_imports_litellm():\n    pytest.importorskip('litellm')\n"
    )
    try:
        done = _pytest("--fast", str(probe.relative_to(ROOT)))
    finally:
        probe.unlink()
    assert done.returncode == 1, done.stdout[-4000:]
    assert "1 failed" in done.stdout and "SdkImportInFastLayer" in done.stdout
