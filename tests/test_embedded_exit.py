"""An application embedding trio-acp leaves right after its session while the first model
call's imports are still being warmed in a thread the close abandoned: the interpreter's
exit waits for that import to end (sdk/abandoned_warm_ups.py). A thread frozen mid-import
by the teardown held that module's lock, and the teardown's own finalizers import: the
README's library example hung on exit that way, now and then.

The warm-up is held inside an import of our own (`slow_warm`) until the process is past
`trio.run` and in its exit hooks; the last hook to run says whether that import had ended.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SLOW_MODULE = """
import os, pathlib, time
here = pathlib.Path(os.environ["EXIT_TEST_DIR"])
(here / "started").touch()
while not (here / "go").exists():
    time.sleep(0.2)
(here / "imported").touch()
"""

SCRIPT = """
import atexit, os, pathlib, sys, time

here = pathlib.Path(os.environ["EXIT_TEST_DIR"])
# The first hook registered is the last to run: after trio-acp's.
atexit.register(lambda: (here / "verdict").write_text(str((here / "imported").exists())))

import trio
from trio_acp import openhands, schema, testing
from trio_acp.openhands import sdk

sdk.FIRST_CALL_IMPORTS = ("slow_warm", *sdk.FIRST_CALL_IMPORTS)


class Client:
    async def session_update(self, params):
        pass

    async def request_permission(self, params):
        return schema.RequestPermissionResponse(outcome=schema.CancelledPermissionOutcome())


async def main():
    async with testing.ScriptedLLM() as llm:
        async with openhands.open_openhands(Client(), env={**os.environ, **llm.env()}) as agent:
            await agent.initialize(protocol_version=1)
            sid = (await agent.new_session(cwd=os.getcwd(), mcp_servers=[])).session_id
            reply = await agent.prompt(session_id=sid, prompt=[schema.TextContent(text="Hi")])
            assert reply.stop_reason == "end_turn"
            while not (here / "started").exists():
                await trio.sleep(0.05)


trio.run(main)
# Registered after trio-acp's hook, so run before it: the held import may end now.
atexit.register(lambda: (here / "go").touch())
"""


@pytest.mark.timeout(300)
def test_leaving_waits_for_a_warm_up_import_under_way(tmp_path):
    (tmp_path / "slow_warm.py").write_text(textwrap.dedent(SLOW_MODULE), encoding="utf-8")
    script = tmp_path / "app.py"
    script.write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ)
    env.update(
        HOME=str(home),
        OPENHANDS_PERSISTENCE_DIR=str(home / ".openhands"),
        TRIO_ACP_PUBLIC_SKILLS="0",
        EXIT_TEST_DIR=str(tmp_path),
        PYTHONPATH=os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")]),
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "started").exists()
    verdict = (tmp_path / "verdict").read_text()
    assert verdict == "True", "the process left while a warm-up import was under way"
