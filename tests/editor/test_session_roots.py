"""A session's roots: cwd + additionalDirectories, parsed, described, persisted."""

import pytest

from trio_acp import schema
from trio_acp.openhands.editor.session_roots import (
    INDEX_KEY,
    RootsError,
    parse_roots,
    roots_from_index,
    roots_prompt,
    with_roots,
)


def test_entries_are_normalized_deduplicated_and_cwd_dropped(tmp_path):
    (a := tmp_path / "a").mkdir()
    (b := tmp_path / "b").mkdir()
    roots = parse_roots(
        str(tmp_path / "proj"), [f"{a}/", str(b), f"{b}/../b", str(tmp_path / "proj"), 7, ""]
    )
    assert roots.additional == (str(a), str(b))
    assert roots.all[0] == str(tmp_path / "proj")


def test_relative_or_missing_entries_are_refused(tmp_path):
    with pytest.raises(RootsError, match="absolute"):
        parse_roots(str(tmp_path), ["lib"])
    with pytest.raises(RootsError, match="not an existing directory"):
        parse_roots(str(tmp_path), [str(tmp_path / "nope")])
    # A Windows client's paths are absolute too (checked with the caller's is_dir).
    roots = parse_roots("C:\\proj", ["D:\\shared", "\\\\server\\share\\lib"], is_dir=lambda p: True)
    assert len(roots.additional) == 2


def test_paths_are_placed_in_their_root(tmp_path):
    (lib := tmp_path / "lib").mkdir()
    roots = parse_roots(str(tmp_path / "proj"), [str(lib)])
    assert roots.contains(str(tmp_path / "proj" / "src" / "a.py"))
    assert roots.root_of(str(lib / "x.py")) == str(lib)
    assert not roots.contains(str(tmp_path / "libx" / "a.py"))  # a sibling sharing a prefix
    assert not roots.contains(str(tmp_path / "proj" / ".." / "other"))
    assert not roots.contains("relative/a.py")
    assert roots.describe(str(tmp_path / "proj" / "src" / "a.py")) == "src/a.py"
    assert roots.describe(str(lib / "x.py")) == "lib/x.py"
    assert roots.describe("/elsewhere/y") == "/elsewhere/y"


def test_the_index_reports_the_last_list_and_the_prompt_names_it(tmp_path):
    (lib := tmp_path / "lib").mkdir()
    roots = parse_roots(str(tmp_path), [str(lib)])
    index = with_roots({"cwd": str(tmp_path)}, roots)
    assert index[INDEX_KEY] == [str(lib)] and roots_from_index(index) == [str(lib)]
    assert INDEX_KEY not in with_roots(index, parse_roots(str(tmp_path), None))
    assert roots_from_index({INDEX_KEY: ["rel", 3, str(lib)]}) == [str(lib)]
    info = schema.SessionInfo(
        session_id="s", cwd=str(tmp_path), additional_directories=roots.to_wire()
    )
    assert schema.to_wire(info)["additionalDirectories"] == [str(lib)]
    assert str(lib) in roots_prompt(roots)
    assert roots_prompt(parse_roots(str(tmp_path), [])) is None
