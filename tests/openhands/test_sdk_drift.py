"""The drift check: everything trio-acp relies on in the installed OpenHands SDK is there
(the table: trio_acp/openhands/sdk/reliance.py; docs/ARCHITECTURE.md, `sdk/`).

An SDK upgrade: run this module; each line of its failure names a piece that moved, and
the door module that relies on it is in trio_acp/openhands/sdk/.
"""

from __future__ import annotations

import pytest

from trio_acp.openhands.sdk import import_sdk, reliance
from trio_acp.openhands.sdk.reliance import (
    FIELDS,
    RELIANCE,
    attribute,
    calls,
    check,
    defined,
    fields,
    name,
    overrides,
    report,
)


@pytest.fixture(scope="module", autouse=True)
def _sdk():
    import_sdk()


def test_everything_we_rely_on_is_in_the_installed_sdk():
    problems = check()
    assert not problems, report(problems)


def test_the_check_leaves_the_agent_server_app_unbuilt():
    # Importing the agent-server's `api` builds its app from a default config: the check
    # reads that module's source instead (`defined`).
    import sys

    imported_before = "openhands.agent_server.api" in sys.modules  # by another test
    check()
    assert imported_before or "openhands.agent_server.api" not in sys.modules


def test_every_event_the_translation_handles_is_in_the_table():
    # A new handler in translator.py is a new reliance: the table must name its class.
    from trio_acp.openhands.translate import translator

    ours = {"SubagentEvent", "SubagentBegan", "SubagentEnded"}  # translate/subagents.py
    handled = (set(translator._HANDLERS) | set(translator._QUIET_EVENTS)) - ours
    listed = {r.target.rpartition(":")[2] for r in RELIANCE if r.kind == FIELDS}
    assert handled - listed == set()


TASKS = "openhands.tools.task.manager:TaskManager"
OURS = "trio_acp.openhands.sdk.delegation:SessionTaskManager"
EDITOR = "trio_acp.openhands.sdk.file_editor:ClientFileEditor"


@pytest.mark.parametrize(
    ("bogus", "says"),
    [
        (calls(f"{TASKS}._no_such_hook"), f"call {TASKS}._no_such_hook: no {TASKS}._no_such_hook"),
        (name("openhands.sdk.no_such_module:X"), "no module openhands.sdk.no_such_module"),
        (
            overrides(f"{TASKS}._run_until_finished", "task_id", OURS),
            "the SDK's parameters are (task_id, conversation), ours expect (task_id)",
        ),
        (
            # A renamed override is no override (the SDK's own method would run).
            overrides(
                "openhands.tools.file_editor.editor:FileEditor.view", "path, view_range", EDITOR
            ),
            f"{EDITOR} does not define view",  # the signature matches: our class does not
        ),
        (
            calls("openhands.sdk.tool:register_tool", "name, factory, no_such_param"),
            "takes no no_such_param",
        ),
        (
            fields("openhands.sdk.event:MessageEvent", "sender", "no_such_field"),
            "fields openhands.sdk.event:MessageEvent: no field no_such_field",
        ),
        (
            attribute("openhands.tools.terminal.impl:TerminalExecutor._no_such_attribute"),
            "the class never sets it",
        ),
        (
            defined("openhands.agent_server.api:no_such_function"),
            "no openhands.agent_server.api:no_such_function",
        ),
    ],
)
def test_the_check_names_the_missing_piece_and_the_version(bogus, says):
    problems = check([*RELIANCE[:3], bogus])
    assert len(problems) == 1, problems
    message = report(problems)
    assert says in message
    assert bogus.target.partition(":")[0] in message
    assert f"openhands-sdk {reliance.sdk_version().split()[1].rstrip(',')}" in message
