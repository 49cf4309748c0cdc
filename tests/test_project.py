"""The project's promises about itself: CI runs the README's test command."""

from pathlib import Path

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
