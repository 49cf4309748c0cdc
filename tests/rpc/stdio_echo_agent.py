"""Test helper (not a test): a JSON-RPC echo server on stdio, run as a subprocess by
test_rpc_stdio.py.  It is deliberately noisy on "stdout" to prove none of it reaches the
protocol stream.

    python stdio_echo_agent.py [--linger] [--grace SECONDS]

--linger: after the connection ends, keep serve() running (so only the signal grace or a
second signal ends the process).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import trio

from trio_acp.rpc import RequestError, open_peer
from trio_acp.stdio import serve_stdio


class EchoHandler:
    async def handle_request(self, method: str, params: Any) -> Any:
        if method == "echo":
            print("junk")  # a library print
            sys.__stdout__.write("raw-junk\n")  # type: ignore[union-attr]
            sys.__stdout__.flush()  # type: ignore[union-attr]
            os.system("echo child-junk")
            return params
        if method == "forever":
            await trio.sleep_forever()
        raise RequestError.method_not_found(method)

    async def handle_notification(self, method: str, params: Any) -> None:
        print(f"notification {method}")


def main() -> None:
    linger = "--linger" in sys.argv
    grace = float(sys.argv[sys.argv.index("--grace") + 1]) if "--grace" in sys.argv else 5.0

    async def serve(stream: trio.abc.Stream) -> None:
        print("banner: starting")  # e.g. an SDK banner
        async with open_peer(stream, EchoHandler()) as peer:
            await peer.wait_closed()
        print("connection ended", file=sys.stderr)
        if linger:
            await trio.sleep_forever()

    trio.run(lambda: serve_stdio(serve, grace=grace))
    print("exited cleanly", file=sys.stderr)


if __name__ == "__main__":
    main()
