"""Session modes and config options (when session/new returns them)."""

from __future__ import annotations

from typing import Any

from ..context import Context, select_values
from ..model import Failed, Level, NotTested, Skipped, check
from ._util import require_result

AREA = "modes & config"


async def _session_with(ctx: Context, key: str) -> tuple[str, Any]:
    sid, result = await ctx.new_session()
    value = result.get(key)
    if not value:
        raise Skipped(f"session/new returned no {key}")
    return sid, value


def _mode_ids(modes: Any) -> list[Any]:
    return [m.get("id") for m in modes.get("availableModes") or [] if isinstance(m, dict)]


@check(
    "ACP-MODES-001",
    "currentModeId is one of availableModes",
    rule="SessionModeState: currentModeId names one of availableModes (session-modes.mdx).",
    level=Level.CAPABILITY,
    capability="modes in session/new",
    area=AREA,
)
async def current_mode(ctx: Context) -> str:
    _sid, modes = await _session_with(ctx, "modes")
    ids = _mode_ids(modes)
    if not ids or len(set(map(str, ids))) != len(ids):
        raise Failed(f"availableModes ids {ids!r} (empty or duplicated)")
    if modes.get("currentModeId") not in ids:
        raise Failed(f"currentModeId {modes.get('currentModeId')!r} not in {ids!r}")
    return f"{modes.get('currentModeId')} of {', '.join(map(str, ids))}"


@check(
    "ACP-MODES-002",
    "session/set_mode switches to every advertised mode",
    rule="session/set_mode with a modeId from availableModes succeeds with {} "
    "(session-modes.mdx; schema SetSessionModeResponse).",
    level=Level.CAPABILITY,
    capability="modes in session/new",
    area=AREA,
)
async def set_each_mode(ctx: Context) -> str:
    agent = await ctx.main()
    sid, modes = await _session_with(ctx, "modes")
    ids = _mode_ids(modes)
    for mode_id in ids[1:] + ids[:1]:
        reply = await agent.request("session/set_mode", {"sessionId": sid, "modeId": mode_id})
        result = require_result(reply, f"session/set_mode {mode_id}")
        if not isinstance(result, dict):
            raise Failed(f"session/set_mode {mode_id}: result {result!r} is not an object")
    return f"set {len(ids)} mode(s)"


@check(
    "ACP-MODES-003",
    "session/set_mode with an unknown modeId is an error",
    rule="modeId must be one of availableModes (session-modes.mdx); anything else is invalid params.",
    level=Level.CAPABILITY,
    capability="modes in session/new",
    area=AREA,
)
async def unknown_mode(ctx: Context) -> str:
    agent = await ctx.main()
    sid, _modes = await _session_with(ctx, "modes")
    reply = await agent.request(
        "session/set_mode", {"sessionId": sid, "modeId": "acp-conformance-no-such-mode"}
    )
    if reply.ok:
        raise Failed("an unknown modeId was accepted")
    return f"error {reply.code}"


def _option_problem(option: Any) -> str | None:
    if not isinstance(option, dict):
        return f"not an object: {option!r}"
    if option.get("type") == "boolean":
        if not isinstance(option.get("currentValue"), bool):
            return f"boolean option {option.get('id')!r} has currentValue {option.get('currentValue')!r}"
        return None
    values = select_values(option)
    if option.get("currentValue") not in values:
        return f"option {option.get('id')!r}: currentValue {option.get('currentValue')!r} not in {values!r}"
    return None


@check(
    "ACP-CONFIG-001",
    "every config option has a valid currentValue",
    rule="Every config option MUST have a default: currentValue, one of its values "
    "(session-config-options.mdx).",
    level=Level.CAPABILITY,
    capability="configOptions in session/new",
    area=AREA,
)
async def config_current(ctx: Context) -> str:
    _sid, options = await _session_with(ctx, "configOptions")
    for option in options:
        problem = _option_problem(option)
        if problem:
            raise Failed(problem)
    return f"{len(options)} option(s)"


@check(
    "ACP-CONFIG-002",
    "session/set_config_option returns the complete option list",
    rule="The response to session/set_config_option MUST contain the complete list of config "
    "options (session-config-options.mdx).",
    level=Level.CAPABILITY,
    capability="configOptions in session/new",
    area=AREA,
)
async def config_full_list(ctx: Context) -> str:
    agent = await ctx.main()
    sid, options = await _session_with(ctx, "configOptions")
    before = {o.get("id") for o in options if isinstance(o, dict)}
    target = next(
        (
            o
            for o in options
            if isinstance(o, dict) and o.get("type") != "boolean" and select_values(o)
        ),
        None,
    )
    if target is None:
        raise Skipped("no select option to set")
    values = select_values(target)
    value = next((v for v in values if v != target.get("currentValue")), values[0])
    reply = await agent.request(
        "session/set_config_option",
        {"sessionId": sid, "configId": target.get("id"), "value": value},
    )
    result = require_result(reply, f"set_config_option {target.get('id')}={value}")
    after = result.get("configOptions") if isinstance(result, dict) else None
    if not isinstance(after, list):
        raise Failed("the response has no configOptions list")
    got = {o.get("id") for o in after if isinstance(o, dict)}
    if not before <= got:
        raise Failed(f"missing from the response: {sorted(map(str, before - got))}")
    new = next((o for o in after if isinstance(o, dict) and o.get("id") == target.get("id")), {})
    if new.get("currentValue") != value:
        raise Failed(f"{target.get('id')} is {new.get('currentValue')!r} after setting {value!r}")
    return f"set {target.get('id')}={value}; {len(after)} option(s) returned"


@check(
    "ACP-CONFIG-003",
    "no boolean config options unless the client supports them",
    rule='Do not include type "boolean" options unless the client advertised '
    "clientCapabilities.session.configOptions.boolean (session-config-options.mdx; acp-tck "
    "ACP-CONFIG-003).",
    level=Level.CAPABILITY,
    capability="configOptions in session/new",
    area=AREA,
)
async def no_boolean(ctx: Context) -> str:
    _sid, options = await _session_with(ctx, "configOptions")
    bad = [o.get("id") for o in options if isinstance(o, dict) and o.get("type") == "boolean"]
    if bad:
        raise Failed(f"boolean option(s) {bad!r} sent to a client that did not advertise them")
    return "none"


async def _second_process(ctx: Context):
    """The fresh agent process the reopen checks share (see lifecycle.py)."""
    agent = ctx.memo.get("reopen-agent")
    if agent is None or not agent.alive:
        agent = await ctx.spawn_long("reopen")
        require_result(await ctx.initialize(agent), "initialize (second process)")
        ctx.memo["reopen-agent"] = agent
    return agent


@check(
    "ACP-MODES-004",
    "a session keeps its mode across load and resume",
    rule="A session's settings are part of the session: session/load and session/resume in a new "
    "agent process answer with the mode the user chose, not the default (clients restore sessions "
    "after a restart and show the mode the agent reports; session-modes.mdx, session-setup.mdx).",
    level=Level.ADVISORY,
    area=AREA,
    timeout=240,
)
async def mode_survives_reopen(ctx: Context) -> str:
    agent = await ctx.main()
    methods = [
        m
        for m, cap in (
            ("session/load", ("loadSession",)),
            ("session/resume", ("sessionCapabilities", "resume")),
        )
        if ctx.capability(*cap) not in (None, False)
    ]
    if not methods:
        raise Skipped("the agent advertises neither loadSession nor sessionCapabilities.resume")
    chosen: dict[str, tuple[str, Any]] = {}
    for method in methods:
        sid, modes = await _session_with(ctx, "modes")
        ids = _mode_ids(modes)
        other = next((m for m in ids if m != modes.get("currentModeId")), None)
        if other is None:
            raise Skipped("only one mode is available")
        require_result(
            await agent.request("session/set_mode", {"sessionId": sid, "modeId": other}),
            f"session/set_mode {other}",
        )
        if ctx.capability("sessionCapabilities", "close") is not None:
            await agent.request("session/close", {"sessionId": sid}, timeout=30)
        chosen[method] = (sid, other)
    second = await _second_process(ctx)
    told = []
    for method, (sid, other) in chosen.items():
        params = {"sessionId": sid, "cwd": str(ctx.workdir), "mcpServers": []}
        result = require_result(
            await second.request(method, params, timeout=ctx.config.session_timeout), method
        )
        modes = result.get("modes") if isinstance(result, dict) else None
        options = result.get("configOptions") if isinstance(result, dict) else None
        current = modes.get("currentModeId") if isinstance(modes, dict) else None
        option = next(
            (
                o.get("currentValue")
                for o in options or []
                if isinstance(o, dict) and o.get("category") == "mode"
            ),
            None,
        )
        if current is None and option is None:
            raise NotTested(f"{method} answers no modes or mode option to compare")
        if current is not None and current != other:
            raise Failed(f"{method}: currentModeId {current!r}, the session was in {other!r}")
        if option is not None and option != other:
            raise Failed(f"{method}: the mode option is {option!r}, the session was in {other!r}")
        told.append(f"{method.split('/')[1]}: {other}")
    return "; ".join(told)
