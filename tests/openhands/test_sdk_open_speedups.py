"""What opening a long stored conversation costs less of (trio_acp.openhands.sdk), with the
same results: the events directory listed by one scandir. Figures: bench/README.md, "Big
histories"."""

from __future__ import annotations

import os
import uuid

import pytest
from openhands.sdk.io import LocalFileStore

from trio_acp.openhands.sdk import import_sdk


class NoSecrets:
    def mask(self, text: str) -> str:
        return text


def stores(root) -> tuple[object, LocalFileStore]:
    return import_sdk().MaskingFileStore(str(root), secrets=NoSecrets()), LocalFileStore(str(root))


def test_the_events_directory_is_listed_as_the_sdk_lists_it(tmp_path):
    events = tmp_path / "events"
    (events / "sub").mkdir(parents=True)
    for i in range(5):
        (events / f"event-{i:05d}-{uuid.uuid4()}.json").write_text("{}")
    (events / ".eventlog.lock").write_text("")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", events / "to-a-directory")
    os.symlink(tmp_path / "nowhere", events / "broken-link")
    os.symlink(events / ".eventlog.lock", events / "to-a-file")
    ours, theirs = stores(tmp_path)
    listed = ours.list("events")
    assert listed == theirs.list("events")
    assert "events/sub/" in listed and "events/to-a-directory/" in listed
    assert "events/broken-link" in listed and "events/to-a-file" in listed
    assert len(listed) == 10


def test_a_name_with_a_backslash_is_listed_as_the_sdk_lists_it(tmp_path):
    (tmp_path / "events" / "a").mkdir(parents=True)
    (tmp_path / "events" / "a\\b").write_text("{}")
    ours, theirs = stores(tmp_path)
    assert ours.list("events") == theirs.list("events")


@pytest.mark.parametrize("shape", ["missing", "a file"])
def test_no_events_directory_is_listed_as_the_sdk_lists_it(tmp_path, shape):
    if shape == "a file":
        (tmp_path / "events").write_text("not a directory")
    ours, theirs = stores(tmp_path)
    assert ours.list("events") == theirs.list("events")


def test_other_directories_take_the_sdk_s_own_list(tmp_path):
    (tmp_path / "other" / "inner").mkdir(parents=True)
    (tmp_path / "other" / "f.json").write_text("{}")
    ours, theirs = stores(tmp_path)
    assert sorted(ours.list("other")) == sorted(theirs.list("other"))
    assert sorted(ours.list("")) == sorted(theirs.list(""))
    with pytest.raises(ValueError):
        ours.list("../outside")
