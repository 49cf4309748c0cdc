"""The public skills: fetched at most once per process, a failure logged once and remembered."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio

from _inprocess import loader
from trio_acp.openhands.setup import public_skills
from trio_acp.openhands.setup.agent_spec import agent_context

SKILL = "---\nname: {name}\ndescription: {text}\n---\n{text}\n"


def skill(root: Path, name: str, text: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(SKILL.format(name=name, text=text))


@pytest.fixture
def fetches(tmp_path, monkeypatch):
    """The SDK's clone-or-update, counted; it fails as offline git does unless `repo` is set."""
    trio.run(loader().get)
    import openhands.sdk.skills.skill as sdk_skill

    monkeypatch.setenv("OH_PERSISTENCE_DIR", str(tmp_path / "oh"))
    monkeypatch.delenv(sdk_skill.PUBLIC_SKILLS_PATH_ENV, raising=False)
    monkeypatch.setattr(sdk_skill, "USER_SKILLS_DIRS", [tmp_path / "user-skills"])
    sdk_skill._invalidate_public_skills_cache()
    public_skills._reset()
    state = SimpleNamespace(count=0, repo=None)

    def update_skills_repository(repo_url, ref, cache_dir, strict=False):
        state.count += 1
        if state.repo is None:
            logging.getLogger("openhands.sdk.git.utils").error(
                "Git command failed: git clone --depth 1 %s. Exit code: 128. Stderr: Cloning "
                "into 'public-skills'...\nfatal: unable to access '%s/': Could not resolve "
                "host: github.com\n",
                repo_url,
                repo_url,
            )
            logging.getLogger("openhands.sdk.git.cached_repo").warning("Git operation failed")
            return None
        return state.repo

    monkeypatch.setattr(sdk_skill, "update_skills_repository", update_skills_repository)
    yield state
    sdk_skill._invalidate_public_skills_cache()
    public_skills._reset()


def setup(cwd: Path, state: Path, public: bool = True) -> SimpleNamespace:
    """A session's set-up as `agent_context` reads it; `state` is trio-acp's persistence
    directory, where a failure is remembered."""
    return SimpleNamespace(
        cwd=str(cwd), public_skills=public, settings=SimpleNamespace(persistence_dir=state)
    )


def build_twice(cwd: Path, state: Path) -> list:
    """Two sessions' contexts, each validated again as the SDK's `Agent` does."""
    from openhands.sdk.context import AgentContext

    contexts = []
    for _ in range(2):
        context = agent_context(setup(cwd, state))
        contexts.append(AgentContext.model_validate(context.model_dump()))
    return contexts


def test_offline_the_fetch_is_tried_once_and_its_failure_logged_once(fetches, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    build_twice(tmp_path, tmp_path / "trio")
    assert fetches.count == 1
    problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.name for r in problems] == ["trio_acp.openhands.setup.public_skills"]
    assert "Could not resolve host: github.com" in problems[0].getMessage()
    assert "\n" not in problems[0].getMessage()
    # Remembered in trio-acp's persistence directory, never beside the SDK's clone in HOME.
    assert (tmp_path / "trio" / public_skills.MARKER).exists()
    assert not list((tmp_path / "oh").rglob(public_skills.MARKER))

    # A new process within the retry window: not tried at all (the failure is on disk).
    public_skills._reset()
    caplog.clear()
    build_twice(tmp_path, tmp_path / "trio")
    assert fetches.count == 1
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]

    # Past the window: tried again.
    public_skills._reset()
    marker = tmp_path / "trio" / public_skills.MARKER
    known = json.loads(marker.read_text())
    marker.write_text(json.dumps({**known, "time": time.time() - public_skills.RETRY_AFTER - 1}))
    caplog.clear()
    build_twice(tmp_path, tmp_path / "trio")
    assert fetches.count == 2
    # Still offline: said again, but not as a warning (it was one already).
    [again] = [r for r in caplog.records if "not loaded" in r.getMessage()]
    assert again.levelno == logging.INFO


def test_fetched_once_and_ranked_below_the_users_and_the_projects(fetches, tmp_path):
    repo = tmp_path / "repo"
    for name in ("public-only", "user-too", "project-too"):
        skill(repo / "skills", name, f"public {name}")
    fetches.repo = repo
    skill(tmp_path / "user-skills", "user-too", "the user's")
    skill(tmp_path / "project" / ".agents" / "skills", "project-too", "the project's")
    # A failure another process remembered, long enough ago to be tried again.
    import openhands.sdk.skills.skill as sdk_skill

    marker = tmp_path / "trio" / public_skills.MARKER
    marker.parent.mkdir(parents=True)
    marker.write_text(
        json.dumps(
            {
                "time": time.time() - public_skills.RETRY_AFTER - 1,
                "ref": sdk_skill.PUBLIC_SKILLS_REF,
            }
        )
    )

    contexts = build_twice(tmp_path / "project", tmp_path / "trio")
    assert fetches.count == 1
    for context in contexts:
        texts = {s.name: s.content.strip() for s in context.skills}
        assert texts["public-only"] == "public public-only"
        assert texts["user-too"] == "the user's"
        assert texts["project-too"] == "the project's"
        assert not context.load_public_skills
    assert not marker.exists()  # the success forgot the failure


def test_turned_off_nothing_is_fetched(fetches, tmp_path):
    context = agent_context(setup(tmp_path, tmp_path / "trio", public=False))
    assert fetches.count == 0 and not context.load_public_skills
