"""Local SDK conversation vs the same conversation on an OpenHands agent-server.

    python -m bench remote [--tokens 2000] [--runs 3] [--cancels 10]

Both sides run the same agent (trio-acp's tools, `NeverConfirm`) against the scripted model
and hand every token to a Trio task through the session's `ThreadBridge`, as a session does:

- local:  `LocalConversation.arun()` on a `LoopThread` (how sessions run it), cancelled with
          `interrupt()` until the run is over (session.py's `_interrupt_until_done`);
- remote: `RemoteConversationDriver` (src/trio_acp/openhands/backends/remote.py) on a real
          `openhands-agent-server` on 127.0.0.1 (`trio_acp.testing.agent_server`), cancelled
          with `run(cancel_event)` (the server's interrupt + stopping the terminal's commands).

Figures, one run of both (medians over --runs; cancel p50/p99 over --cancels):

- streamed reply, burst (`long` scenario, --tokens one-token chunks as fast as the scripted
  model sends them): time to the first token, and per-token time (first → last token
  received in Trio / (tokens - 1));
- streamed reply, paced (`slow` scenario, --paced chunks --pace-ms apart, like a real model):
  time to the first token, and how much later than the pace each token arrives;
- cancel mid-stream (`slow` scenario): cancel → run over, p50/p99;
- one REST round trip to the server (p50 of 50);
- and remote/local ratios. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from typing import Any

import trio

from trio_acp.openhands.backends.agent_server_config import AgentServerTarget
from trio_acp.openhands.backends.loop_thread import LoopThread, wait_done
from trio_acp.openhands.backends.remote import RemoteConversationDriver
from trio_acp.openhands.sessions.bridge import ThreadBridge
from trio_acp.testing import ScriptedLLM, fast_llm_kwargs, scenario_prompt
from trio_acp.testing.agent_server import AgentServer

from .agent_common import latency_summary


class Tokens:
    """The Trio side: counts tokens off the bridge, notes first/last arrival times."""

    def __init__(self) -> None:
        self.bridge = ThreadBridge()
        self.reset()

    def reset(self) -> None:
        self.count = 0
        self.first: float | None = None
        self.last: float | None = None
        self.arrived = trio.Event()
        self.want = 1

    def post(self, chunk: Any) -> None:  # any thread
        self.bridge.post(chunk)

    async def pump(self) -> None:
        while True:
            batch = await self.bridge.receive_batch()
            now = time.perf_counter()
            for chunk in batch:
                if getattr(chunk, "choices", None) and chunk.choices[0].delta.content:
                    self.count += 1
                    self.first = self.first or now
                    self.last = now
            if self.count >= self.want:
                self.arrived.set()


def _message(sdk: Any, text: str) -> Any:
    return sdk.Message(role="user", content=[sdk.TextContent(text=text)])


class Local:
    def __init__(self, sdk: Any, agent: Any, tokens: Tokens, workdir: str) -> None:
        self.sdk = sdk
        self.loop = LoopThread("bench-local-run")
        self.conv = sdk.Conversation(
            agent=agent,
            workspace=workdir,
            persistence_dir=None,
            visualizer=None,
            token_callbacks=[tokens.post],
        )
        self.conv.set_confirmation_policy(sdk.NeverConfirm())

    async def send(self, text: str) -> None:
        await trio.to_thread.run_sync(self.conv.send_message, _message(self.sdk, text))

    async def run(self, cancel: trio.Event | None = None) -> None:
        fut = self.loop.submit(self.conv.arun)
        async with trio.open_nursery() as nursery:

            async def on_cancel() -> None:
                await cancel.wait()
                delay = 0.02
                while not fut.done():
                    await trio.to_thread.run_sync(self.conv.interrupt)
                    with trio.move_on_after(delay):
                        await wait_done(fut)
                    delay = min(delay * 2, 0.5)

            if cancel is not None:
                nursery.start_soon(on_cancel)
            await wait_done(fut)
            nursery.cancel_scope.cancel()

    async def close(self) -> None:
        await trio.to_thread.run_sync(self.conv.close)
        self.loop.stop()


class Remote:
    def __init__(self, driver: RemoteConversationDriver, sdk: Any) -> None:
        self.driver, self.sdk = driver, sdk

    async def send(self, text: str) -> None:
        await self.driver.send_message(_message(self.sdk, text))

    async def run(self, cancel: trio.Event | None = None) -> None:
        await self.driver.run(cancel)

    async def close(self) -> None:
        await self.driver.close()


async def _stream(
    side: Any, tokens: Tokens, n: int, runs: int, pace_ms: float = 0.0
) -> dict[str, float]:
    """Per-token figures; with `pace_ms` the model sends a chunk every `pace_ms` and the
    per-token figure is what arrives later than that pace."""
    firsts, per_token = [], []
    for _ in range(runs + 1):  # the first is a warm-up
        tokens.reset()
        tokens.want = n
        if pace_ms:
            await side.send(scenario_prompt("slow", chunks=n, delay_ms=pace_ms))
        else:
            await side.send(scenario_prompt("long", tokens=n))
        start = time.perf_counter()
        await side.run()
        await tokens.arrived.wait()
        assert tokens.first is not None and tokens.last is not None
        firsts.append(tokens.first - start)
        per_token.append((tokens.last - tokens.first) / max(1, tokens.count - 1) - pace_ms / 1000)
    return {
        "first_token_ms": statistics.median(firsts[1:]) * 1000,
        "per_token_us": statistics.median(per_token[1:]) * 1e6,
    }


async def _cancels(side: Any, tokens: Tokens, count: int) -> dict[str, Any]:
    latencies = []
    for _ in range(count):
        tokens.reset()
        tokens.want = 5
        cancel = trio.Event()
        await side.send(scenario_prompt("slow", chunks=400, delay_ms=20))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(side.run, cancel)
            await tokens.arrived.wait()
            start = time.perf_counter()
            cancel.set()
        latencies.append(time.perf_counter() - start)
    return latency_summary(latencies)


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    from trio_acp.openhands.sdk import build_agent, import_sdk

    sdk = import_sdk()
    results: dict[str, Any] = {}
    with ScriptedLLM() as llm, AgentServer() as server, tempfile.TemporaryDirectory() as workdir:

        def agent() -> Any:
            return build_agent(sdk, sdk.LLM(**fast_llm_kwargs(llm.base_url, timeout=60)))

        async with trio.open_nursery() as nursery:
            tokens = Tokens()
            nursery.start_soon(tokens.pump)

            local = Local(sdk, agent(), tokens, workdir)
            results["local"] = await _stream(local, tokens, args.tokens, args.runs)
            results["local"]["paced"] = await _stream(
                local, tokens, args.paced, args.runs, args.pace_ms
            )
            results["local"]["cancel"] = await _cancels(local, tokens, args.cancels)
            await local.close()

            target = AgentServerTarget(url=server.url, api_key=server.api_key)
            driver = await RemoteConversationDriver.open(
                sdk,
                target,
                agent(),
                working_dir=str(server.workspace),
                on_event=lambda event: None,
                on_token=tokens.post,
                confirmation_policy=sdk.NeverConfirm(),
            )
            remote = Remote(driver, sdk)
            results["remote"] = await _stream(remote, tokens, args.tokens, args.runs)
            results["remote"]["paced"] = await _stream(
                remote, tokens, args.paced, args.runs, args.pace_ms
            )
            results["remote"]["cancel"] = await _cancels(remote, tokens, args.cancels)
            trips = [await driver.measure_round_trip() for _ in range(50)]
            results["remote"]["round_trip_ms"] = statistics.median(trips) * 1000
            await remote.close()
            nursery.cancel_scope.cancel()

    lo, re = results["local"], results["remote"]
    results["ratios"] = {
        "first_token": re["first_token_ms"] / lo["first_token_ms"],
        "per_token": re["per_token_us"] / lo["per_token_us"],
        "paced_first_token": re["paced"]["first_token_ms"] / lo["paced"]["first_token_ms"],
        "paced_per_token": re["paced"]["per_token_us"] / max(1e-9, lo["paced"]["per_token_us"]),
        "cancel_p50": re["cancel"]["p50_ms"] / lo["cancel"]["p50_ms"],
        "cancel_p99": re["cancel"]["p99_ms"] / lo["cancel"]["p99_ms"],
    }
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench remote",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tokens", type=int, default=2000, help="tokens per streamed reply (2000)")
    parser.add_argument(
        "--runs", type=int, default=3, help="timed streamed replies per side, after a warm-up (3)"
    )
    parser.add_argument("--paced", type=int, default=200, help="chunks of the paced reply (200)")
    parser.add_argument(
        "--pace-ms", type=float, default=10.0, help="the paced reply's time between chunks (10 ms)"
    )
    parser.add_argument("--cancels", type=int, default=10, help="cancels per side (10)")
    args = parser.parse_args(argv)
    results = trio.run(bench, args)
    lo, re, ratio = results["local"], results["remote"], results["ratios"]
    print(f"{'':24}{'local':>12}{'agent-server':>14}{'ratio':>8}")
    print(
        f"{'burst: first token (ms)':24}{lo['first_token_ms']:12.1f}{re['first_token_ms']:14.1f}{ratio['first_token']:8.2f}"
    )
    print(
        f"{'burst: per token (µs)':24}{lo['per_token_us']:12.1f}{re['per_token_us']:14.1f}{ratio['per_token']:8.2f}"
    )
    lp, rp = lo["paced"], re["paced"]
    print(
        f"{'paced: first token (ms)':24}{lp['first_token_ms']:12.1f}{rp['first_token_ms']:14.1f}{ratio['paced_first_token']:8.2f}"
    )
    print(
        f"{'paced: late/token (µs)':24}{lp['per_token_us']:12.1f}{rp['per_token_us']:14.1f}{ratio['paced_per_token']:8.2f}"
    )
    print(
        f"{'cancel p50 (ms)':24}{lo['cancel']['p50_ms']:12.1f}{re['cancel']['p50_ms']:14.1f}{ratio['cancel_p50']:8.2f}"
    )
    print(
        f"{'cancel p99 (ms)':24}{lo['cancel']['p99_ms']:12.1f}{re['cancel']['p99_ms']:14.1f}{ratio['cancel_p99']:8.2f}"
    )
    print(f"REST round trip p50: {re['round_trip_ms']:.1f} ms")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
