"""After the SDK import, its objects are collected once and frozen (sdk.settle_collector):
the first code after the import no longer pays a full collection walking them all (a new
process's first session/list paid 0.3-1.2 s for it: bench/README.md "Big histories")."""

from __future__ import annotations

import gc
import sys

from _inprocess import loader


async def test_the_sdk_import_leaves_its_objects_frozen():
    await loader().get()
    # The import's objects (~470,000) are out of the collector's generations ...
    assert gc.get_freeze_count() > 100_000
    module = sys.modules["openhands.sdk"].__dict__
    assert not any(o is module for o in gc.get_objects(generation=2))
    # ... and alive as before: freezing frees nothing and drops nothing.
    assert sys.modules["openhands.sdk"].LLM is not None
