"""What the tests under the official TypeScript client share: where it is, and their skip
marks when node or `@agentclientprotocol/sdk` (tests/js, installed by scripts/dev) is missing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JS_DIR = ROOT / "tests" / "js"
NODE = shutil.which("node")

#: `pytestmark` of a module whose tests run a client from tests/js.
NEEDS_TS_SDK = [
    pytest.mark.skipif(
        NODE is None, reason="node is not installed (needed for the official TypeScript SDK)"
    ),
    pytest.mark.skipif(
        not (JS_DIR / "node_modules" / "@agentclientprotocol" / "sdk").is_dir(),
        reason="@agentclientprotocol/sdk is not installed: run `scripts/dev lint` (it installs tests/js)",
    ),
]
