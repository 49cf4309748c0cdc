"""Build hook: an editable install imports the checkout's `conformance/` as `trio_acp_conformance`.

A wheel maps the folder to the package name with `sources` (pyproject.toml).  Hatchling's
editable installs cannot rename a folder (they put directories on `sys.path`), so for those this
hook adds one file to the editable wheel: a `trio_acp_conformance/__init__.py` whose `__path__`
is the checkout's `conformance/` folder, so its modules are imported from the checkout, live.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SHIM = '''\
"""The ACP conformance suite, imported from the checkout (editable install of trio-acp)."""

import os as _os

__path__ = [{folder!r}]
_init = _os.path.join(__path__[0], "__init__.py")
with open(_init, encoding="utf-8") as _f:
    exec(compile(_f.read(), _init, "exec"))
del _os, _init, _f
'''


class ConformanceEditableHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version != "editable":
            return
        self._tmp = tempfile.mkdtemp(prefix="trio-acp-build-")
        shim = os.path.join(self._tmp, "__init__.py")
        folder = os.path.join(os.path.abspath(self.root), "conformance")
        with open(shim, "w", encoding="utf-8") as f:
            f.write(SHIM.format(folder=folder))
        build_data["force_include_editable"][shim] = "trio_acp_conformance/__init__.py"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
