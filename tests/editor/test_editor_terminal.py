"""The terminal tool running commands in the editor's terminals (`terminal/*`)."""

from __future__ import annotations

import pytest
import trio

from trio_acp.openhands.client_calls import ClientCalls
from trio_acp.openhands.editor_terminal import make_executor
from trio_acp.testing.editor import SESSION, EditorClient, editor_pair

pytest.importorskip("openhands.tools.terminal")
from openhands.tools.terminal.definition import TerminalAction


async def run_commands(tmp_path, *actions, cancel_when=None, client=None):
    """Run terminal actions in a tool thread; (observations, client, announced ids)."""
    client = client or EditorClient()
    calls = ClientCalls()
    announced = []
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        executor = make_executor(
            calls, proxy, SESSION, str(tmp_path), announce=lambda a, tid: announced.append((a, tid))
        )
        if cancel_when is not None:

            async def canceller():
                with trio.fail_after(20):
                    while not cancel_when(client):
                        await trio.sleep(0.02)
                await calls.cancel_turn_and_wait()

            nursery.start_soon(canceller)
        with trio.fail_after(30):
            results = await trio.to_thread.run_sync(
                lambda: [executor(TerminalAction(**a)) for a in actions]
            )
        calls.close()
    return results, client, announced


async def test_a_command_runs_in_an_editor_terminal_which_is_announced_and_released(tmp_path):
    (sub := tmp_path / "sub").mkdir()
    (obs, after_cd, failing), client, announced = await run_commands(
        tmp_path,
        {"command": "echo hello from the editor && cd sub"},
        {"command": "pwd"},
        {"command": "exit 3"},
    )
    assert not obs.is_error and "hello from the editor" in obs.text and obs.exit_code == 0
    assert after_cd.text.strip() == str(sub.resolve())  # the directory carried over
    assert failing.exit_code == 3
    create = client.calls[0][1]
    assert create.cwd == str(tmp_path) and create.output_byte_limit > 0
    first = [m for m in client.methods()][:4]
    assert first == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/output",
        "terminal/release",
    ]
    assert [tid for _, tid in announced] == ["term-1", "term-2", "term-3"]
    assert announced[0][0].command == "echo hello from the editor && cd sub"
    assert client.terminals == {}  # every terminal released


async def test_cancel_kills_and_releases_the_terminal(tmp_path):
    (obs,), client, _ = await run_commands(
        tmp_path,
        {"command": "sleep 30"},
        cancel_when=lambda c: "terminal/wait_for_exit" in c.methods(),
    )
    assert obs.is_error and "cancelled" in obs.text
    # The pending wait got `$/cancel_request`; then kill, then release.
    assert "terminal/wait_for_exit" in client.cancelled
    assert client.methods()[-2:] == ["terminal/kill", "terminal/release"]
    assert client.terminals == {}


async def test_a_command_past_its_timeout_is_killed_and_its_output_kept(tmp_path):
    (obs,), client, _ = await run_commands(
        tmp_path, {"command": "echo started; sleep 30", "timeout": 0.5}
    )
    assert obs.is_error and obs.timeout
    assert "started" in obs.text and "did not finish within 0.5 s" in obs.text
    assert client.methods() == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/output",
        "terminal/release",
    ]


async def test_input_to_a_running_process_is_refused_with_a_reason(tmp_path):
    (obs,), client, _ = await run_commands(tmp_path, {"command": "C-c", "is_input": True})
    assert obs.is_error and "runs to completion" in obs.text
    assert client.calls == []


async def test_the_sdks_interrupt_of_the_executor_stops_the_command(tmp_path):
    """`executor.interrupt()` (the SDK calls it from its thread on an interrupt) alone is
    enough: the wait ends, the terminal is killed and released; later commands run."""
    client = EditorClient()
    calls = ClientCalls()
    async with editor_pair(client) as proxy, trio.open_nursery() as nursery:
        await nursery.start(calls.run)
        executor = make_executor(calls, proxy, SESSION, str(tmp_path))

        async def interrupter():
            with trio.fail_after(20):
                while "terminal/wait_for_exit" not in client.methods():
                    await trio.sleep(0.02)
            await trio.to_thread.run_sync(executor.interrupt)

        nursery.start_soon(interrupter)
        with trio.fail_after(30):
            obs = await trio.to_thread.run_sync(executor, TerminalAction(command="sleep 30"))
            with trio.fail_after(10):
                while "terminal/release" not in client.methods():
                    await trio.sleep(0.02)
            again = await trio.to_thread.run_sync(executor, TerminalAction(command="echo after"))
        calls.close()
    assert obs.is_error and "cancelled" in obs.text
    assert client.methods()[:4] == [
        "terminal/create",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    ]
    assert "after" in again.text


async def test_a_cancel_while_the_terminal_is_being_created_still_releases_it(tmp_path):
    slow = EditorClient()
    slow.create_delay = 0.3
    (obs,), client, _ = await run_commands(
        tmp_path,
        {"command": "sleep 30"},
        cancel_when=lambda c: "terminal/create" in c.methods(),
        client=slow,
    )
    assert obs.is_error and "cancelled" in obs.text
    assert client.methods() == ["terminal/create", "terminal/kill", "terminal/release"]
    assert client.terminals == {}  # nothing left running in the editor
