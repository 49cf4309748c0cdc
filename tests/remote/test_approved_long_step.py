"""An approved action that runs longer than the REST watch's patience, on a real agent-server.

Found with acpx: after "allow", a `sleep` of more than ~3 s on the server ended the turn
with `end_turn` while the command still ran, and its result arrived in the next turn. While
a step runs, the SDK holds the conversation state's lock and defers saving
`base_state.json`, which is what the agent-server's REST conversation info reads: for the
first step after an approval it still says `waiting_for_confirmation`, and the REST watch
(`RemoteConversationDriver._watch`) took that for the run's end.
"""

from __future__ import annotations

import pytest

from trio_acp.openhands.agent_server_config import AgentServerTarget
from trio_acp.openhands.remote import RemoteConversationDriver
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
