"""The sans-io line buffer: framing, the frame-size DoS limit, recovery after it."""

from __future__ import annotations

import pytest

from trio_acp.rpc import DEFAULT_MAX_FRAME_SIZE, FrameTooLarge, LineBuffer


def feed_all(buf: LineBuffer, *chunks: bytes) -> list[bytes | FrameTooLarge]:
    out: list[bytes | FrameTooLarge] = []
    for chunk in chunks:
        out += buf.feed(chunk)
    return out


def test_default_limit_is_64_mib_and_at_least_50_mib() -> None:
    assert DEFAULT_MAX_FRAME_SIZE == 64 * 1024 * 1024
    assert LineBuffer().max_frame_size >= 50 * 1024 * 1024


def test_lines_split_and_joined_across_chunks() -> None:
    buf = LineBuffer()
    assert feed_all(buf, b'{"a"', b":1}\n{", b'"b":2}\n{"c":3}\n') == [
        b'{"a":1}',
        b'{"b":2}',
        b'{"c":3}',
    ]
    assert buf.buffered == 0


def test_byte_by_byte() -> None:
    data = b'{"x":"y"}\r\n\n{"z":1}\n'
    buf = LineBuffer()
    assert feed_all(buf, *(data[i : i + 1] for i in range(len(data)))) == [b'{"x":"y"}', b'{"z":1}']


def test_crlf_accepted_and_blank_lines_ignored() -> None:
    buf = LineBuffer()
    assert buf.feed(b"\n\r\n  \n\t\r\nA\r\nB\n\n") == [b"A", b"B"]


def test_unterminated_last_line_delivered_at_eof() -> None:
    buf = LineBuffer()
    assert buf.feed(b"one\ntw") == [b"one"]
    assert buf.feed(b"o") == []
    assert buf.feed_eof() == [b"two"]
    assert buf.feed_eof() == []
    with pytest.raises(RuntimeError):
        buf.feed(b"more")


def test_exact_limit_accepted_one_more_rejected() -> None:
    buf = LineBuffer(max_frame_size=10)
    assert buf.feed(b"x" * 10 + b"\n") == [b"x" * 10]
    assert buf.feed(b"x" * 10 + b"\r\n") == [b"x" * 10]  # the line ending does not count
    assert buf.feed(b"x" * 11 + b"\n") == [FrameTooLarge(10)]
    assert buf.feed(b"ok\n") == [b"ok"]


def test_oversize_line_in_one_chunk_then_normal() -> None:
    buf = LineBuffer(max_frame_size=16)
    assert buf.feed(b"a\n" + b"y" * 100 + b"\nb\n") == [b"a", FrameTooLarge(16), b"b"]
    assert not buf.discarding


def test_oversize_partial_reported_early_and_discarded_without_buffering() -> None:
    buf = LineBuffer(max_frame_size=16)
    events = buf.feed(b"z" * 20)
    assert events == [FrameTooLarge(16)]  # reported before the newline arrives
    assert buf.discarding
    assert buf.buffered == 0
    for _ in range(1000):  # megabytes of the same line: nothing is kept
        assert buf.feed(b"z" * 1000) == []
        assert buf.buffered == 0
    # The rest of the bad line, up to its newline, is dropped; framing resumes after it.
    assert buf.feed(b'zzz\n{"ok":1}\n') == [b'{"ok":1}']
    assert not buf.discarding


def test_oversize_growing_across_chunks() -> None:
    buf = LineBuffer(max_frame_size=16)
    assert buf.feed(b"q" * 10) == []
    assert buf.feed(b"q" * 10) == [FrameTooLarge(16)]
    assert buf.feed(b"\nnext\n") == [b"next"]


def test_oversize_when_buffered_part_completes() -> None:
    buf = LineBuffer(max_frame_size=16)
    assert buf.feed(b"q" * 12) == []
    assert buf.feed(b"q" * 5 + b"\nafter\n") == [FrameTooLarge(16), b"after"]


def test_discarding_then_eof_yields_nothing() -> None:
    buf = LineBuffer(max_frame_size=4)
    assert buf.feed(b"toolong") == [FrameTooLarge(4)]
    assert buf.feed_eof() == []


def test_buffer_bounded_by_limit() -> None:
    buf = LineBuffer(max_frame_size=100)
    for _ in range(50):
        buf.feed(b"k" * 7)
        assert buf.buffered <= 101


def test_large_frame_in_small_chunks() -> None:
    # A 50 MiB frame (the size ACP images need) under the default limit, fed in 256 KiB
    # chunks: accepted whole.  Only new bytes are scanned, so this is linear.
    frame = b'"' + b"a" * (50 * 1024 * 1024) + b'"'
    buf = LineBuffer()
    events: list[bytes | FrameTooLarge] = []
    step = 256 * 1024
    for i in range(0, len(frame), step):
        events += buf.feed(frame[i : i + step])
    events += buf.feed(b"\n")
    assert len(events) == 1 and events[0] == frame


def test_accepts_bytearray_and_memoryview() -> None:
    buf = LineBuffer()
    assert buf.feed(bytearray(b"a\n")) == [b"a"]
    assert buf.feed(memoryview(b"b\nc")) == [b"b"]
    assert buf.feed_eof() == [b"c"]


def test_invalid_limit() -> None:
    with pytest.raises(ValueError):
        LineBuffer(max_frame_size=0)
