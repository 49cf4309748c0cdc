"""initialize and authentication methods."""

from __future__ import annotations

from ..context import CLIENT_INFO, NO_CAPABILITIES, Context
from ..harness import AgentExited, RequestTimeout
from ..model import Failed, Level, NotTested, Skipped, check

AREA = "initialize"


@check(
    "ACP-INIT-001",
    "initialize answers protocolVersion 1",
    rule='"If the Agent supports the requested version, it MUST respond with the same version" '
    "(initialization.mdx); ProtocolVersion is an integer.",
    level=Level.MANDATORY,
    area=AREA,
)
async def version_one(ctx: Context) -> str:
    try:
        await ctx.main()
    except NotTested as exc:
        raise Failed(str(exc)) from None
    version = ctx.init_result.get("protocolVersion")
    if type(version) is not int or version != 1:
        raise Failed(f"protocolVersion {version!r} (wanted the integer 1)")
    return "protocolVersion 1"


async def _fresh_initialize(ctx: Context, label: str, params: dict) -> dict:
    async with ctx.spawn(label) as agent:
        try:
            reply = await ctx.initialize(agent, params)
        except (AgentExited, RequestTimeout) as exc:
            raise Failed(f"initialize: {exc}; stderr: {agent.stderr_tail(200)!r}") from None
        if not reply.ok or not isinstance(reply.result, dict):
            raise Failed(f"initialize: {reply.describe()}")
        return reply.result


@check(
    "ACP-INIT-002",
    "an unsupported protocolVersion is answered with a supported one",
    rule='"Otherwise, the Agent MUST respond with the latest version it supports" '
    "(initialization.mdx). Sent: 65535.",
    level=Level.MANDATORY,
    area=AREA,
)
async def unknown_version(ctx: Context) -> str:
    result = await _fresh_initialize(
        ctx,
        "init-65535",
        {
            "protocolVersion": 65535,
            "clientCapabilities": NO_CAPABILITIES,
            "clientInfo": CLIENT_INFO,
        },
    )
    version = result.get("protocolVersion")
    if type(version) is not int or not 1 <= version < 65535:
        raise Failed(f"answered protocolVersion {version!r} to a request for 65535")
    return f"answered {version}"


@check(
    "ACP-INIT-003",
    "initialize without clientCapabilities works",
    rule='clientCapabilities is optional in InitializeRequest; "Clients and Agents MUST treat all '
    'capabilities omitted in the initialize request as UNSUPPORTED" (initialization.mdx). '
    "The official Python client omits it.",
    level=Level.MANDATORY,
    area=AREA,
)
async def omitted_client_capabilities(ctx: Context) -> str:
    result = await _fresh_initialize(
        ctx, "init-nocaps", {"protocolVersion": 1, "clientInfo": CLIENT_INFO}
    )
    if result.get("protocolVersion") != 1:
        raise Failed(f"protocolVersion {result.get('protocolVersion')!r}")
    return "answered"


@check(
    "ACP-INIT-004",
    "agentInfo names the agent",
    rule="The Agent SHOULD send agentInfo {name, version} in the initialize response "
    "(initialization.mdx; acp-tck ACP-INIT-004).",
    level=Level.ADVISORY,
    area=AREA,
)
async def agent_info(ctx: Context) -> str:
    await ctx.main()
    info = ctx.init_result.get("agentInfo")
    if not isinstance(info, dict):
        raise Failed("no agentInfo")
    name, version = info.get("name"), info.get("version")
    if not (isinstance(name, str) and name and isinstance(version, str) and version):
        raise Failed(f"agentInfo lacks name/version: {info!r}")
    return f"{name} {version}"


@check(
    "ACP-AUTH-001",
    "no terminal auth method unless the client supports it",
    rule='Agents only advertise authMethods with type "terminal" if the client sent '
    "clientCapabilities.auth.terminal: true (authentication.mdx; acp-tck ACP-AUTH-002).",
    level=Level.MANDATORY,
    area=AREA,
)
async def no_terminal_auth(ctx: Context) -> str:
    await ctx.main()
    methods = ctx.init_result.get("authMethods") or []
    bad = [m for m in methods if isinstance(m, dict) and m.get("type") == "terminal"]
    if bad:
        raise Failed(f"terminal auth method(s) offered to a client without auth.terminal: {bad!r}")
    return f"{len(methods)} auth method(s), none of type terminal"


@check(
    "ACP-AUTH-002",
    "no auth_required from session/new when no auth method is offered",
    rule="Gated requests return -32000 (auth_required) until authenticated; with an empty "
    "authMethods the client has no way to authenticate, so session/new should not "
    "(authentication.mdx; acp-tck ACP-AUTH-005).",
    level=Level.ADVISORY,
    area=AREA,
)
async def no_auth_required(ctx: Context) -> str:
    await ctx.main()
    if ctx.init_result.get("authMethods"):
        raise Skipped("the agent offers auth methods")
    agent = await ctx.main()
    reply = await agent.request(
        "session/new", ctx.new_session_params(), timeout=ctx.config.session_timeout
    )
    if not reply.ok and reply.code == -32000:
        raise Failed(f"session/new answered {reply.describe()} with authMethods []")
    if (
        reply.ok
        and isinstance(reply.result, dict)
        and isinstance(reply.result.get("sessionId"), str)
    ):
        ctx.sessions[reply.result["sessionId"]] = reply.result
    return f"session/new: {'result' if reply.ok else reply.describe()}"
