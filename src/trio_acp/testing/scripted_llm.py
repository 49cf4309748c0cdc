"""A scripted, OpenAI-compatible chat-completions server for offline tests, benchmarks and demos.

There is no API key and no internet where trio-acp is tested, so every test drives the *real*
litellm / OpenHands streaming path against this server on 127.0.0.1.

This module is the command-line entry and the one import for users; the parts live in
:mod:`.script` (replies, scenarios, what a scenario sees), :mod:`.script_file` (JSON scripts),
:mod:`.scenarios` (the built-in scenarios), :mod:`.openai_wire` (the wire format),
:mod:`.llm_server` (the HTTP server), :mod:`.critic_wire` (the critic's endpoint) and
:mod:`.llm_env` (pointing an agent at it).

Usage
=====

From sync code or pytest::

    with ScriptedLLM() as llm:
        llm.base_url            # "http://127.0.0.1:PORT/v1"
        ...                     # LLM(model="openai/scripted", base_url=llm.base_url, api_key="x", stream=True)
        llm.requests            # what the model saw (RequestRecord list, thread-safe snapshot)

From Trio: ``async with ScriptedLLM() as llm:`` (closing runs in a worker thread) and
``await llm.await_requests(n)``.

From another process (the agent under test as a subprocess)::

    python -m trio_acp.testing.scripted_llm --port 0 [--scenarios FILE.json]

prints the base URL on stdout line 1 and serves until killed (SIGTERM/SIGINT; or stdin EOF with
``--exit-on-stdin-close``).  ``llm.env()`` gives the environment variables a subprocess agent
reads (``TRIO_ACP_LLM_BASE_URL``, ``TRIO_ACP_LLM_MODEL``, ``TRIO_ACP_LLM_API_KEY`` plus the
OpenHands-style ``LLM_BASE_URL``/``LLM_MODEL``/``LLM_API_KEY`` and the litellm/OpenHands quiet
flags).

The server also plays the OpenHands critic (``POST .../classify``, e.g. ``{llm.url}/vllm``
as ``TRIO_ACP_CRITIC_URL``): a ``[critic:0.2,0.9]`` tag in a prompt scripts its scores, one
step per refinement (:mod:`.critic_wire`); ``llm.critic_requests`` logs what it was asked.
"""

from __future__ import annotations

import argparse
import io
import signal
import sys
import threading
import warnings
from collections.abc import Sequence
from typing import Any, cast

from trio_acp.testing.llm_env import (
    DEFAULT_MODEL,
    ENV_API_KEY,
    ENV_BASE_URL,
    ENV_MODEL,
    fast_llm_kwargs,
    scripted_env,
)
from trio_acp.testing.llm_server import RequestRecord, ScriptedLLM
from trio_acp.testing.openai_wire import openai_error_body
from trio_acp.testing.script import (
    FINISHED_TEXT,
    Reply,
    RequestContext,
    Scenario,
    ToolCall,
    Turn,
    message_text,
    parse_tags,
)
from trio_acp.testing.script_file import load_script_file

# ``python -m trio_acp.testing.scripted_llm`` imports this module through the package first;
# runpy then warns that it is already in sys.modules.  Harmless here: silence just that warning.
warnings.filterwarnings(
    "ignore",
    message=r"'trio_acp\.testing\.scripted_llm' found in sys\.modules",
    category=RuntimeWarning,
)

__all__ = [
    "DEFAULT_MODEL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "FINISHED_TEXT",
    "Reply",
    "RequestContext",
    "RequestRecord",
    "Scenario",
    "ScriptedLLM",
    "ToolCall",
    "Turn",
    "fast_llm_kwargs",
    "load_script_file",
    "main",
    "message_text",
    "openai_error_body",
    "parse_tags",
    "scripted_env",
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trio_acp.testing.scripted_llm",
        description="Serve a scripted OpenAI-compatible LLM; prints the base URL on stdout line 1.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port (default)")
    parser.add_argument("--scenarios", help="JSON file with extra scenarios/rules/default")
    parser.add_argument("--default", help="default scenario name (default: echo)")
    parser.add_argument("--model-name", default="scripted", help="name listed by /v1/models")
    parser.add_argument("--verbose", action="store_true", help="log requests to stderr")
    parser.add_argument(
        "--exit-on-stdin-close",
        action="store_true",
        help="also exit when stdin reaches EOF (the parent went away)",
    )
    parser.add_argument("--list", action="store_true", help="list scenario names and exit")
    args = parser.parse_args(argv)

    kwargs: dict[str, Any] = {
        "host": args.host,
        "port": args.port,
        "model_name": args.model_name,
        "verbose": args.verbose,
    }
    llm = (
        ScriptedLLM.from_file(args.scenarios, **kwargs) if args.scenarios else ScriptedLLM(**kwargs)
    )
    if args.default:
        llm.default = llm._resolve(args.default)
    if args.list:
        for name, sc in sorted(llm.scenarios.items()):
            print(f"{name}\t{sc.description}")
        return 0

    done = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with llm:
        print(llm.base_url, flush=True)
        if args.exit_on_stdin_close:

            def watch_stdin() -> None:
                stdin = cast(io.BufferedReader, sys.stdin.buffer)
                try:
                    while stdin.read1(65536):
                        pass
                except (OSError, ValueError):
                    pass
                done.set()

            threading.Thread(target=watch_stdin, daemon=True).start()
        while not done.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    from trio_acp.testing.scripted_llm import main as _main  # the package's copy of this module

    sys.exit(_main())
