"""README's "The library" opens with an example that runs a real turn: this runs that very
block, as a user would paste it, in a process of its own on the scripted model."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def library_example() -> str:
    section = README.read_text(encoding="utf-8").split("\n## The library\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README's 'The library' has no python block"
    return match.group(1)


def test_the_example_is_short():
    assert len(library_example().splitlines()) <= 25


@pytest.mark.timeout(300)
def test_the_readme_example_runs_a_real_turn(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(library_example(), encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        OPENHANDS_PERSISTENCE_DIR=str(home / ".openhands"),
        # No network here: the public skills are fetched from GitHub otherwise.
        TRIO_ACP_PUBLIC_SKILLS="0",
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    # What the example prints and nothing else: no banner or log line on stdout.
    assert lines[-1] == "end_turn", done.stdout
    assert "AgentMessageChunk" in lines[:-1], done.stdout
    assert all(re.fullmatch(r"[A-Z]\w+", line) for line in lines[:-1]), done.stdout
