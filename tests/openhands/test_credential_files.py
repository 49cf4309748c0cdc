"""Reading trio-acp's own credential files is asked every time (issue 23.4b).

`cat ~/.openhands/agent_settings.json` hands the model the key; masking catches the
plain and the usual encoded forms, not all. So an action that reads one of the files is
put to the user in every mode, whatever the "always" rules, with a question that says the
file holds the API key and no "Always allow"; llm-approve never approves it on the
model's word (credential_files.py, confirm.py, credential_guard.py).
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest
import trio

from _inprocess import agent_env, loader
from trio_acp import schema
from trio_acp.openhands.permissions.confirm import PermissionFailed, confirm_pending
from trio_acp.openhands.permissions.credential_files import CredentialFiles
from trio_acp.openhands.permissions.policy import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    ALWAYS_APPROVE,
    ALWAYS_ASK,
    LLM_APPROVE,
    REJECT_ONCE,
    Rule,
    RuleBook,
)
from trio_acp.testing import Reply, Scenario, ScriptedLLM, ToolCall, scenario_prompt

HOME = "/home/someone"
PDIR = f"{HOME}/.openhands"
FILES = CredentialFiles.under(PDIR, [(f"{PDIR}/cli_config.json", "the critic's settings")])
FILES = CredentialFiles(directory=FILES.directory, files=FILES.files, home=HOME)


@pytest.mark.parametrize(
    ("tool", "args", "reads"),
    [
        ("terminal", {"command": f"cat {PDIR}/agent_settings.json"}, "agent_settings.json"),
        (
            "terminal",
            {"command": "cat ~/.openhands/agent_settings.json | rev"},
            "agent_settings.json",
        ),
        ("terminal", {"command": "base64 $HOME/.openhands/agent_sett*"}, "agent_settings.json"),
        (
            "terminal",
            {"command": "cat ${OPENHANDS_PERSISTENCE_DIR}/agent_server.json"},
            "agent_server.json",
        ),
        ("terminal", {"command": "grep -r key ~/.openhands"}, "agent_settings.json"),
        ("terminal", {"command": "tar c ~/.openhands/ | xxd -p"}, "agent_settings.json"),
        ("terminal", {"command": "cat ~/.openhands/*"}, "agent_settings.json"),
        (
            "bash",
            {"command": "python3 -c 'print(open(\"agent_settings.json\").read())'"},
            "agent_settings.json",
        ),
        (
            "file_editor",
            {"command": "view", "path": f"{PDIR}/agent_settings.json"},
            "agent_settings.json",
        ),
        (
            "file_editor",
            {"command": "view", "path": f"{PDIR}/../.openhands/cli_config.json"},
            "cli_config.json",
        ),
        # Other files, in the directory or not.
        ("terminal", {"command": "ls ~/.openhands/skills"}, None),
        ("terminal", {"command": "cat ~/.openhands/conversations/x/base_state.json"}, None),
        ("terminal", {"command": "cat *.json"}, None),
        ("terminal", {"command": "cat .openhands/setup.sh"}, None),
        ("file_editor", {"command": "view", "path": "/proj/settings.json"}, None),
        ("task_tracker", {"command": "view"}, None),
    ],
)
def test_what_reads_a_credential_file(tool, args, reads):
    found = FILES.read_by(tool, args, "/proj")
    assert (os.path.basename(found.path) if found else None) == reads


def _action(tool: str, args: dict, call_id: str):
    from openhands.sdk.event import ActionEvent
    from openhands.sdk.llm import MessageToolCall

    return ActionEvent(
        thought=[],
        action=None,
        tool_name=tool,
        tool_call_id=call_id,
        tool_call=MessageToolCall(
            id=call_id, name=tool, arguments=json.dumps(args), origin="completion"
        ),
        llm_response_id="r-" + call_id,
    )


class _Client:
    def __init__(self, answer: str = ALLOW_ONCE) -> None:
        self.answer = answer
        self.requests: list[schema.RequestPermissionRequest] = []

    async def request_permission(self, request):
        self.requests.append(request)
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id=self.answer)
        )


class _Conv:
    def __init__(self, actions: list) -> None:
        self.actions = actions
        self.rejected: str | None = None

    async def pending_actions(self):
        return self.actions

    async def reject_pending(self, reason: str) -> None:
        self.rejected = reason


def _session(client, mode: str, rules: list[Rule] = ()):
    book = RuleBook()
    for rule in rules:
        book.add(rule)

    async def nothing(*_):
        return None

    return SimpleNamespace(
        id="s1",
        cwd="/proj",
        client=client,
        rules=book,
        mode=mode,
        credential_files=FILES,
        flush_turn_updates=nothing,
        send_update=nothing,
    )


READ_KEY = {"command": f"cat {PDIR}/agent_settings.json"}


@pytest.mark.parametrize(
    "rule",
    [Rule("terminal", None, allow=True), Rule("terminal", READ_KEY["command"], allow=True)],
    ids=["the whole tool", "this very command"],
)
async def test_a_credential_read_is_asked_despite_an_always_allow_rule(rule):
    client = _Client()
    conv = _Conv([_action("terminal", READ_KEY, "c1")])
    session = _session(client, ALWAYS_ASK, [rule])
    assert await confirm_pending(session, conv, trio.Event()) == "continue"
    (request,) = client.requests
    title = request.tool_call.title
    assert f"{PDIR}/agent_settings.json" in title and "API key" in title
    warning = request.tool_call.content[0].content.text
    assert "the model's API key" in warning and "asked every time" in warning
    # Asked every time: there is nothing to answer "always" with.
    assert ALLOW_ALWAYS not in {o.option_id for o in request.options}
    assert {ALLOW_ONCE, REJECT_ONCE} <= {o.option_id for o in request.options}
    # An ordinary command is still decided by the rule.
    other = _Conv([_action("terminal", {"command": "ls"}, "c2")])
    assert await confirm_pending(_session(client, ALWAYS_ASK, [rule]), other, trio.Event())
    assert len(client.requests) == (1 if rule.target is None else 2)


async def test_an_always_allow_answer_to_a_credential_question_fails_closed():
    client = _Client(answer=ALLOW_ALWAYS)  # not offered
    conv = _Conv([_action("terminal", READ_KEY, "c1")])
    session = _session(client, ALWAYS_ASK)
    with pytest.raises(PermissionFailed):
        await confirm_pending(session, conv, trio.Event())
    assert session.rules.rules == []


async def test_in_always_approve_only_the_credential_read_of_a_batch_is_asked():
    client = _Client(answer=REJECT_ONCE)
    conv = _Conv(
        [_action("terminal", {"command": "ls"}, "c1"), _action("terminal", READ_KEY, "c2")]
    )
    assert await confirm_pending(_session(client, ALWAYS_APPROVE), conv, trio.Event())
    (request,) = client.requests
    assert request.tool_call.tool_call_id == "c2"
    assert conv.rejected is not None  # the SDK rejects the whole batch: nothing of it ran


async def test_llm_approve_on_a_server_that_stops_for_every_action_asks_as_the_sdk_would():
    # An agent-server in llm-approve stops before every action (remote_conversation.py,
    # `decides_for_mode`): this side asks only what the SDK's ConfirmRisky(HIGH) would, and
    # the credential read.
    from openhands.sdk.security.risk import SecurityRisk

    def rated(action, risk):
        return action.model_copy(update={"security_risk": risk})

    client = _Client()
    conv = _Conv(
        [
            rated(_action("terminal", {"command": "ls"}, "low"), SecurityRisk.LOW),
            rated(_action("terminal", {"command": "make"}, "medium"), SecurityRisk.MEDIUM),
            rated(_action("terminal", READ_KEY, "key"), SecurityRisk.LOW),
            rated(_action("terminal", {"command": "rm -rf x"}, "high"), SecurityRisk.HIGH),
            rated(_action("terminal", {"command": "curl x"}, "unknown"), SecurityRisk.UNKNOWN),
        ]
    )
    conv.decides_for_mode = True
    assert await confirm_pending(_session(client, LLM_APPROVE), conv, trio.Event())
    assert [r.tool_call.tool_call_id for r in client.requests] == ["key", "high", "unknown"]
    # A local conversation (whose SDK stopped for a reason of its own) asks about each.
    client = _Client()
    conv.decides_for_mode = False
    assert await confirm_pending(_session(client, LLM_APPROVE), conv, trio.Event())
    assert len(client.requests) == 5


@pytest.mark.parametrize("mode", [ALWAYS_APPROVE, LLM_APPROVE])
async def test_the_modes_that_ask_less_stop_for_a_credential_read(mode):
    """The SDK stops for it (WAITING_FOR_CONFIRMATION) even though the model rated it low;
    an ordinary low-risk action runs unasked as before."""
    from openhands.sdk.security.analyzer import SecurityAnalyzerBase
    from openhands.sdk.security.risk import SecurityRisk

    from trio_acp.openhands.sdk import confirmation_setup

    sdk = await loader().get()
    policy, analyzer = confirmation_setup(sdk, mode, FILES, "/proj")

    def stops(args: dict) -> bool:
        action = _action("terminal", args, "c")
        action = action.model_copy(update={"security_risk": SecurityRisk.LOW})
        return policy.should_confirm(analyzer.security_risk(action))

    assert stops(READ_KEY)
    assert stops({"command": "cat ~/.openhands/agent_sett*"})
    assert not stops({"command": "ls"})
    # Stored with the conversation's state, and read back.
    stored = analyzer.model_dump(mode="json")
    assert SecurityAnalyzerBase.model_validate(stored) == analyzer
    # A conversation on an agent-server gets the SDK's own classes (the server's).
    _, remote = confirmation_setup(sdk, mode)
    assert type(remote).__module__.startswith("openhands.") or remote is None


# --- the whole agent ------------------------------------------------------------------


@pytest.fixture(scope="module")
def llm():
    cat = Scenario(
        "cat-settings",
        [
            Reply(
                tool_calls=[
                    ToolCall(
                        "terminal",
                        {
                            "command": "cat $OPENHANDS_PERSISTENCE_DIR/agent_settings.json",
                            "summary": "read the settings",
                            "security_risk": "LOW",
                        },
                    )
                ]
            ),
            Reply(tool_calls=[ToolCall("finish", {"message": "Done."})]),
        ],
        "the model reads the settings file",
    )
    with ScriptedLLM(scenarios=[cat]) as server:
        yield server


class _AgentClient:
    def __init__(self) -> None:
        self.updates: list = []
        self.asked: list = []

    async def session_update(self, params):
        self.updates.append(params.update)

    async def request_permission(self, params):
        self.asked.append(params)
        return schema.RequestPermissionResponse(
            outcome=schema.SelectedPermissionOutcome(option_id=REJECT_ONCE)
        )


@pytest.mark.parametrize("mode", [ALWAYS_APPROVE, LLM_APPROVE])
async def test_the_agent_asks_before_the_model_reads_the_settings_file(llm, tmp_path, mode):
    from trio_acp.openhands.agent import open_openhands_agent
    from trio_acp.testing.pair import open_in_memory_pair

    home = tmp_path / "home"
    env = agent_env(llm, home, TRIO_ACP_DEFAULT_MODE=mode, LLM_MAX_INPUT_TOKENS="128000")
    client = _AgentClient()
    async with open_openhands_agent(env=env, sdk_loader=loader()) as agent:
        async with open_in_memory_pair(agent, client) as (_, conn):
            await conn.agent.initialize(protocol_version=1)
            sid = (await conn.agent.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            reply = await conn.agent.prompt(
                session_id=sid,
                prompt=[schema.TextContent(text=scenario_prompt("cat-settings"))],
            )
    assert reply.stop_reason == "end_turn"
    (asked,) = client.asked
    assert f"{home}/agent_settings.json" in asked.tool_call.title
    assert "the model's API key" in asked.tool_call.title
    assert ALLOW_ALWAYS not in {o.option_id for o in asked.options}
