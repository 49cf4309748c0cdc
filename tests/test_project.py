"""The project's promises about itself: CI runs the README's test command."""

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    first_block = readme.split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in first_block.strip().splitlines()]
    assert commands == ["scripts/dev demo", "scripts/dev test"]
    assert "scripts/dev test" in ci


def test_no_runtime_dependency_on_shared():
    for path in (ROOT / "src").rglob("*.py"):
        assert "shared/" not in path.read_text(), path


# Developer notes outside the repo are not the repo's: a citation of them is a dead end for
# every reader. Comments and docs point into docs/ARCHITECTURE.md (or the ACP spec) instead.
_OUTSIDE_NOTES = re.compile(
    r"DESIGN §|DESIGN\.md|DESIGN decision|SDK-NOTES|PROTOCOL §|LESSONS|\.\./shared"
)
_TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".json", ".ts", ".js", ".mjs", ".sh", ".yml", ""}
_SKIP_DIRS = {
    ".git",
    ".venv",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
}


def _repo_files():
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        for name in files:
            path = Path(folder, name)
            rel = path.relative_to(ROOT)
            if rel != Path("CHANGELOG.md") and path.suffix in _TEXT_SUFFIXES:
                yield rel, path


def test_no_file_cites_notes_outside_the_repo():
    this_file = Path(__file__).resolve()
    cites = []
    for rel, path in _repo_files():
        if path.resolve() == this_file:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _OUTSIDE_NOTES.search(line):
                cites.append(f"{rel}:{number}: {line.strip()}")
    assert not cites, "cite docs/ARCHITECTURE.md or the ACP spec instead:\n" + "\n".join(cites)


def test_the_slowest_test_files_are_collected_first():
    """With pytest-xdist (`scripts/dev test`) the long files must start first, not end the
    run on one worker while the others wait: xdist's default reorders files by their number
    of tests, which put the one-test conformance runs last."""
    import importlib.util
    from types import SimpleNamespace

    # By path: several conftest modules share the name `conftest`.
    spec = importlib.util.spec_from_file_location("tests_conftest", ROOT / "tests" / "conftest.py")
    assert spec is not None and spec.loader is not None
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    SLOWEST_FIRST = conftest.SLOWEST_FIRST

    assert all((ROOT / path).is_file() for path in SLOWEST_FIRST)
    assert len(set(SLOWEST_FIRST)) == len(SLOWEST_FIRST)
    nodeids = [
        "tests/a/test_quick.py::test_1",
        f"{SLOWEST_FIRST[1]}::test_x",
        "tests/a/test_quick.py::test_2",
        f"{SLOWEST_FIRST[0]}::test_y[1]",
        "tests/b/test_other.py::test_3",
        f"{SLOWEST_FIRST[0]}::test_y[2]",
    ]
    items = [SimpleNamespace(nodeid=n) for n in nodeids]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [
        f"{SLOWEST_FIRST[0]}::test_y[1]",
        f"{SLOWEST_FIRST[0]}::test_y[2]",
        f"{SLOWEST_FIRST[1]}::test_x",
        "tests/a/test_quick.py::test_1",
        "tests/a/test_quick.py::test_2",
        "tests/b/test_other.py::test_3",
    ]
    pytest_ini = (ROOT / "pyproject.toml").read_text().split("[tool.pytest.ini_options]")[1]
    assert "--no-loadscope-reorder" in pytest_ini.split("\n[")[0]
    assert "--dist loadfile" in (ROOT / "scripts" / "dev").read_text()


def _uv() -> list[str] | None:
    """uv as the tests were started with it (`uv run` sets UV), else on PATH."""
    found = os.environ.get("UV") or shutil.which("uv")
    return [found] if found else None


def test_constraints_file_is_the_lock():
    """`uv tool install` and `pip install` ignore uv.lock: the README has them read
    constraints.txt, which must give exactly the lock's versions (regenerate it with the
    command in its header after `uv lock`)."""
    uv = _uv()
    if uv is None:
        pytest.skip("uv is not installed")
    text = (ROOT / "constraints.txt").read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    command = " ".join(line.lstrip("# ").strip() for line in header[3:5])
    assert command.startswith("Made by: uv export ")
    args = command.removeprefix("Made by: uv ").split(" (")[0].split()
    exported = subprocess.run(
        [*uv, *args, "--offline", "--quiet"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    pinned = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert pinned == exported.splitlines()
    readme = (ROOT / "README.md").read_text()
    assert "--constraints constraints.txt" in readme and "--compile-bytecode" in readme


def test_the_sdk_family_and_litellm_are_pinned_to_the_locked_versions():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = dict(dep.split("==") for dep in project["dependencies"] if "==" in dep)
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    locked = {pkg["name"]: pkg["version"] for pkg in lock["package"]}
    for name in ("openhands-sdk", "openhands-tools", "litellm"):
        assert pins[name] == locked[name], name
    agent_server = [
        dep
        for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["dev"]
        if dep.startswith("openhands-agent-server")
    ]
    assert agent_server == [f"openhands-agent-server=={locked['openhands-sdk']}"]


def test_the_readme_counts_the_conformance_checks():
    from trio_acp_conformance import checks  # noqa: F401  (registers them)
    from trio_acp_conformance.model import REGISTRY

    readme = (ROOT / "README.md").read_text()
    assert f"({len(REGISTRY)} checks," in readme


# Modules of `openhands/` still over the limit, each with why it is not split yet. Shrink
# this list; never grow it.
_OVER_THE_LIMIT: set[str] = set()


def test_no_openhands_module_is_over_600_lines():
    """Issue 24 item 4: a module over 600 lines holds more than one concept; split it by
    concept (as `backends/condense.py` left `backends/local_conversation.py`)."""
    package = ROOT / "src" / "trio_acp" / "openhands"
    lines = {
        path.relative_to(package).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in package.rglob("*.py")
    }
    over = {name: n for name, n in lines.items() if n > 600 and name not in _OVER_THE_LIMIT}
    assert not over, f"split these by concept: {over}"
    fixed = sorted(name for name in _OVER_THE_LIMIT if lines.get(name, 0) <= 600)
    assert not fixed, f"no longer over the limit, drop them from _OVER_THE_LIMIT: {fixed}"


def test_a_test_that_drops_the_suites_variables_keeps_warm_start_off():
    """tests/conftest.py turns warm start off (it is on by default) for every agent a test
    launches; a test that drops the `TRIO_ACP_` variables to launch one with the user's
    defaults must turn it off again, or the launch leaves a warm server in the user's
    default directory (tests/e2e/test_secrets_canary.py did, in every full run)."""
    tests = Path(__file__).resolve().parent
    dropping = re.compile(r"startswith\(\([^)]*[\"']TRIO_ACP_[\"']")
    missing = [
        path.relative_to(tests).as_posix()
        for path in sorted(tests.rglob("*.py"))
        if dropping.search(text := path.read_text(encoding="utf-8")) and "TRIO_ACP_WARM" not in text
    ]
    assert not missing, f"set TRIO_ACP_WARM=0 in the launches of: {missing}"
