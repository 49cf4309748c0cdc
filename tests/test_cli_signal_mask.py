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
