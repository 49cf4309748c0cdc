"""`collector_paused`: the garbage collector off while a long history is opened and replayed."""

from __future__ import annotations

import gc

import pytest

from trio_acp.openhands.sessions.collector import collector_paused


@pytest.fixture(autouse=True)
def collector_on():
    gc.enable()
    yield
    gc.enable()


def test_paused_inside_and_back_on_after():
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_overlapping_pauses_end_with_the_last():
    outer = collector_paused()
    inner = collector_paused()
    outer.__enter__()
    inner.__enter__()
    outer.__exit__(None, None, None)  # loads overlap: the first to start ends first
    assert not gc.isenabled()
    inner.__exit__(None, None, None)
    assert gc.isenabled()


def test_back_on_after_a_failure():
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("the load failed")
    assert gc.isenabled()


def test_left_off_when_it_was_off_before():
    gc.disable()
    with collector_paused():
        pass
    assert not gc.isenabled()
