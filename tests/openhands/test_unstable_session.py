"""The unstable v1 session features (schema/unstable.py): `session/set_title`,
`session/status` and `PromptResponse.usage`, every frame held to the official
`schema.unstable.json`."""

from __future__ import annotations

import json
import uuid

from test_models_auth_fork import with_raw

from trio_acp.testing import scenario_prompt
from trio_acp.testing.openai_wire import tokens
from trio_acp.testing.wire_check import _validators

UNKNOWN = str(uuid.UUID(int=7))


def unstable_errors(type_name: str, value) -> list[str]:
    cls, document = _validators(unstable=True)
    root = {k: v for k, v in document.items() if k in ("$schema", "$defs")}
    validator = cls({**root, "$ref": f"#/$defs/{type_name}"})
    return [e.message for e in validator.iter_errors(value)]


def info_titles(frames) -> list[str]:
    return [
        f["params"]["update"].get("title")
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "session_info_update"
    ]


async def test_capabilities_are_advertised(env, tmp_path):
    async def body(raw, agent):
        init = await raw.initialize()
        assert unstable_errors("InitializeResponse", init) == []
        caps = init["agentCapabilities"]["sessionCapabilities"]
        assert caps["title"] == {} and caps["status"] == {}

    await with_raw(env, body)


async def test_status_open_saved_and_unknown(env, tmp_path):
    async def body(raw, agent):
        await raw.initialize()
        sid = (await raw.new_session(tmp_path))["sessionId"]
        answer = await raw.result("session/status", {"sessionId": sid})
        assert answer == {"status": "open"}
        assert unstable_errors("SessionStatusResponse", answer) == []
        await raw.result("session/close", {"sessionId": sid})
        assert await raw.result("session/status", {"sessionId": sid}) == {"status": "saved"}
        for bad in (UNKNOWN, "../x"):
            error = (await raw.call("session/status", {"sessionId": bad}))["error"]
            assert error["code"] == -32002 and error["data"] == {"sessionId": bad}
        # No side effect: the saved session was not reopened by asking.
        assert await raw.result("session/status", {"sessionId": sid}) == {"status": "saved"}

    await with_raw(env, body)


async def test_set_title_is_kept_shown_and_told(env, tmp_path):
    async def body(raw, agent):
        await raw.initialize()
        sid = (await raw.new_session(tmp_path))["sessionId"]
        start = len(raw.frames)
        answer = await raw.result(
            "session/set_title", {"sessionId": sid, "title": "  Heron\n\x1b[31mwatch  "}
        )
        assert answer == {"title": "Heron watch"}
        assert unstable_errors("SetSessionTitleResponse", answer) == []
        # The first prompt does not rename it; the client was told the stored title.
        await raw.prompt(sid, scenario_prompt("echo", "a first prompt that would title it"))
        assert info_titles(raw.frames[start:]) == ["Heron watch"]
        listed = (await raw.result("session/list", {}))["sessions"]
        assert [s["title"] for s in listed] == ["Heron watch"]

        # A session that is only stored can be renamed too.
        await raw.result("session/close", {"sessionId": sid})
        assert (await raw.result("session/set_title", {"sessionId": sid, "title": "Egret"})) == {
            "title": "Egret"
        }
        listed = (await raw.result("session/list", {}))["sessions"]
        assert [s["title"] for s in listed] == ["Egret"]

        empty = await raw.call("session/set_title", {"sessionId": sid, "title": " \n "})
        assert empty["error"]["code"] == -32602
        unknown = await raw.call("session/set_title", {"sessionId": UNKNOWN, "title": "x"})
        assert unknown["error"]["code"] == -32002

    await with_raw(env, body)


async def test_prompt_response_carries_the_turns_usage(env, llm, tmp_path):
    async def body(raw, agent):
        await raw.initialize({"plan": {}})  # opted into the unstable schema
        sid = (await raw.new_session(tmp_path))["sessionId"]
        results = []
        for text in ("one", "two"):
            before = len(llm.requests)
            result, _ = await raw.prompt(sid, scenario_prompt("echo", text))
            assert unstable_errors("PromptResponse", result) == [], result
            # The turn's own model calls, as the scripted server counted them (not the
            # session's running total).
            sent = sum(
                tokens(len(json.dumps(r.body.get("messages") or []))) for r in llm.requests[before:]
            )
            usage = result["usage"]
            assert usage["inputTokens"] == sent > 0 and usage["outputTokens"] > 0
            assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
            results.append(result)
        # A slash command makes no model call: zero.
        command, _ = await raw.prompt(sid, "/help")
        assert command["usage"] == {"totalTokens": 0, "inputTokens": 0, "outputTokens": 0}

    await with_raw(env, body)


async def test_no_usage_for_a_client_without_unstable_capabilities(env, tmp_path):
    async def body(raw, agent):
        await raw.initialize()
        sid = (await raw.new_session(tmp_path))["sessionId"]
        result, _ = await raw.prompt(sid, scenario_prompt("echo", "one"))
        assert result == {"stopReason": "end_turn"}

    await with_raw(env, body)


def status_updates(frames) -> list[dict]:
    return [f["params"] for f in frames if f.get("method") == "auth/status_update"]


async def test_auth_status_and_its_updates_only_for_a_client_that_asked(env, tmp_path):
    async def body(raw, agent):
        init = await raw.initialize()
        assert init["agentCapabilities"]["auth"]["status"] == {}
        method = init["authMethods"][0]["id"]
        # A client that never asked is not told of changes.
        await raw.result("logout", {})
        await raw.result("authenticate", {"methodId": method})

        answer = await raw.result("auth/status", {})
        assert status_updates(raw.frames) == []  # (anything sent after those responses is in)
        assert unstable_errors("AuthStatusResponse", answer) == []
        assert answer["state"] == "authenticated"
        assert answer["accounts"] == [{"label": "OpenHands model openai/scripted", "active": True}]

        start = len(raw.frames)
        await raw.result("logout", {})
        await raw.result("logout", {})  # unchanged: not told again
        # Asking is never refused with -32000, logged out or not.
        assert (await raw.result("auth/status", {})) == {"state": "unauthenticated"}
        await raw.result("authenticate", {"methodId": method})
        # The update follows the response (after_response): read until it is there.
        while len(status_updates(raw.frames[start:])) < 2:
            await raw.receive()
        updates = status_updates(raw.frames[start:])
        assert [u["state"] for u in updates] == ["unauthenticated", "authenticated"]
        for update in updates:
            assert unstable_errors("AuthStatusUpdateNotification", update) == []

    await with_raw(env, body)


def session_update_kinds(frames) -> list[str]:
    return [
        f["params"]["update"]["sessionUpdate"]
        for f in frames
        if f.get("method") == "session/update"
    ]


async def test_plan_update_for_a_client_with_plan_and_plan_for_the_others(env, tmp_path):
    for caps, kind in [({"plan": {}}, "plan_update"), ({}, "plan")]:

        async def body(raw, agent, caps=caps, kind=kind):
            await raw.initialize(caps)
            sid = (await raw.new_session(tmp_path))["sessionId"]
            start = len(raw.frames)
            await raw.prompt(sid, scenario_prompt("plan", "make a plan"))
            frames = raw.frames[start:]
            kinds = session_update_kinds(frames)
            assert kind in kinds
            assert {"plan", "plan_update", "plan_removed"} & set(kinds) == {kind}
            for f in frames:
                if f.get("method") == "session/update":
                    assert unstable_errors("SessionNotification", f["params"]) == []
            if kind == "plan_update":
                update = next(
                    f["params"]["update"]
                    for f in frames
                    if f.get("method") == "session/update"
                    and f["params"]["update"]["sessionUpdate"] == "plan_update"
                )
                assert update["plan"]["type"] == "items" and update["plan"]["planId"] == "tasks"
                assert len(update["plan"]["entries"]) == 3

        await with_raw(env, body)


def test_an_emptied_plan_is_removed():
    from trio_acp import schema
    from trio_acp.openhands.translate.plans import spell_for_client
    from trio_acp.schema import unstable

    note = schema.SessionNotification(session_id="s", update=schema.AgentPlanUpdate(entries=[]))
    removed = spell_for_client(unstable.ClientCapabilities(plan=unstable.PlanCapabilities()), note)
    wire = schema.to_wire(removed)
    assert wire["update"] == {"sessionUpdate": "plan_removed", "planId": "tasks"}
    assert unstable_errors("SessionNotification", wire) == []
    assert spell_for_client(schema.ClientCapabilities(), note) is note
