"""stdio transport, checked on the live agent (the whole-run framing checks are in
`whole_run.py`)."""

from __future__ import annotations

from ..context import Context
from ..harness import AgentExited, RequestTimeout
from ..model import Failed, Level, check
from ..scenarios import echo_prompt
from ._util import require_stop_reason

AREA = "transport"

LARGE = 1 << 20  # 1 MiB: far past the 64 KiB line limits that bit python-sdk#62


@check(
    "ACP-TRANSPORT-003",
    "a 1 MiB frame is accepted",
    rule="Messages are newline-delimited JSON-RPC of any size; readers with a 64 KiB line limit "
    "kill the connection (python-sdk#62, kimi-cli#831). Sent: a session/prompt whose "
    "_meta carries 1 MiB.",
    level=Level.MANDATORY,
    area=AREA,
)
async def large_frame(ctx: Context) -> str:
    agent = await ctx.main()
    sid = await ctx.shared_session()
    padding = "x" * LARGE
    try:
        turn = await ctx.turn(
            sid,
            echo_prompt("after a large frame"),
            extra={"_meta": {"acp-conformance/padding": padding}},
            timeout=30,
        )
    except (RequestTimeout, AgentExited) as exc:
        ctx.retire_main("it did not survive a 1 MiB frame")
        logged = agent.stderr_error()
        raise Failed(f"{exc}" + (f"; the agent logged {logged!r}" if logged else "")) from None
    return f"{len(turn.request.raw) // 1024} KiB prompt: {require_stop_reason(turn)}"
