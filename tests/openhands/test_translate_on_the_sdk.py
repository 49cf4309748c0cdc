"""The translation tests of the fast layer, run on the SDK's own classes.

`test_translate.py`, `test_subagent_translate.py` and `test_confirm.py` build their events from
`_sdk_standins.py`, so they need no SDK import (tests/conftest.py, `FAST_LAYER`). This
module loads a second copy of each with the real classes (`_sdk_classes.py`) in the
stand-ins' place and collects its tests: every translation test also passes on what the
SDK really sends, and a stand-in that drifts from its SDK class fails here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import _sdk_classes

HERE = Path(__file__).resolve().parent
#: The modules of the fast layer whose tests are run again here, in import order (a later
#: one may import an earlier one's helpers, and gets the copy on the real classes).
ON_THE_SDK = ("test_translate", "test_subagent_translate", "test_confirm")


def _load_on_the_sdk() -> dict[str, ModuleType]:
    swapped = ("_sdk_standins", *ON_THE_SDK)
    saved = {name: sys.modules.get(name) for name in swapped}
    sys.modules["_sdk_standins"] = _sdk_classes
    copies: dict[str, ModuleType] = {}
    try:
        for name in ON_THE_SDK:
            spec = importlib.util.spec_from_file_location(f"{name}_on_the_sdk", HERE / f"{name}.py")
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            copies[name] = sys.modules[name] = module
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return copies


def _collect() -> None:
    for copy in _load_on_the_sdk().values():
        for name, obj in vars(copy).items():
            if name.startswith("test_") and callable(obj):
                assert name not in globals(), f"two translation tests are named {name}"
                globals()[name] = obj


_collect()


def test_the_copies_run_on_the_sdks_classes() -> None:
    for copy in _load_on_the_sdk().values():
        for name in _sdk_classes.__all__:
            if hasattr(copy, name):
                assert getattr(copy, name) is getattr(_sdk_classes, name), name


def test_each_stand_in_has_its_sdk_classs_name_bases_and_fields() -> None:
    from importlib.metadata import version

    import _sdk_standins

    sdk = f"openhands-sdk {version('openhands-sdk')}, litellm {version('litellm')}"
    assert _sdk_standins.__all__ == _sdk_classes.__all__
    for name in _sdk_standins.__all__:
        stand_in, real = getattr(_sdk_standins, name), getattr(_sdk_classes, name)
        real_bases = {cls.__name__ for cls in real.__mro__}
        own_bases = {
            cls.__name__ for cls in stand_in.__mro__ if cls.__module__ == _sdk_standins.__name__
        } - {"_Model"}
        assert own_bases <= real_bases, f"{sdk}: {name}'s bases are {sorted(real_bases)}"
        if real.__module__.startswith("openhands."):
            # litellm's chunks set most attributes in __init__, not as fields
            assert set(stand_in.model_fields) == set(real.model_fields), (
                f"{sdk}: {name}'s fields are {sorted(real.model_fields)}"
            )
