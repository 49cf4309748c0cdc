"""Permissions, modes and config options end to end, under the official Python client.

The scripted model proposes terminal commands (`touch <file>`) and file edits; the client
answers each `session/request_permission` from a script. What happened is checked on disk
(a rejected `touch` never made its file) and in the process table, and every frame is
checked against the official schema.
"""

from __future__ import annotations

import asyncio
import os
import tempfile

import psutil
import pytest

acp = pytest.importorskip("acp")

from _oh_harness import (  # noqa: E402
    TIMEOUT,
    Client,
    Wire,
    _prompt,
    _run,
    agent_env,
    new_session,
    trio_acp_agent,
)
from acp.exceptions import RequestError as AcpRequestError  # noqa: E402
from acp.schema import (  # noqa: E402
    AllowedOutcome,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    DeniedOutcome,
    RequestPermissionResponse,
)

from trio_acp.testing import Reply, Scenario, ScriptedLLM, ToolCall, scenario_prompt  # noqa: E402
from trio_acp.testing.scenarios import finish  # noqa: E402


class ScriptedClient(Client):
    """Answers permission requests from a queue: an option id, "cancel", "error" or "hang"."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[str] = []
        self.asked: list = []
        self.waiting = asyncio.Event()

    async def request_permission(self, session_id, tool_call, options, **kwargs):
        self.asked.append((tool_call, [o.option_id for o in options], [o.kind for o in options]))
        answer = self.answers.pop(0)
        if answer == "error":
            raise AcpRequestError(-32603, "the client's permission UI crashed")
        if answer == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if answer == "hang":
            # A user who has not answered yet; after session/cancel, a client MUST answer
            # pending permission requests with `cancelled` — this one does so late.
            self.waiting.set()
            await asyncio.sleep(1.0)
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if answer == "bogus":
            return RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id="not-offered")
            )
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )


def touch(ws: str, name: str) -> str:
    return scenario_prompt("terminal", command=f"touch {ws}/{name}")


async def _always_ask(llm, home, ws):
    client, wire, out = ScriptedClient(), Wire(), {}
    async with trio_acp_agent(client, wire, agent_env(llm, home)) as (conn, process):
        new = await new_session(conn, ws)
        sid = new.session_id
        out["new"] = new

        async def turn(prompt: str, *answers: str):
            client.answers = list(answers)
            before = len(client.asked)
            try:
                result = (await _prompt(conn, wire, sid, prompt)).stop_reason
            except AcpRequestError as exc:
                result = f"error {exc.code}"
            return result, len(client.asked) - before

        out["allow_once"] = await turn(touch(ws, "allowed"), "allow_once")
        out["reject_once"] = await turn(touch(ws, "rejected"), "reject_once")
        out["allow_always"] = await turn(touch(ws, "always"), "allow_always")
        os.remove(f"{ws}/always")
        out["allow_always_again"] = await turn(touch(ws, "always"))  # not asked
        out["reject_always"] = await turn(touch(ws, "never"), "reject_always")
        out["reject_always_again"] = await turn(touch(ws, "never"))  # not asked
        out["cancelled"] = await turn(touch(ws, "cancelled"), "cancel")
        out["after_cancel"] = await turn(scenario_prompt("echo", "next"))
        # session/cancel while the permission request is pending.
        client.answers = ["hang"]
        task = asyncio.create_task(_prompt(conn, wire, sid, touch(ws, "hung")))
        await asyncio.wait_for(client.waiting.wait(), TIMEOUT)
        await conn.cancel(session_id=sid)
        out["cancel_during_ask"] = (await asyncio.wait_for(task, TIMEOUT)).stop_reason
        out["client_error"] = await turn(touch(ws, "errored"), "error")
        out["bogus"] = await turn(touch(ws, "bogus"), "bogus")
        out["edit_allowed"] = await turn(
            scenario_prompt("edit", path=f"{ws}/edited.txt"), "allow_once", "allow_once"
        )
        # The scripted model goes on to its str_replace step after the refusal: refused too.
        out["edit_rejected"] = await turn(
            scenario_prompt("edit", path=f"{ws}/refused.txt"), "reject_once", "reject_once"
        )
        # A rejected `sleep` never shows up in the process table.
        agent = psutil.Process(process.pid)
        client.answers = ["reject_once"]
        out["sleep_rejected"] = await _prompt(conn, wire, sid, scenario_prompt("sleep", seconds=57))
        out["sleeps"] = [p.cmdline() for p in agent.children(recursive=True) if p.name() == "sleep"]
        # /rules lists the two "always" rules; revoking the allow rule makes it ask again.
        client.updates.clear()
        await _prompt(conn, wire, sid, "/rules")
        out["rules_text"] = client.text()
        await _prompt(conn, wire, sid, "/rules revoke 1")
        out["after_revoke"] = await turn(touch(ws, "always"), "reject_once")
        out["files"] = sorted(os.listdir(ws))
        out["asked"] = client.asked
        out["llm_saw_rejection"] = any(
            "rejected" in str(m.get("content")).lower()
            for r in llm.requests
            for m in r.messages
            if m.get("role") == "tool"
        )
    out["client"], out["wire"] = client, wire
    return out


def test_each_outcome_in_always_ask_mode():
    out = _run(_always_ask)
    files = out["files"]
    # Modes and config options come with the session.
    assert out["new"].modes.current_mode_id == "always-ask"
    assert {m.id for m in out["new"].modes.available_modes} == {
        "always-ask",
        "always-approve",
        "llm-approve",
    }
    categories = {
        o.root.category if hasattr(o, "root") else o.category for o in out["new"].config_options
    }
    assert {"mode", "model"} <= categories

    assert out["allow_once"] == ("end_turn", 1) and "allowed" in files
    assert out["reject_once"] == ("end_turn", 1) and "rejected" not in files
    assert out["llm_saw_rejection"]
    assert out["allow_always"] == ("end_turn", 1)
    assert out["allow_always_again"] == ("end_turn", 0)  # the rule answered
    assert out["reject_always"] == ("end_turn", 1) and "never" not in files
    assert out["reject_always_again"] == ("end_turn", 0)
    assert out["cancelled"] == ("cancelled", 1) and "cancelled" not in files
    assert out["after_cancel"] == ("end_turn", 0)  # the cancelled action did not sneak in
    assert out["cancel_during_ask"] == "cancelled" and "hung" not in files
    assert out["client_error"][0] == "error -32603" and "errored" not in files
    assert out["bogus"][0] == "error -32603" and "bogus" not in files
    assert out["edit_allowed"] == ("end_turn", 2) and "edited.txt" in files
    assert out["edit_rejected"] == ("end_turn", 2) and "refused.txt" not in files
    assert out["sleep_rejected"].stop_reason == "end_turn" and out["sleeps"] == []
    assert "allow `touch" in out["rules_text"] and "reject `touch" in out["rules_text"]
    assert out["after_revoke"] == ("end_turn", 1)  # asked again once the rule was revoked

    # Each request offered the four kinds and referenced a tool call with a preview.
    tool_call, option_ids, kinds = out["asked"][0]
    assert kinds == ["allow_once", "allow_always", "reject_once", "reject_always"]
    assert len(set(option_ids)) == 4
    assert "touch" in tool_call.content[0].content.text
    edit_call = out["asked"][
        [
            i
            for i, a in enumerate(out["asked"])
            if a[0].content and getattr(a[0].content[0], "type", "") == "diff"
        ][0]
    ][0]
    assert (
        edit_call.content[0].new_text == "hello world\n" and edit_call.content[0].old_text is None
    )
    errors, _ = out["wire"].schema_errors()
    assert errors == []
    assert out["wire"].updates_after_responses() == []


async def _modes(llm, home, ws):
    client, wire, out = ScriptedClient(), Wire(), {}
    async with trio_acp_agent(client, wire, agent_env(llm, home)) as (conn, process):
        sid = (await new_session(conn, ws)).session_id
        await asyncio.sleep(0.2)
        out["commands"] = [u for _, u in client.updates if isinstance(u, AvailableCommandsUpdate)]
        # set_mode → always-approve: nothing asked, the command runs.
        await conn.set_session_mode(session_id=sid, mode_id="always-approve")
        out["approve"] = await _prompt(conn, wire, sid, touch(ws, "approved"))
        # set_config_option → llm-approve: a low-risk command runs unasked, a high-risk one is asked.
        out["set_option"] = await conn.set_config_option(
            session_id=sid, config_id="mode", value="llm-approve"
        )
        out["low"] = await _prompt(conn, wire, sid, touch(ws, "low"))
        client.answers = ["reject_once"]
        out["high"] = await _prompt(
            conn, wire, sid, scenario_prompt("terminal", command=f"touch {ws}/high", risk="HIGH")
        )
        # /confirm switches back to always-ask from the prompt box.
        client.answers = []
        await _prompt(conn, wire, sid, "/confirm always-ask")
        client.answers = ["allow_once"]
        out["ask_again"] = await _prompt(conn, wire, sid, touch(ws, "asked"))
        with pytest.raises(AcpRequestError) as info:
            await conn.set_session_mode(session_id=sid, mode_id="yolo")
        out["bad_mode"] = info.value
        out["files"] = sorted(os.listdir(ws))
        out["asked"] = len(client.asked)
    out["client"], out["wire"] = client, wire
    return out


def test_modes_and_config_options():
    out = _run(_modes)
    client, files = out["client"], out["files"]
    assert out["commands"], "available_commands_update after session/new"
    names = {c.name for c in out["commands"][0].available_commands}
    assert {"help", "confirm", "condense", "status", "rules"} <= names
    assert out["approve"].stop_reason == "end_turn" and "approved" in files
    options = out["set_option"].config_options
    by_id = {
        (o.root if hasattr(o, "root") else o).id: (o.root if hasattr(o, "root") else o)
        for o in options
    }
    assert set(by_id) == {"mode", "model", "thought_level"}  # the complete list on every set
    assert by_id["mode"].current_value == "llm-approve"
    assert "low" in files and "high" not in files
    assert out["asked"] == 2  # the high-risk command and the one after /confirm
    assert "asked" in files
    modes = [u.current_mode_id for _, u in client.updates if isinstance(u, CurrentModeUpdate)]
    assert modes == ["always-approve", "llm-approve", "always-ask"]
    config_updates = [u for _, u in client.updates if isinstance(u, ConfigOptionUpdate)]
    assert len(config_updates) >= 2
    assert out["bad_mode"].code == -32602
    errors, _ = out["wire"].schema_errors()
    assert errors == []


async def _standalone_requests(llm, home, ws):
    client, wire, out = ScriptedClient(), Wire(), {}
    with open(f"{ws}/seen.txt", "w") as f:
        f.write("one\ntwo\nthree\n")
    async with trio_acp_agent(client, wire, agent_env(llm, home)) as (conn, _process):
        sid = (await new_session(conn, ws)).session_id
        client.answers = ["allow_once"]
        await _prompt(conn, wire, sid, touch(ws, "standalone"))
        client.answers = ["allow_once", "allow_once"]
        await _prompt(conn, wire, sid, scenario_prompt("edit", path=f"{ws}/made.txt"))
        client.answers = ["allow_once"]
        await _prompt(conn, wire, sid, scenario_prompt("view", path=f"{ws}/seen.txt"))
        client.answers = ["allow_once"]
        await _prompt(conn, wire, sid, scenario_prompt("plan"))
    out["asked"], out["wire"] = client.asked, wire
    return out


def test_permission_requests_stand_on_their_own():
    # A client may show (or auto-decide) a request without the tool_call it refers to:
    # every request carries the title, kind, locations and tool name the tool_call had.
    view = Scenario(
        "view",
        lambda ctx: [
            Reply(
                tool_calls=[
                    ToolCall(
                        "file_editor",
                        {
                            "command": "view",
                            "path": ctx.tag("path"),
                            "view_range": [2, 3],
                            "summary": "Read it",
                            "security_risk": "LOW",
                        },
                    )
                ]
            ),
            finish("Read it."),
        ],
    )
    with (
        ScriptedLLM(scenarios=[view]) as llm,
        tempfile.TemporaryDirectory() as home,
        tempfile.TemporaryDirectory() as ws,
    ):
        ws = os.path.realpath(ws)
        out = asyncio.run(_standalone_requests(llm, home, ws))
    raw, shown, known = [], [], {}
    for d, f in out["wire"].frames:
        if d != "from_agent":
            continue
        if f.get("method") == "session/request_permission":
            raw.append(f["params"]["toolCall"])
            shown.append(dict(known.get(raw[-1]["toolCallId"], {})))
        elif f.get("method") == "session/update" and f["params"]["update"]["sessionUpdate"] in (
            "tool_call",
            "tool_call_update",
        ):
            u = f["params"]["update"]
            known.setdefault(u["toolCallId"], {}).update(
                {k: u[k] for k in ("title", "kind", "locations", "name") if k in u}
            )
    assert len(raw) == 5, raw
    for call, before in zip(raw, shown, strict=False):
        assert call["title"] and call["kind"] and call["name"], call
        # What the client was shown of this tool call before the request: the same.
        assert before and {k: call.get(k) for k in before} == before, (call, before)
    terminal, create, edit, viewed, plan = raw
    assert terminal["kind"] == "execute" and terminal["name"] == "terminal"
    assert f"touch {ws}/standalone" in terminal["title"]
    assert create["kind"] == edit["kind"] == "edit" and create["name"] == "file_editor"
    assert f"{ws}/made.txt" in create["title"] and f"{ws}/made.txt" in edit["title"]
    assert create["locations"][0]["path"] == f"{ws}/made.txt"
    assert viewed["kind"] == "read" and f"{ws}/seen.txt" in viewed["title"]
    assert viewed["locations"] == [{"path": f"{ws}/seen.txt", "line": 2}]
    assert plan["kind"] == "think" and plan["name"] == "task_tracker"
    # The official client reads them too.
    titles = [tool_call.title for tool_call, _, _ in out["asked"]]
    assert titles == [c["title"] for c in raw]
    errors, _ = out["wire"].schema_errors()
    assert errors == []
