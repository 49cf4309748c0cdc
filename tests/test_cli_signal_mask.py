"""trio-acp starts with no signal blocked, whatever its parent left blocked (cli.main)."""

from __future__ import annotations

import signal
import threading

import pytest


def test_main_unblocks_what_its_parent_left_blocked():
    from trio_acp import cli

    seen: list[set[int]] = []

    def run() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        with pytest.raises(SystemExit):
            cli.main(["--help"], warm=False)
        seen.append(set(signal.pthread_sigmask(signal.SIG_BLOCK, ())))

    thread = threading.Thread(target=run)  # its own mask: this thread's is left alone
    thread.start()
    thread.join(timeout=30)
    assert seen == [set()]


def test_main_called_in_process_off_the_main_thread_with_sigint_ignored():
    # The state the test runner's workers were seen in (SIGINT ignored): restoring SIGINT
    # is for the process's main thread; a call from another thread must not fail on it.
    from trio_acp import cli

    seen: list[set[int]] = []

    def run() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        with pytest.raises(SystemExit):
            cli.main(["--help"], warm=False)
        seen.append(set(signal.pthread_sigmask(signal.SIG_BLOCK, ())))

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join(timeout=30)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen == [set()]
