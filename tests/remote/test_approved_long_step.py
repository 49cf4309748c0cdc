"""Approved commands on a real agent-server: a long one, and a cancel after a re-attach.

Found with acpx: after "allow", a `sleep` of more than ~3 s on the server ended the turn
with `end_turn` while the command still ran, and its result arrived in the next turn. While
a step runs, the SDK holds the conversation state's lock and defers saving
`base_state.json`, which is what the agent-server's REST conversation info reads: for the
first step after an approval it still says `waiting_for_confirmation`, and the REST watch
(`RemoteConversationDriver._watch`) took that for the run's end.
"""

from __future__ import annotations

import pytest

from trio_acp.openhands.backends.agent_server_config import AgentServerTarget
from trio_acp.openhands.backends.remote import RemoteConversationDriver
from trio_acp.testing import ScriptedLLM, fast_llm_kwargs, scenario_prompt

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def sdk():
    from trio_acp.openhands.sdk import import_sdk

    return import_sdk()


async def test_an_approved_long_command_ends_the_run_only_when_it_is_done(sdk, server):
    from trio_acp.openhands.sdk import build_agent, confirmation_setup

    events: list[object] = []
    with ScriptedLLM() as llm:
        agent = build_agent(sdk, sdk.LLM(**fast_llm_kwargs(llm.base_url, timeout=30)))
        policy, analyzer = confirmation_setup(sdk, "always-ask")
        driver = await RemoteConversationDriver.open(
            sdk,
            AgentServerTarget(url=server.url, api_key=server.api_key),
            agent,
            working_dir=str(server.workspace),
            on_event=events.append,
            on_token=lambda chunk: None,
            confirmation_policy=policy,
            security_analyzer=analyzer,
            poll_interval=0.2,  # the watch's patience (3 polls) is 0.6 s: well under the sleep
        )
        try:
            prompt = scenario_prompt("terminal", command="sleep 4 && echo slept-through")
            await driver.send_message(
                sdk.Message(role="user", content=[sdk.TextContent(text=prompt)])
            )
            assert await driver.run() == "waiting_for_confirmation"
            assert await driver.run() == "finished"  # approved: runs, and only then over
            outputs = [
                str(e.observation)
                for e in events
                if type(e).__name__ == "ObservationEvent" and e.tool_name == "terminal"
            ]
            assert any("slept-through" in o for o in outputs), outputs
        finally:
            await driver.close()


async def test_cancel_during_an_approved_command_stops_it_after_a_reattach(sdk, server):
    """Also found with acpx: a session resumed by a new trio-acp process could not stop its
    command on cancel (the turn answered `cancelled`, the `sleep` ran on): the driver took
    the marker of the agent spec it sent, not the one the server's terminal was started with.
    """
    import psutil
    import trio

    from trio_acp.openhands.backends.remote import MARKER_VAR
    from trio_acp.openhands.sdk import build_agent, confirmation_setup

    def marked_sleeps(marker: str) -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["name"]):
            try:
                if proc.info["name"] == "sleep" and proc.environ().get(MARKER_VAR) == marker:
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    with ScriptedLLM() as llm:
        target = AgentServerTarget(url=server.url, api_key=server.api_key)
        policy, analyzer = confirmation_setup(sdk, "always-ask")

        async def open_driver(conversation_id=None) -> RemoteConversationDriver:
            agent = build_agent(sdk, sdk.LLM(**fast_llm_kwargs(llm.base_url, timeout=30)))
            return await RemoteConversationDriver.open(
                sdk,
                target,
                agent,
                conversation_id=conversation_id,
                create=conversation_id is None,
                working_dir=str(server.workspace),
                on_event=lambda event: None,
                on_token=lambda chunk: None,
                confirmation_policy=policy,
                security_analyzer=analyzer,
            )

        first = await open_driver()
        started_with, conversation_id = first.marker, first.id
        await first.close()
        driver = await open_driver(conversation_id)  # as a new process's load/resume does
        try:
            assert driver.marker == started_with
            prompt = scenario_prompt("sleep", seconds=41)
            await driver.send_message(
                sdk.Message(role="user", content=[sdk.TextContent(text=prompt)])
            )
            assert await driver.run() == "waiting_for_confirmation"
            cancel = trio.Event()
            sleeping: list[psutil.Process] = []

            async def cancel_once_sleeping() -> None:
                with trio.fail_after(60):
                    while not sleeping:
                        sleeping.extend(marked_sleeps(started_with or ""))
                        await trio.sleep(0.1)
                cancel.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_once_sleeping)
                assert await driver.run(cancel) == "cancelled"  # approved, then cancelled
            _, alive = psutil.wait_procs(sleeping, timeout=10)
            assert not alive, "the approved `sleep 41` outlived the cancel"
        finally:
            await driver.close()
