"""ACP v2 (draft): a connection that asks for protocol version 2.

Each check is named ``v2/<id>`` after the requirement of the official test kit's v2
registry it tests (agentclientprotocol/acp-tck, ``src/tck/v2/requirements.py``); the
``v2/`` keeps them apart from this suite's v1 ids, some of which the kit reuses bare.

One agent process of its own (not judged by the v1 whole-run checks) is initialized with
``protocolVersion: 2``; every frame it writes is checked against the official v2 schema
(``schema/v2/schema.json`` of the same npm package as the v1 schema).  An agent that
answers another version is honest, not wrong: the checks of v2 shapes are then skipped
("VERSION-MISMATCH"), as the kit does.  Turns are judged by their ``state_update``s: the
prompt's answer only accepts it.  A turn holds still on a permission question (the
suite's policy waits) where a check needs it to, never on timing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import attrs
import trio

from trio_acp.testing.wire_check_v2 import V2FrameChecker

from ..context import CLIENT_INFO, Context
from ..harness import AgentProcess, Frame, RequestTimeout, choose
from ..model import Failed, Level, NotTested, Skipped, check
from ..scenarios import echo_prompt, shell_prompt

AREA = "v2"
SESSION = "capabilities.session"
STOP_REASONS = {"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled", "error"}


@attrs.define
class V2Turn:
    session_id: str
    message_id: Any
    reply_ok: bool
    frames: list[Frame]  # the session's updates (and questions) from the prompt to its idle
    idle: dict[str, Any] | None

    def updates(self) -> list[dict[str, Any]]:
        return [f.params["update"] for f in self.frames if f.method == "session/update"]

    def states(self) -> list[str]:
        return [
            str(u.get("state")) for u in self.updates() if u.get("sessionUpdate") == "state_update"
        ]


@attrs.define
class V2:
    agent: AgentProcess
    init: dict[str, Any] | None
    init_problem: str
    schema: Path | None
    session_id: str | None = None
    turns: dict[str, V2Turn] = attrs.field(factory=dict)

    @property
    def version(self) -> Any:
        return (self.init or {}).get("protocolVersion")

    def checker(self) -> V2FrameChecker:
        """A checker fed the whole conversation so far."""
        if self.schema is None:
            raise NotTested("the official v2 schema is not installed next to the v1 one")
        checker = V2FrameChecker(self.schema)
        for frame in self.agent.frames:
            if not isinstance(frame.msg, dict):
                continue
            if frame.direction == "out":
                checker.received(frame.msg)
            else:
                checker.sent(frame.msg)
        return checker


def _schema_path(ctx: Context) -> Path | None:
    if ctx.validator is None:
        return None
    path = ctx.validator.path.parent.parent / "v2" / "schema.json"
    return path if path.is_file() else None


async def _v2(ctx: Context) -> V2:
    """The v2 connection (started and initialized once per run)."""
    state = ctx.memo.get("v2")
    if state is None:
        agent = await ctx.spawn_long("v2", judged=False)
        params = {"protocolVersion": 2, "info": CLIENT_INFO, "capabilities": {}}
        try:
            reply = await agent.request("initialize", params, timeout=ctx.config.init_timeout)
        except RequestTimeout:
            state = V2(agent, None, "no answer to initialize", _schema_path(ctx))
        else:
            result = reply.result if reply.ok and isinstance(reply.result, dict) else None
            state = V2(agent, result, "" if result else reply.describe(), _schema_path(ctx))
        ctx.memo["v2"] = state
    assert isinstance(state, V2)
    return state


async def _speaks_v2(ctx: Context) -> V2:
    state = await _v2(ctx)
    if state.init is None:
        raise Failed(f"initialize with protocolVersion 2: {state.init_problem}")
    if state.version != 2:
        raise Skipped(f"VERSION-MISMATCH: the agent negotiated {state.version!r}")
    return state


async def _sessions(ctx: Context) -> V2:
    state = await _speaks_v2(ctx)
    caps = state.init.get("capabilities") if state.init else None
    if not isinstance(caps, dict) or not isinstance(caps.get("session"), dict):
        raise Skipped("the agent does not advertise capabilities.session")
    return state


async def _new_session(state: V2, ctx: Context, **params: Any) -> str:
    reply = await state.agent.request(
        "session/new", {"cwd": str(ctx.workdir), **params}, timeout=ctx.config.session_timeout
    )
    sid = reply.result.get("sessionId") if reply.ok and isinstance(reply.result, dict) else None
    if not isinstance(sid, str) or not sid:
        raise Failed(f"session/new: {reply.describe()}")
    return sid


async def _session(ctx: Context) -> tuple[V2, str]:
    state = await _sessions(ctx)
    if state.session_id is None:
        state.session_id = await _new_session(state, ctx)
    return state, state.session_id


def _is_idle(frame: Frame, sid: str) -> bool:
    if frame.method != "session/update" or frame.session_id != sid:
        return False
    update = frame.params.get("update")
    return (
        isinstance(update, dict)
        and update.get("sessionUpdate") == "state_update"
        and update.get("state") == "idle"
        and "stopReason" in update
    )


async def _turn(state: V2, sid: str, text: str, *, timeout: float, then: Any = None) -> V2Turn:
    """One prompt, followed to the idle that ends it (or ``timeout``).  ``then(agent)``
    runs after the prompt is accepted (e.g. to cancel)."""
    agent = state.agent
    mark = agent.mark()
    reply = await agent.request(
        "session/prompt",
        {"sessionId": sid, "prompt": [{"type": "text", "text": text}]},
        timeout=timeout,
    )
    result = reply.result if reply.ok and isinstance(reply.result, dict) else {}
    if then is not None:
        await then(agent)
    idle = None
    if reply.ok:
        idle = await agent.wait_for(
            lambda: next((f for f in agent.since(mark) if _is_idle(f, sid)), None), timeout
        )
    end = idle.seq if idle is not None else agent.mark()
    frames = [
        f
        for f in agent.since(mark)
        if f.seq <= end and f.session_id == sid and f.method is not None
    ]
    return V2Turn(
        sid,
        result.get("messageId"),
        reply.ok,
        frames,
        idle.params["update"] if idle is not None else None,
    )


async def _echo_turn(ctx: Context) -> V2Turn:
    state, sid = await _session(ctx)
    if "echo" not in state.turns:
        state.turns["echo"] = await _turn(
            state, sid, echo_prompt("v2 turn"), timeout=ctx.config.prompt_timeout
        )
    turn = state.turns["echo"]
    if not turn.reply_ok:
        raise Failed("session/prompt was not accepted")
    return turn


# -- initialize ---------------------------------------------------------------------------


@check(
    "v2/ACP-INIT-001",
    "initialize with protocolVersion 2 succeeds",
    rule="`initialize` succeeds with a non-error JSON-RPC result, whatever version is "
    "negotiated (acp-tck v2 ACP-INIT-001; initialization.mdx).",
    level=Level.MANDATORY,
    area=AREA,
)
async def init_succeeds(ctx: Context) -> str:
    state = await _v2(ctx)
    if state.init is None:
        raise Failed(f"initialize with protocolVersion 2: {state.init_problem}")
    return f"negotiated {state.version!r}"


@check(
    "v2/ACP-INIT-201",
    "the negotiated version is 2, or the agent's own latest",
    rule="The result's protocolVersion is an integer: the requested 2, or the agent's latest "
    "supported version (acp-tck v2 ACP-INIT-201; initialization.mdx).",
    level=Level.MANDATORY,
    area=AREA,
)
async def init_version(ctx: Context) -> str:
    state = await _v2(ctx)
    version = state.version
    if type(version) is not int or not 1 <= version <= 2:
        raise Failed(f"answered protocolVersion {version!r} to a request for 2")
    return f"answered {version}"


@check(
    "v2/ACP-INIT-003",
    "a request for 65535 is answered with the agent's latest version",
    rule="An unsupported-version probe still succeeds and answers at least the version the "
    "agent answers to 2, never the request echoed (acp-tck v2 ACP-INIT-003).",
    level=Level.MANDATORY,
    area=AREA,
)
async def init_future_version(ctx: Context) -> str:
    reference = (await _v2(ctx)).version
    async with ctx.spawn("v2-65535", judged=False) as agent:
        params = {"protocolVersion": 65535, "info": CLIENT_INFO, "capabilities": {}}
        reply = await agent.request("initialize", params, timeout=60)
    if not reply.ok or not isinstance(reply.result, dict):
        raise Failed(f"initialize 65535: {reply.describe()}")
    version = reply.result.get("protocolVersion")
    if type(version) is not int or version == 65535:
        raise Failed(f"answered {version!r} to a request for 65535")
    if type(reference) is int and version < reference:
        raise Failed(f"answered {version} to 65535 but {reference} to 2")
    return f"answered {version}"


@check(
    "v2/ACP-INIT-202",
    "a request for version 1 still succeeds with 1 or 2",
    rule="A downgrade probe (protocolVersion 1) succeeds and the answer is 1 or 2 (acp-tck v2 "
    "ACP-INIT-202). Judged on the suite's own v1 connection.",
    level=Level.MANDATORY,
    area=AREA,
)
async def init_downgrade(ctx: Context) -> str:
    await ctx.main()
    version = ctx.init_result.get("protocolVersion")
    if version not in (1, 2):
        raise Failed(f"answered {version!r} to a request for 1")
    return f"answered {version}"


@check(
    "v2/ACP-INIT-203",
    "the result names the agent (info)",
    rule="`info` is an object with non-empty string name and version: required in v2 (acp-tck "
    "v2 ACP-INIT-203; schema InitializeResponse).",
    level=Level.MANDATORY,
    area=AREA,
)
async def init_info(ctx: Context) -> str:
    state = await _speaks_v2(ctx)
    info = (state.init or {}).get("info")
    if not isinstance(info, dict):
        raise Failed(f"info is {info!r}")
    for key in ("name", "version"):
        if not isinstance(info.get(key), str) or not info[key]:
            raise Failed(f"info.{key} is {info.get(key)!r}")
    return f"{info['name']} {info['version']}"


@check(
    "v2/ACP-INIT-204",
    "every capability is an object, never a boolean",
    rule="Known capability markers under capabilities (session, auth and their keys) are "
    "absent, null or objects (acp-tck v2 ACP-INIT-204; migration.mdx).",
    level=Level.MANDATORY,
    area=AREA,
)
async def init_capability_objects(ctx: Context) -> str:
    state = await _speaks_v2(ctx)
    caps = (state.init or {}).get("capabilities", {})
    bad: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key != "_meta":
                    walk(inner, f"{path}.{key}")
        elif value is not None and not isinstance(value, list):
            bad.append(f"{path} = {value!r}")

    walk(caps, "capabilities")
    if bad:
        raise Failed("; ".join(bad[:3]))
    return "all objects"


@check(
    "v2/ACP-SCHEMA-001",
    "the initialize exchange validates against the v2 schema",
    rule="Every message the agent emits during initialize validates against the official v2 "
    "schema (acp-tck v2 ACP-SCHEMA-001).",
    level=Level.MANDATORY,
    area=AREA,
)
async def init_schema(ctx: Context) -> str:
    state = await _speaks_v2(ctx)
    checker = V2FrameChecker(state.schema) if state.schema else None
    if checker is None:
        raise NotTested("the official v2 schema is not installed next to the v1 one")
    from trio_acp.testing.wire_check_v2 import validate_v2_type

    errors = validate_v2_type("InitializeResponse", state.init, state.schema)
    if errors:
        raise Failed(errors[0])
    return "valid"


# -- sessions -----------------------------------------------------------------------------


@check(
    "v2/ACP-SESSION-001",
    "session/new with no mcpServers gives a session id",
    rule="session/new with an absolute cwd and no mcpServers succeeds with a non-empty "
    "sessionId (acp-tck v2 ACP-SESSION-001).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def session_new(ctx: Context) -> str:
    _, sid = await _session(ctx)
    return sid


@check(
    "v2/ACP-SESSION-002",
    "two session/new calls give two ids",
    rule="Two session/new calls on one connection return distinct sessionIds (acp-tck v2 "
    "ACP-SESSION-002).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def session_ids_distinct(ctx: Context) -> str:
    state, first = await _session(ctx)
    second = await _new_session(state, ctx, mcpServers=[])  # ACP-SESSION-203's other form
    if first == second:
        raise Failed(f"both {first!r}")
    return "distinct (mcpServers omitted, then [])"


# -- a turn -------------------------------------------------------------------------------


@check(
    "v2/ACP-PROMPT-201",
    "session/prompt is answered with a messageId",
    rule="The session/prompt result carries a non-empty string messageId: an acceptance "
    "receipt, not a turn result (acp-tck v2 ACP-PROMPT-201; prompt-lifecycle.mdx).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def prompt_message_id(ctx: Context) -> str:
    turn = await _echo_turn(ctx)
    if not isinstance(turn.message_id, str) or not turn.message_id:
        raise Failed(f"messageId {turn.message_id!r}")
    return turn.message_id


@check(
    "v2/ACP-PROMPT-203",
    "the inserted user message is reported with the prompt's messageId",
    rule="A user_message (or user_message_chunk) with the same messageId as the prompt's "
    "answer arrives no later than the idle (acp-tck v2 ACP-PROMPT-203).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def prompt_user_message(ctx: Context) -> str:
    turn = await _echo_turn(ctx)
    for update in turn.updates():
        kind = update.get("sessionUpdate")
        if (
            kind in ("user_message", "user_message_chunk")
            and update.get("messageId") == turn.message_id
        ):
            return kind
    raise Failed("no user message with the prompt's messageId before the idle")


@check(
    "v2/ACP-STATE-201",
    "a turn's idle follows its running",
    rule="A turn-ending idle state_update is preceded by state_update running in the same "
    "turn (acp-tck v2 ACP-STATE-201).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def state_running_first(ctx: Context) -> str:
    turn = await _echo_turn(ctx)
    if turn.idle is None:
        raise Skipped("no turn-ending idle observed")
    if "running" not in turn.states()[:-1]:
        raise Failed(f"states {turn.states()}")
    return " -> ".join(turn.states())


@check(
    "v2/ACP-STATE-202",
    "a running turn reaches idle",
    rule="After running, an idle state_update arrives within the turn's budget (acp-tck v2 "
    "ACP-STATE-202).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def state_reaches_idle(ctx: Context) -> str:
    turn = await _echo_turn(ctx)
    if "running" not in turn.states():
        raise Skipped("no foreground work observed")
    if turn.idle is None:
        raise Failed(f"no idle within {ctx.config.prompt_timeout:.0f}s")
    return "idle"


@check(
    "v2/ACP-STATE-203",
    "the idle that ends a turn carries a defined stopReason",
    rule="The idle ending an observed running turn carries a stopReason that is defined or "
    "begins with _ (acp-tck v2 ACP-STATE-203).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def state_stop_reason(ctx: Context) -> str:
    turn = await _echo_turn(ctx)
    if turn.idle is None:
        raise Skipped("no foreground work observed")
    reason = turn.idle.get("stopReason")
    if not isinstance(reason, str) or not (reason in STOP_REASONS or reason.startswith("_")):
        raise Failed(f"stopReason {reason!r}")
    return reason


@check(
    "v2/ACP-PATCH-201",
    "message updates carry a messageId",
    rule="Every user/agent message and thought update or chunk carries a non-empty string "
    "messageId (acp-tck v2 ACP-PATCH-201; prompt-lifecycle.mdx).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def patch_message_ids(ctx: Context) -> str:
    turn = await _echo_turn(ctx)
    kinds = {
        "user_message_chunk",
        "user_message",
        "agent_message_chunk",
        "agent_message",
        "agent_thought_chunk",
        "agent_thought",
    }
    seen = [u for u in turn.updates() if u.get("sessionUpdate") in kinds]
    missing = [u for u in seen if not isinstance(u.get("messageId"), str) or not u["messageId"]]
    if missing:
        raise Failed(f"no messageId: {missing[0]!r:.160}")
    return f"{len(seen)} message updates"


@check(
    "v2/ACP-PATCH-203",
    "two prompts get two messageIds",
    rule="Two session/prompts on one session receive distinct messageIds (acp-tck v2 "
    "ACP-PATCH-203).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def patch_distinct_message_ids(ctx: Context) -> str:
    first = await _echo_turn(ctx)
    state, sid = await _session(ctx)
    second = await _turn(state, sid, echo_prompt("again"), timeout=ctx.config.prompt_timeout)
    if first.message_id == second.message_id:
        raise Failed(f"both {first.message_id!r}")
    return "distinct"


async def _shell_turn(
    ctx: Context,
    *,
    hold: trio.Event | None = None,
    cancel: bool = False,
    answer: tuple[str, ...] = ("allow_once",),
    meanwhile: Any = None,
) -> V2Turn:
    """A turn that runs a shell command, in a session mode that asks first (found among the
    session's `mode` config options); the question is answered at once (with the first
    option of a kind in ``answer``), or held until ``hold`` is set (then cancelled when
    ``cancel``).  ``meanwhile(agent, sid, mark)`` runs once the prompt is accepted."""
    state = await _sessions(ctx)
    agent = state.agent
    reply = await agent.request(
        "session/new", {"cwd": str(ctx.workdir)}, timeout=ctx.config.session_timeout
    )
    if not reply.ok:
        raise Failed(f"session/new: {reply.describe()}")
    sid = reply.result["sessionId"]
    for option in reply.result.get("configOptions") or []:
        if isinstance(option, dict) and option.get("category") == "mode":
            values = [o.get("value") for o in option.get("options") or [] if isinstance(o, dict)]
            asking = [
                v
                for v in values
                if isinstance(v, str)
                and re.search(r"ask|confirm|manual", v, re.I)
                and not re.search(r"approve|auto|bypass|yolo|never", v, re.I)
            ]
            if asking:
                await agent.request(
                    "session/set_config_option",
                    {
                        "sessionId": sid,
                        "configId": option.get("configId"),
                        "type": "id",
                        "value": asking[0],
                    },
                )

    async def policy(params: dict[str, Any], frame: Frame) -> dict[str, Any]:
        if hold is not None:
            await hold.wait()
        return {"outcome": "cancelled"} if cancel else choose(params, answer)

    agent.permission_policies[sid] = policy
    then = None
    if meanwhile is not None:

        async def then(agent: AgentProcess) -> None:
            await meanwhile(agent, sid, mark)

    elif cancel:

        async def then(agent: AgentProcess) -> None:
            await agent.wait_for(
                lambda: any(f.method == "session/request_permission" for f in agent.since(mark)),
                ctx.config.prompt_timeout,
            )
            await agent.notify("session/cancel", {"sessionId": sid})
            assert hold is not None
            hold.set()

    mark = agent.mark()
    turn = await _turn(
        state,
        sid,
        shell_prompt(f"touch {ctx.marker()}"),
        timeout=ctx.config.prompt_timeout,
        then=then,
    )
    if not any(f.method == "session/request_permission" for f in turn.frames):
        raise NotTested("the agent did not ask permission in any mode its config options offer")
    return turn


@check(
    "v2/ACP-PERM-201",
    "a permission question is well-formed and the turn goes on after the answer",
    rule="session/request_permission carries sessionId, a non-empty title and options; after "
    "a selected outcome the turn still reaches idle (acp-tck v2 ACP-PERM-201).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def perm_question(ctx: Context) -> str:
    turn = await _memo_shell(ctx)
    question = next(f for f in turn.frames if f.method == "session/request_permission")
    params = question.params
    if not isinstance(params.get("title"), str) or not params["title"]:
        raise Failed(f"title {params.get('title')!r}")
    if not params.get("options"):
        raise Failed("no options")
    if turn.idle is None:
        raise Failed("no idle after the answer")
    return f"asked {params['title']!r}; ended {turn.idle.get('stopReason')}"


async def _memo_shell(ctx: Context) -> V2Turn:
    state = await _sessions(ctx)
    if "shell" not in state.turns:
        state.turns["shell"] = await _shell_turn(ctx)
    return state.turns["shell"]


@check(
    "v2/ACP-PATCH-209",
    "requires_action while a question waits, running after",
    rule="While blocked on session/request_permission the agent reports requires_action, and "
    "running again once it resumes (acp-tck v2 ACP-PATCH-209; prompt-lifecycle.mdx).",
    level=Level.ADVISORY,
    area=AREA,
)
async def patch_requires_action(ctx: Context) -> str:
    turn = await _memo_shell(ctx)
    order: list[str] = []
    for frame in turn.frames:
        if frame.method == "session/request_permission":
            order.append("question")
        elif frame.update_kind == "state_update":
            order.append(frame.params["update"].get("state"))
    at = order.index("question")
    if "requires_action" not in order[: at + 1] or "running" not in order[at + 1 :]:
        raise Failed(" -> ".join(order))
    return " -> ".join(order)


@check(
    "v2/ACP-PATCH-204",
    "tool call updates carry their toolCallId",
    rule="Every tool_call_update carries a non-empty toolCallId, every tool_call_content_chunk "
    "a toolCallId and content (acp-tck v2 ACP-PATCH-204).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def patch_tool_call_ids(ctx: Context) -> str:
    turn = await _memo_shell(ctx)
    tools = [
        u
        for u in turn.updates()
        if u.get("sessionUpdate") in ("tool_call_update", "tool_call_content_chunk")
    ]
    if not tools:
        raise Skipped("no tool call update observed")
    bad = [u for u in tools if not isinstance(u.get("toolCallId"), str) or not u["toolCallId"]]
    if bad:
        raise Failed(f"{bad[0]!r:.160}")
    return f"{len(tools)} updates"


@check(
    "v2/ACP-CANCEL-201",
    "a cancelled turn ends idle with stopReason cancelled",
    rule="After session/cancel for a session with work in flight the agent sends state_update "
    "idle with stopReason cancelled; never an error (acp-tck v2 ACP-CANCEL-201, -203).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def cancel_idle(ctx: Context) -> str:
    state = await _sessions(ctx)
    before = len(state.agent.null_id_errors)
    turn = await _shell_turn(ctx, hold=trio.Event(), cancel=True)
    if turn.idle is None:
        raise Failed("no idle after the cancel")
    if turn.idle.get("stopReason") != "cancelled":
        raise Failed(f"stopReason {turn.idle.get('stopReason')!r}")
    # ACP-CANCEL-205: a notification gets no answer.
    if len(state.agent.null_id_errors) > before or state.agent.anomalies:
        raise Failed("the cancel notification was answered")
    return "idle cancelled"


# -- list, close, resume ------------------------------------------------------------------


@check(
    "v2/ACP-LIST-201",
    "session/list answers a list",
    rule="session/list with {} succeeds; sessions is an array (acp-tck v2 ACP-LIST-201), "
    "and filtered by a cwd no session uses it is [] (ACP-LIST-202).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def list_sessions(ctx: Context) -> str:
    state, _ = await _session(ctx)
    reply = await state.agent.request("session/list", {}, timeout=60)
    if not reply.ok or not isinstance(reply.result.get("sessions"), list):
        raise Failed(f"session/list: {reply.describe()}")
    nowhere = await state.agent.request(
        "session/list", {"cwd": str(ctx.scratch / "no-session-here")}, timeout=60
    )
    if not nowhere.ok or nowhere.result.get("sessions") != []:
        raise Failed(f"session/list for an unused cwd: {nowhere.describe()}")
    return f"{len(reply.result['sessions'])} sessions"


@check(
    "v2/ACP-RESUME-202",
    "session/resume from the start replays before its answer",
    rule="session/close of an idle session answers {} (acp-tck v2 ACP-CLOSE-201); "
    "session/resume with replayFrom start then sends the history's updates before its "
    "response (ACP-RESUME-201, -202).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def close_and_resume(ctx: Context) -> str:
    await _echo_turn(ctx)
    state, sid = await _session(ctx)
    agent = state.agent
    closed = await agent.request("session/close", {"sessionId": sid}, timeout=60)
    if not closed.ok or closed.result != {}:
        raise Failed(f"session/close: {closed.describe()}")
    mark = agent.mark()
    reply = await agent.request(
        "session/resume",
        {"sessionId": sid, "cwd": str(ctx.workdir), "replayFrom": {"type": "start"}},
        timeout=120,
    )
    if not reply.ok or not isinstance(reply.result, dict):
        raise Failed(f"session/resume: {reply.describe()}")
    replayed = [
        f for f in agent.since(mark) if f.method == "session/update" and f.seq < reply.frame.seq
    ]
    await agent.quiet(1.0)
    late = [
        f
        for f in agent.since(reply.frame.seq)
        if f.method == "session/update" and f.session_id == sid
    ]
    if late:
        raise Failed(f"an update after the resume's answer: {late[0].short()}")
    return f"{len(replayed)} updates replayed before the answer"


@check(
    "v2/ACP-RESUME-204",
    "a replayed user message keeps its prompt's messageId",
    rule="A user message inserted by session/prompt replays, if it replays at all, with the "
    "messageId the prompt's response returned (acp-tck v2 ACP-RESUME-204; "
    "session-setup.mdx, prompt-lifecycle.mdx). Not replayed at all: not tested.",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def replayed_message_id(ctx: Context) -> str:
    turn = await _echo_turn(ctx)
    state, sid = await _session(ctx)
    agent = state.agent
    await agent.request("session/close", {"sessionId": sid}, timeout=60)
    mark = agent.mark()
    reply = await agent.request(
        "session/resume",
        {"sessionId": sid, "cwd": str(ctx.workdir), "replayFrom": {"type": "start"}},
        timeout=120,
    )
    if not reply.ok:
        raise Failed(f"session/resume: {reply.describe()}")
    users = [
        f.params["update"]
        for f in agent.since(mark)
        if f.method == "session/update"
        and f.seq < reply.frame.seq
        and f.params["update"].get("sessionUpdate") in ("user_message", "user_message_chunk")
    ]
    if not users:
        raise NotTested("no user message was replayed")
    ids = {u.get("messageId") for u in users}
    if turn.message_id not in ids:
        raise Failed(
            f"the prompt was answered with messageId {turn.message_id!r}; the replayed user "
            f"messages have {sorted(map(str, ids))}"
        )
    return f"replayed as {turn.message_id}"


# -- the whole v2 conversation ------------------------------------------------------------


@check(
    "v2/ACP-PROMPT-205",
    "every v2 frame validates against the v2 schema",
    rule="Every session/update (and every other frame) the agent sent on the v2 connection "
    "validates against the official v2 schema and names its session (acp-tck v2 "
    "ACP-PROMPT-205, ACP-ENUM-202).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def whole_v2_schema(ctx: Context) -> str:
    await _echo_turn(ctx)
    state = await _sessions(ctx)
    checker = state.checker()
    if checker.errors:
        raise Failed(f"{len(checker.errors)} invalid: {checker.errors[0]}")
    return f"{checker.checked} frames valid"


@check(
    "v2/ACP-CLIENTCAP-202",
    "the agent calls no client method v2 does not define",
    rule="Every agent-to-client method is a v2 client or protocol method or begins with _: "
    "fs/* and terminal/* do not exist in v2 (acp-tck v2 ACP-CLIENTCAP-202; migration.mdx).",
    level=Level.CAPABILITY,
    capability=SESSION,
    area=AREA,
)
async def no_client_tools(ctx: Context) -> str:
    await _echo_turn(ctx)
    state = await _sessions(ctx)
    checker = state.checker()
    calls = [e for e in checker.errors if "does not serve" in e]
    if calls:
        raise Failed(calls[0])
    methods = sorted({f.method for f in state.agent.inbound if f.method})
    return ", ".join(methods)
