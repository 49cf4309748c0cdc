"""The terminal tool's `reset: true` keeps the subprocess terminal trio-acp runs.

The SDK's reset makes a new terminal session with `terminal_type=None` (auto-detect: tmux
where it is installed, as on this machine), which would drop the run's gate and the
cancel's process stopping (permissions/tool_processes.py) and could leave a tmux server
behind; `sdk/terminal_gate.keep_subprocess_on_reset` keeps it a subprocess terminal.
"""

from __future__ import annotations

import shutil

import pytest

from trio_acp.openhands.sdk import import_sdk


def test_a_reset_terminal_is_still_a_subprocess_terminal(tmp_path):
    import_sdk()  # the door's load applies its patches (sdk/loaded.py)
    from openhands.tools.terminal import TerminalAction
    from openhands.tools.terminal.impl import TerminalExecutor

    from trio_acp.openhands.sdk.terminal_gate import gate_terminals

    gate_terminals()
    if shutil.which("tmux") is None:
        pytest.skip("without tmux the SDK's auto-detection picks the subprocess terminal anyway")
    executor = TerminalExecutor(working_dir=str(tmp_path), terminal_type="subprocess")
    try:
        assert type(executor._session.terminal).__name__ == "SubprocessTerminal"
        observation = executor(TerminalAction(command="echo after-reset", reset=True))
        assert "after-reset" in observation.text
        assert type(executor._session.terminal).__name__ == "SubprocessTerminal"
    finally:
        executor.close()
