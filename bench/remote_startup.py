"""Start-up with an agent-server: a fresh `trio-acp` process's first `session/new` answer.

    python -m bench remote-startup [--runs 3]

Alternating runs of a fresh `python -m trio_acp` (local) and `python -m trio_acp
--agent-server URL` (remote; a real `openhands-agent-server` on 127.0.0.1 started once,
`trio_acp.testing.agent_server`), both on the scripted model:

- spawn → `initialize` answered;
- spawn → first `session/new` answered (sent right after `initialize`: it waits for the
  background SDK import, `src/trio_acp/openhands/sdk/__init__.py`);
- a second `session/new` in the same process (the session's own cost, SDK loaded);
- and, in a fresh interpreter, the import time of `openhands.sdk` and of the `litellm` it
  imports (`python -X importtime`): what a remote session cannot avoid, since the SDK's
  `RemoteConversation` and event classes come with it.

Prints medians and remote/local ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from trio_acp.testing import ScriptedLLM, scripted_env
from trio_acp.testing.agent_server import AgentServer
from trio_acp.testing.raw_agent import RawAgent


def _one(env: dict[str, str], argv: list[str], cwd: str) -> dict[str, float]:
    start = time.perf_counter()
    with RawAgent.spawn(env, argv=argv, stderr=subprocess.DEVNULL) as agent:
        agent.initialize()
        initialized = time.perf_counter()
        agent.new_session(cwd)
        first = time.perf_counter()
        agent.new_session(cwd)
        second = time.perf_counter()
    return {
        "initialize_s": initialized - start,
        "first_session_new_s": first - start,
        "second_session_new_s": second - first,
    }


def _import_times(env: dict[str, str]) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import openhands.sdk"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    times: dict[str, float] = {}
    for line in result.stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s?(\s*)(\S+)$", line)
        if found and found.group(3) in ("openhands.sdk", "litellm") and found.group(3) not in times:
            times[found.group(3)] = int(found.group(1)) / 1e6
    return {f"import_{name}_s": seconds for name, seconds in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench remote-startup",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per side (3)")
    args = parser.parse_args(argv)
    with ScriptedLLM() as llm, AgentServer() as server, tempfile.TemporaryDirectory() as home:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=home,
            TRIO_ACP_AGENT_SERVER_API_KEY=server.api_key,
            TRIO_ACP_WARM="0",
        )
        cwd = str(server.workspace)
        base = [sys.executable, "-m", "trio_acp"]
        runs: dict[str, list[dict[str, float]]] = {"local": [], "remote": []}
        for _ in range(args.runs):
            runs["local"].append(_one(env, base, cwd))
            runs["remote"].append(_one(env, [*base, "--agent-server", server.url], cwd))
        imports = _import_times(env)
    out: dict[str, Any] = {"runs": args.runs, **imports}
    for side, results in runs.items():
        for key in results[0]:
            out[f"{side}_{key}"] = round(statistics.median(r[key] for r in results), 3)
    for key in runs["local"][0]:
        out[f"ratio_{key}"] = round(out[f"remote_{key}"] / out[f"local_{key}"], 2)
    out["load_average"] = os.getloadavg()
    print(json.dumps(out, indent=2))
