"""The fast layer (`scripts/dev test-fast`, tests/conftest.py `FAST_LAYER`) stays free of
the SDK: the full suite, which imports the SDK anyway, checks that every test file of the
layer is collected with the SDK's import refused, and that the refusal is real."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _pytest(
    *args: str, timeout: float = 240, pythonpath: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
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
    # Read from tests/conftest.py's text: `import conftest` finds whichever conftest.py
    # the worker put first on sys.path (tests/remote has one too), and running the file
    # again would redo its set-up (a second warm-start directory).
    FAST_LAYER = _fast_layer()

    done = _pytest("--fast", "--collect-only", "-q")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    collected = {line.split("::", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    for entry in FAST_LAYER:
        assert any(path == entry or path.startswith(entry + "/") for path in collected), entry
    assert not any(path.startswith(("tests/e2e/", "conformance/")) for path in collected)


@pytest.mark.timeout(300)
def test_a_fast_test_that_imports_the_sdk_fails(tmp_path):
    # A fixture of every test that imports litellm the forgiving way: in the fast layer
    # that must fail the test, never skip it (nor pass).
    (tmp_path / "sdk_probe.py").write_text(
        "import pytest\n\n"
        "@pytest.fixture(autouse=True)\n"
        "def imports_litellm():\n"
        "    pytest.importorskip('litellm')\n"
    )
    done = _pytest(
        "--fast",
        "-p",
        "sdk_probe",
        "tests/rpc/test_rpc_messages.py::test_error_response",
        pythonpath=tmp_path,
    )
    assert done.returncode == 1, done.stdout[-4000:]
    assert "1 error" in done.stdout and "SdkImportInFastLayer" in done.stdout


def _fast_layer() -> tuple[str, ...]:
    tree = ast.parse((Path(__file__).parent / "conftest.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "FAST_LAYER" for target in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("tests/conftest.py defines no FAST_LAYER")
