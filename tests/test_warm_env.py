"""The import-time environment of a warm server (src/trio_acp/warm_env.py).

A warm child keeps what the server's SDK import computed from the server's environment, so
the key that picks a launch's server must cover every variable that import reads, and no
other (a variable read later may differ: the child takes the launcher's). The last test
records, in a fresh interpreter, every variable read while the warm server's `_load` runs,
and checks the list against it: an SDK or litellm upgrade that reads a new variable at
import time fails here instead of serving launches a server imported with other values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from trio_acp import warm_env

#: Read at import time, and left out on purpose (warm_env.py says why).
LEFT_OUT = {
    "TMPDIR",
    "TEMP",
    "TMP",
    "COLUMNS",
    "LINES",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "OPENHANDS_SUPPRESS_BANNER",
}

#: Runs `warm_server._load` with `os.environ` recording what is read, then prints it.
RECORD = """
import json, os, sys, traceback
reads = set()
Environ = type(os.environ)
getitem, contains = Environ.__getitem__, Environ.__contains__

def note(key):
    # fastmcp's settings list the whole environment and keep FASTMCP_* (a prefix of the key)
    if not any("pydantic_settings/sources" in f.filename for f in traceback.extract_stack(limit=6)):
        reads.add(key)

Environ.__getitem__ = lambda self, key: (note(key), getitem(self, key))[1]
Environ.__contains__ = lambda self, key: (note(key), contains(self, key))[1]
from trio_acp import warm_server
warm_server._load()
print(json.dumps(sorted(reads)))
"""


def test_the_key_follows_import_time_variables_only() -> None:
    base = {"HOME": "/h", "PATH": "/bin", "LLM_API_KEY": "k1", "TMPDIR": "/t1"}
    key = warm_env.server_key("fp", base)
    # Read after the import, or not kept by it: the same server.
    later = {**base, "PATH": "/usr/bin", "LLM_API_KEY": "k2", "TMPDIR": "/t2", "COLUMNS": "7"}
    assert warm_env.server_key("fp", later) == key
    # Read by the import: another server; so is another installation.
    assert warm_env.server_key("fp", {**base, "LITELLM_LOG": "DEBUG"}) != key
    assert warm_env.server_key("fp", {**base, "FASTMCP_LOG_LEVEL": "DEBUG"}) != key
    assert warm_env.server_key("fp", {**base, "PYTHONHASHSEED": "1"}) != key
    assert warm_env.server_key("other", base) != key
    # trio-acp sets LITELLM_LOCAL_MODEL_COST_MAP=True itself when it is unset.
    assert warm_env.server_key("fp", {**base, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}) == key
    assert warm_env.server_key("fp", {**base, "LITELLM_LOCAL_MODEL_COST_MAP": "False"}) != key


def test_hashes_name_the_differences_without_values() -> None:
    hashes = warm_env.import_hashes({"AZURE_OPENAI_AD_TOKEN": "secret-token", "PATH": "/bin"})
    assert set(hashes) == {"AZURE_OPENAI_AD_TOKEN", "LITELLM_LOCAL_MODEL_COST_MAP"}
    assert "secret-token" not in json.dumps(hashes)


@pytest.mark.timeout(400)  # one SDK import, which a loaded machine makes slow
def test_every_variable_the_import_reads_is_in_the_key() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    read = json.loads(
        subprocess.run(
            [sys.executable, "-c", RECORD],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=380,
        ).stdout.splitlines()[-1]
    )
    assert "LITELLM_LOCAL_MODEL_COST_MAP" in read  # the recording works
    missing = sorted(name for name in read if not warm_env.is_import_time(name))
    assert set(missing) <= LEFT_OUT, missing
