"""Benchmark driver: litellm, and the SDK's LLM, streaming the scripted `long` reply alone.

    python -m bench.agent_litellm --llm BASE_URL [--tokens N] [--warmup-tokens N]

Normally run by `python -m bench agent`; prints one JSON line. The floor under the
agent's end-to-end streaming rate: the same `--tokens`-token reply (4-character chunks)
from the same scripted server, consumed on a plain asyncio loop with no agent, no bridge
and no ACP —

litellm  `litellm.acompletion(..., stream=True)`, iterated (what the SDK's `arun()` path
         calls underneath);
sdk      `openhands.sdk.LLM.acompletion(..., on_token=<no-op>)`: litellm plus the SDK's own
         per-chunk work (the on_token callback is where the agent posts to the bridge).
fast     the same call on the agent's `SessionLLM`, whose streamed calls take the fast path
         (trio_acp/openhands/sdk/fast_stream.py): the SDK without litellm's per-chunk work.

Each: wall and CPU time per chunk, after one warm-up call (litellm's first call pays lazy
imports), the time from the last text chunk to the call's end (litellm and the SDK rebuild
the whole response from the chunks there: `stream_chunk_builder`), and a check that the
streamed text is exactly what the server sent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from typing import Any

from ._common import emit
from .agent_common import schedstat_delta, thread_schedstats


async def _litellm_once(base_url: str, tokens: int) -> dict[str, Any]:
    import litellm

    from trio_acp.testing import scenario_prompt
    from trio_acp.testing.scenarios import long_text

    s0 = thread_schedstats(os.getpid())
    c0, t0 = time.process_time(), time.perf_counter()
    response = await litellm.acompletion(
        model="openai/scripted",
        api_base=base_url,
        api_key="scripted",
        stream=True,
        messages=[{"role": "user", "content": scenario_prompt("long", tokens=tokens)}],
    )
    chunks = 0
    parts: list[str] = []
    t_last = t0
    async for chunk in response:
        chunks += 1
        if chunk.choices:
            content = chunk.choices[0].delta.content
            if content:
                parts.append(content)
                t_last = time.perf_counter()
    t1, c1 = time.perf_counter(), time.process_time()
    result = _result(tokens, chunks, t1 - t0, c1 - c0, "".join(parts) == long_text(tokens))
    result["after_last_chunk_s"] = t1 - t_last
    result["streaming_s"] = t_last - t0
    result["threads"] = schedstat_delta(os.getpid(), s0, thread_schedstats(os.getpid()), t1 - t0)
    return result


async def _sdk_once(base_url: str, tokens: int, fast: bool = False) -> dict[str, Any]:
    from openhands.sdk import LLM, Message, TextContent

    from trio_acp.testing import scenario_prompt
    from trio_acp.testing.scenarios import long_text

    if fast:  # the agent's own LLM, whose streamed calls take the fast path
        from trio_acp.openhands.sdk.fast_stream import FAST_STREAM_ENV
        from trio_acp.openhands.sdk.llm import SessionLLM as LLM  # type: ignore[assignment]

        os.environ[FAST_STREAM_ENV] = "1"
    llm = LLM(
        model="openai/scripted",
        base_url=base_url,
        api_key="scripted",
        stream=True,
        usage_id="agent",
        num_retries=1,
        timeout=600,  # the SDK alone takes over a minute for 20,000 chunks on a loaded machine
    )
    parts: list[str] = []
    chunks = 0
    t_last = 0.0

    def on_token(chunk: Any) -> None:
        nonlocal chunks, t_last
        chunks += 1
        if chunk.choices:
            content = chunk.choices[0].delta.content
            if content:
                parts.append(content)
                t_last = time.perf_counter()

    c0, t0 = time.process_time(), time.perf_counter()
    await llm.acompletion(
        [Message(role="user", content=[TextContent(text=scenario_prompt("long", tokens=tokens))])],
        on_token=on_token,
    )
    t1, c1 = time.perf_counter(), time.process_time()
    result = _result(tokens, chunks, t1 - t0, c1 - c0, "".join(parts) == long_text(tokens))
    result["after_last_chunk_s"] = t1 - t_last
    result["streaming_s"] = t_last - t0
    return result


def _result(tokens: int, chunks: int, wall: float, cpu: float, ok: bool) -> dict[str, Any]:
    return {
        "tokens": tokens,
        "chunks": chunks,  # the token chunks, plus the finish/usage chunk(s)
        "seconds": wall,
        "tokens_per_s": tokens / wall,
        "wall_us_per_token": wall * 1e6 / tokens,
        "cpu_us_per_token": cpu * 1e6 / tokens,
        "text_ok": ok,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--llm", required=True, help="base URL of the scripted model")
    parser.add_argument("--tokens", type=int, default=20_000)
    parser.add_argument("--warmup-tokens", type=int, default=500)
    parser.add_argument("--skip-sdk", action="store_true", help="litellm only")
    parser.add_argument(
        "--profile", metavar="FILE", help="profile the timed litellm call (cProfile) into FILE"
    )
    args = parser.parse_args()

    import warnings

    # As the agent does (trio_acp/openhands/sdk/__init__.py), before litellm is imported.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
    os.environ.setdefault("LITELLM_LOG", "ERROR")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    warnings.filterwarnings("ignore", message="Cost calculation failed")

    t0 = time.perf_counter()
    import litellm  # noqa: F401

    result: dict[str, Any] = {"import_litellm_s": time.perf_counter() - t0}
    asyncio.run(_litellm_once(args.llm, args.warmup_tokens))
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    result["litellm"] = asyncio.run(_litellm_once(args.llm, args.tokens))
    if args.profile:
        profiler.disable()
        profiler.dump_stats(args.profile)
    if not args.skip_sdk:
        t0 = time.perf_counter()
        import openhands.sdk  # noqa: F401

        result["import_sdk_s"] = time.perf_counter() - t0
        asyncio.run(_sdk_once(args.llm, args.warmup_tokens))
        result["sdk"] = asyncio.run(_sdk_once(args.llm, args.tokens))
        asyncio.run(_sdk_once(args.llm, args.warmup_tokens, fast=True))
        result["fast"] = asyncio.run(_sdk_once(args.llm, args.tokens, fast=True))
    emit(result)


if __name__ == "__main__":
    main()
