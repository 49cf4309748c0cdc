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


EVENT = "event-00007-0b5e8f5c-3a47-4c55-9a3c-3f1d2f6a9b11.json"


@pytest.mark.parametrize(
    "data",
    [
        b'{"kind": "MessageEvent", "text": "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x90\x8d"}',
        b'{"a": 1}\r\n{"b": 2}\r{"c": 3}\n',  # the text layer's newline translation kept
        b"",
        b"x" * 200_000,  # more than one read's worth
    ],
    ids=["unicode", "carriage-returns", "empty", "large"],
)
def test_an_event_file_reads_as_the_sdk_reads_it(tmp_path, data):
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / EVENT).write_bytes(data)
    ours, theirs = stores(tmp_path)
    assert ours.read(f"events/{EVENT}") == theirs.read(f"events/{EVENT}")


def test_event_file_errors_are_the_sdk_s(tmp_path):
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / EVENT).write_bytes(b'{"text": "\xff\xfe"}')
    ours, theirs = stores(tmp_path)
    with pytest.raises(UnicodeDecodeError):
        theirs.read(f"events/{EVENT}")
    with pytest.raises(UnicodeDecodeError):
        ours.read(f"events/{EVENT}")
    missing = "events/event-00008-0b5e8f5c-3a47-4c55-9a3c-3f1d2f6a9b11.json"
    with pytest.raises(FileNotFoundError):
        theirs.read(missing)
    with pytest.raises(FileNotFoundError) as raised:
        ours.read(missing)
    assert str(raised.value) == missing
