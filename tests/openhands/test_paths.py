"""`file://` URIs and paths survive every platform (translate/paths.py).

Both flavours are checked on any host: POSIX and Windows (drive letters and UNC shares),
with spaces, `%`, `#`, `?`, `;` and non-ASCII in names; a table of URIs as editors write
them; and round-trip properties (path -> URI -> path) for each flavour.
"""

from __future__ import annotations

import re
from pathlib import PureWindowsPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_acp.openhands.translate.paths import (
    abs_path,
    file_uri_to_path,
    local_path,
    path_to_file_uri,
)
from trio_acp.openhands.translate.prompt import prompt_to_parts

# (uri, POSIX reading, Windows reading)
KNOWN = [
    ("file:///home/me/a.txt", "/home/me/a.txt", "\\home\\me\\a.txt"),
    ("file:///home/me/My%20Project/main.py", "/home/me/My Project/main.py", None),
    ("file:///tmp/caf%C3%A9/%E6%97%A5%E6%9C%AC.md", "/tmp/café/日本.md", None),
    ("file:///tmp/a%23b%3Fc%25d%3Be.txt", "/tmp/a#b?c%d;e.txt", None),
    ("file:///tmp/a;b", "/tmp/a;b", None),  # not a URL parameter
    ("file://localhost/etc/hosts", "/etc/hosts", "\\etc\\hosts"),
    ("file:/etc/hosts", "/etc/hosts", "\\etc\\hosts"),
    ("file:///C:/Users/me/a%20b.txt", "C:/Users/me/a b.txt", "C:\\Users\\me\\a b.txt"),
    ("file:///c%3A/Users/me/x.py", "c:/Users/me/x.py", "c:\\Users\\me\\x.py"),  # VS Code
    ("file:///C|/legacy.txt", "C:/legacy.txt", "C:\\legacy.txt"),
    ("file:///C:", "C:", "C:\\"),
    (
        "file:///D:/%C3%A9t%C3%A9/r%C3%A9sum%C3%A9%23.pdf",
        "D:/été/résumé#.pdf",
        "D:\\été\\résumé#.pdf",
    ),
    ("file://server/share/dir/f.txt", "//server/share/dir/f.txt", "\\\\server\\share\\dir\\f.txt"),
    (
        "file:////server/share/dir/f.txt",
        "//server/share/dir/f.txt",
        "\\\\server\\share\\dir\\f.txt",
    ),
    (
        "file://server/share/a%20b/%E2%82%AC.txt",
        "//server/share/a b/€.txt",
        "\\\\server\\share\\a b\\€.txt",
    ),
]


@pytest.mark.parametrize(("uri", "posix", "windows"), KNOWN)
def test_known_uris_read_as_paths(uri, posix, windows):
    assert file_uri_to_path(uri, windows=False) == posix
    if windows is not None:
        assert file_uri_to_path(uri, windows=True) == windows


# (path, windows?, uri)
BUILT = [
    ("/home/me/a b#c?.txt", False, "file:///home/me/a%20b%23c%3F.txt"),
    ("/tmp/100%/é", False, "file:///tmp/100%25/%C3%A9"),
    ("C:\\Users\\me\\é x.txt", True, "file:///C:/Users/me/%C3%A9%20x.txt"),
    ("C:/Users/me/a#b.txt", True, "file:///C:/Users/me/a%23b.txt"),
    ("C:\\", True, "file:///C:/"),
    ("\\\\server\\share\\d\\f #1.txt", True, "file://server/share/d/f%20%231.txt"),
    ("\\\\server\\share", True, "file://server/share/"),
]


@pytest.mark.parametrize(("path", "windows", "uri"), BUILT)
def test_known_paths_become_uris(path, windows, uri):
    assert path_to_file_uri(path, windows=windows) == uri


@pytest.mark.parametrize(("path", "windows"), [("a/b", False), ("C:a", True), ("a\\b", True)])
def test_relative_paths_have_no_uri(path, windows):
    with pytest.raises(ValueError):
        path_to_file_uri(path, windows=windows)


def test_only_file_uris_have_a_local_path():
    assert local_path("https://example.com/a.txt") is None
    assert local_path("untitled:Untitled-1") is None
    assert local_path("file://[oops/x") is None  # malformed host: no path, no exception
    assert local_path("FILE:///x", windows=False) == "/x"


def test_abs_path_reads_uris_and_relative_paths():
    assert abs_path("/w", "file:///tmp/a%20b.txt") == "/tmp/a b.txt"
    assert abs_path("/w", "src/../a.py") == "/w/a.py"
    assert abs_path("/w", "  ") is None and abs_path("/w", None) is None


def test_a_resource_link_names_its_local_path():
    (part,) = prompt_to_parts(
        [{"type": "resource_link", "uri": "file:///tmp/a%23b;c.txt", "name": "a"}]
    )
    assert "path: /tmp/a#b;c.txt" in part.text


# --------------------------------------------------------------------------- properties

_POSIX_NAME = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"),
    min_size=1,
    max_size=12,
)
# Windows forbids <>:"/\|?* and control characters in names.
_WIN_NAME = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters='<>:"/\\|?*'),
    min_size=1,
    max_size=12,
)
_SERVER = st.from_regex(r"[A-Za-z][A-Za-z0-9-]{0,14}", fullmatch=True)


@st.composite
def posix_paths(draw):
    names = draw(st.lists(_POSIX_NAME, min_size=1, max_size=5))
    path = "/" + "/".join(names)
    if draw(st.booleans()):
        path += "/"
    return path


@st.composite
def windows_paths(draw):
    names = draw(st.lists(_WIN_NAME, max_size=5))
    if draw(st.booleans()):
        root = draw(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcz")) + ":\\"
    else:
        root = f"\\\\{draw(_SERVER)}\\{draw(_WIN_NAME)}\\"
    return root + "\\".join(names)


@settings(max_examples=300, deadline=None)
@given(posix_paths())
def test_posix_paths_round_trip(path):
    # `/C:/x` is read as the drive C: (module docstring): not a round trip by design.
    if re.match(r"/[A-Za-z][:|](/|\Z)", path):
        return
    uri = path_to_file_uri(path, windows=False)
    assert uri.startswith("file://") and uri.isascii()
    assert not set(uri) & set(" #?")
    assert file_uri_to_path(uri, windows=False) == path
    assert local_path(uri, windows=False) == path


@settings(max_examples=300, deadline=None)
@given(windows_paths())
def test_windows_paths_round_trip(path):
    uri = path_to_file_uri(path, windows=True)
    assert uri.startswith("file://") and uri.isascii()
    assert not set(uri) & set(" #?\\")
    assert file_uri_to_path(uri, windows=True) == str(PureWindowsPath(path))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_reading_any_file_uri_never_raises_but_value_error(tail):
    try:
        file_uri_to_path("file:" + tail, windows=False)
        file_uri_to_path("file:" + tail, windows=True)
    except ValueError:
        pass
    local_path("file:" + tail)  # never raises
