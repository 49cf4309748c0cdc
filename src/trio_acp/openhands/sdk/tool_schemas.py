"""The tools' JSON schemas, built once per action class instead of on every model call.

Each model call converts every tool to its OpenAI form (`ToolDefinition.to_openai_tool`),
and so does each token count before it (the condenser's): the SDK derives the schema from
the action's pydantic class every time (`Schema.to_mcp_schema`: `model_json_schema()`, then
its own rewriting), ~20-40 ms a call for the default tools here (bench/README.md,
"A reply without streaming"). A class's schema never changes once the class exists (the
SDK caches the classes it derives, with a risk or a summary field, per class), so
`install` keeps each class's result and hands out a deep copy (callers edit the schema
they get: `_prioritize_schema_fields` reorders it in place). An error is not kept: the
next call tries again. `TRIO_ACP_TOOL_SCHEMA_CACHE=0` leaves the SDK's own way (to measure
the difference in one sitting).
"""

from __future__ import annotations

import copy
import functools
import logging
import os
from collections.abc import Callable

from trio_acp.openhands.translate.shapes import JsonObject

log = logging.getLogger(__name__)

_INSTALLED = "_trio_acp_cached"
_schemas: dict[type, JsonObject] = {}  # the SDK's JSON schema of each class


def install() -> None:
    """Cache `Schema.to_mcp_schema` per class (call once the SDK is imported). Idempotent."""
    from openhands.sdk.tool.schema import Schema

    method = Schema.__dict__.get("to_mcp_schema")
    if not isinstance(method, classmethod):
        log.warning("the SDK's Schema.to_mcp_schema changed; tool schemas are not cached")
        return
    if getattr(method.__func__, _INSTALLED, False):
        return
    original: Callable[[type], JsonObject] = method.__func__

    @functools.wraps(original)
    def to_mcp_schema(cls: type) -> JsonObject:
        # Read per call, not at the import: a warm server's child takes its launcher's
        # environment after the import (warm.py).
        if os.environ.get("TRIO_ACP_TOOL_SCHEMA_CACHE") == "0":
            return original(cls)
        schema = _schemas.get(cls)
        if schema is None:
            # Two threads may build it at once: the first kept wins (setdefault is atomic).
            schema = _schemas.setdefault(cls, original(cls))
        return copy.deepcopy(schema)

    setattr(to_mcp_schema, _INSTALLED, True)
    Schema.to_mcp_schema = classmethod(to_mcp_schema)  # type: ignore[method-assign,assignment]


def cached_classes() -> int:
    """How many classes' schemas are kept (for the tests)."""
    return len(_schemas)
