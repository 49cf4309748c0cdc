"""The SDK import's collector debt is paid in the import's thread (sdk.settle_collector).

Right after the import, the first code to allocate a little paid a full collection walking
its ~470,000 objects (0.4-0.5 s CPU here): a new process's first `session/list` or first
`session/new` (bench/README.md "Big histories"). Checked in a fresh process: the SDK is
imported once per test process, and whatever ran before would have paid the debt already.
"""

from __future__ import annotations

import os
import subprocess
import sys

# Long-lived objects about as many as a first list of 1,000 sessions makes, and enough to
# trigger the debt's full collection (20,000 are not).
PROBE = """
import gc, sys, trio
from trio_acp.openhands import sdk
trio.run(sdk.SdkLoader().get)
full = []
gc.callbacks.append(lambda phase, info: phase == "stop" and info["generation"] == 2 and full.append(1))
keep = [[i] for i in range(60_000)]
print(len(full))
"""


def test_the_first_allocations_after_the_sdk_import_pay_no_full_collection():
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "0"
