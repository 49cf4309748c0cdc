"""Benchmark: model switching and session/fork on the OpenHands agent, in process.

    python -m bench.agent_switch_fork [--switches N] [--forks N]

Prints figures, asserts nothing. One agent on the scripted model (127.0.0.1), driven over
an in-memory connection; `TRIO_ACP_MODELS` gives it two more models.

switch  `session/set_config_option` `model`, alternating between the two, round trip
        (the SDK's `switch_llm` on a worker thread included).
fork    `session/fork` of a live session with one turn, round trip: the SDK's copy, then
        the fork's start. Twice: when the parent is on the default model (nothing to
        re-apply), and when it is on another one (the fork's model is switched right after
        it starts, which waits for the SDK's state lock held by the fork's tool warm-up).
copy    the SDK's `Conversation.fork` copy alone (`Session.fork_conversation`).
new     `session/new`, for comparison.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid

import trio

from trio_acp import schema
from trio_acp.openhands.agent import open_openhands_agent
from trio_acp.openhands.sdk import SdkLoader
from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.pair import open_in_memory_pair


class _Client:
    async def session_update(self, params):
        pass

    async def request_permission(self, params):
        raise AssertionError("no permission requests here")


async def _timed(fn, n):
    out = []
    for i in range(n):
        start = time.perf_counter()
        await fn(i)
        out.append(time.perf_counter() - start)
    return out


def _line(name, samples):
    ms = sorted(s * 1000 for s in samples)
    print(
        f"{name:<34} median {statistics.median(ms):8.1f} ms   max {ms[-1]:8.1f} ms   (n={len(ms)})"
    )


async def _main(url, home, ws, switches, forks):
    env = dict(os.environ, **scripted_env(url))
    env.update(
        OPENHANDS_PERSISTENCE_DIR=home,
        TRIO_ACP_MODELS="openai/a,openai/b",
        TRIO_ACP_DEFAULT_MODE="always-approve",
    )
    async with open_openhands_agent(env=env, sdk_loader=SdkLoader()) as agent:
        async with open_in_memory_pair(agent, _Client()) as (_, conn):
            api = conn.agent
            await api.initialize(protocol_version=1)
            sid = (await api.new_session(cwd=ws, mcp_servers=[])).session_id
            await api.prompt(
                session_id=sid, prompt=[schema.TextContent(text=scenario_prompt("echo", "hi"))]
            )
            _line("new", await _timed(lambda i: api.new_session(cwd=ws, mcp_servers=[]), forks))
            _line(
                "switch",
                await _timed(
                    lambda i: api.set_session_config_option(
                        session_id=sid, config_id="model", value=("openai/a", "openai/b")[i % 2]
                    ),
                    switches,
                ),
            )
            session = agent._sessions[uuid.UUID(sid)]
            _line("copy", await _timed(lambda i: session.fork_conversation(uuid.uuid4()), forks))
            await api.set_session_config_option(
                session_id=sid, config_id="model", value="openai/scripted"
            )
            _line(
                "fork (parent on the default model)",
                await _timed(lambda i: api.fork_session(session_id=sid, cwd=ws), forks),
            )
            await api.set_session_config_option(session_id=sid, config_id="model", value="openai/a")
            _line(
                "fork (parent on another model)",
                await _timed(lambda i: api.fork_session(session_id=sid, cwd=ws), forks),
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--switches", type=int, default=20)
    parser.add_argument("--forks", type=int, default=5)
    args = parser.parse_args()
    with (
        ScriptedLLM() as llm,
        tempfile.TemporaryDirectory() as home,
        tempfile.TemporaryDirectory() as ws,
    ):
        trio.run(_main, llm.base_url, home, os.path.realpath(ws), args.switches, args.forks)


if __name__ == "__main__":
    main()
