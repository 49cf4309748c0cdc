"""Checking an agent's frames against the official ACP v2 (draft) JSON Schema.

The v2 twin of `wire_check` (same package, `schema/v2/schema.json` next to v1's, or
``ACP_V2_SCHEMA_JSON``).  The schema names each method's types itself (``x-method``,
``x-side``), so the checker needs no table of its own.  Besides the shapes it checks
that the agent calls only methods a v2 client serves: v2 has no ``fs/*`` or
``terminal/*`` on the client (their v1 names are errors here).
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from .wire_check import official_schema_path

__all__ = ["V2FrameChecker", "v2_schema_path", "validate_v2_type"]


def v2_schema_path() -> Path:
    own = os.environ.get("ACP_V2_SCHEMA_JSON")
    if own:
        return Path(own)
    return official_schema_path().parent.parent / "v2" / "schema.json"


@cache
def _document(path: Path | None = None) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((path or v2_schema_path()).read_text(encoding="utf-8"))
    return document


@cache
def _methods(path: Path | None = None) -> dict[str, dict[str, str]]:
    """method -> {"params": type, "result": type, "side": who serves it}."""
    out: dict[str, dict[str, str]] = {}
    for name, definition in _document(path)["$defs"].items():
        method = definition.get("x-method")
        if not isinstance(method, str):
            continue
        entry = out.setdefault(method, {"side": definition.get("x-side", "")})
        entry["result" if name.endswith("Response") else "params"] = name
    return out


@cache
def _defined(type_name: str, tag: str, path: Path | None = None) -> frozenset[str]:
    """The values of `tag` the schema defines for the variants of `type_name`."""
    variants = _document(path)["$defs"][type_name].get("anyOf", [])
    return frozenset(
        v["properties"][tag]["const"]
        for v in variants
        if "const" in v.get("properties", {}).get(tag, {})
    )


def _open_enum_errors(params: Any, path: Path | None) -> list[str]:
    """The schema lets any value through its `other` variants; the draft reserves the
    values that do not begin with `_` for future versions (extensibility.mdx)."""
    update = params.get("update") if isinstance(params, dict) else None
    if not isinstance(update, dict):
        return []
    errors = []
    for tag, value, type_name in (
        ("sessionUpdate", update.get("sessionUpdate"), "SessionUpdate"),
        ("state", update.get("state"), "StateUpdate"),
        ("stopReason", update.get("stopReason"), "IdleStateUpdate"),
    ):
        if type_name != "SessionUpdate" and update.get("sessionUpdate") != "state_update":
            continue
        if isinstance(value, str) and not value.startswith("_"):
            if value not in _defined(type_name, tag, path):
                errors.append(f"v2 {type_name}: {tag} {value!r} is not defined by the schema")
    return errors


@cache
def _validator_for(type_name: str, path: Path | None = None) -> Any:
    import jsonschema

    document = _document(path)
    cls = jsonschema.validators.validator_for(document)
    root = {k: v for k, v in document.items() if k in ("$schema", "$defs")}
    return cls({**root, "$ref": f"#/$defs/{type_name}"})


def validate_v2_type(type_name: str, value: Any, path: Path | None = None) -> list[str]:
    """Errors (empty when valid) of `value` against the v2 schema's `$defs/<type_name>`
    (the schema at `path`, default `v2_schema_path()`)."""
    return [
        f"v2 {type_name}: {'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in _validator_for(type_name, path).iter_errors(value)
    ]


class V2FrameChecker:
    """Checks the frames an agent *sends* on a v2 connection; feed it the frames it
    receives too (`received`), so that each result is checked against its method."""

    def __init__(self, schema_path: Path | None = None) -> None:
        self._path = schema_path
        self._requests_in: dict[str, str] = {}  # id -> method, the requests the agent answers
        self.errors: list[str] = []
        self.checked = 0

    def received(self, frame: dict[str, Any]) -> None:
        if "method" in frame and "id" in frame:
            self._requests_in[json.dumps(frame["id"])] = frame["method"]

    def sent(self, frame: dict[str, Any]) -> list[str]:
        errors: list[str] = []
        if frame.get("jsonrpc") != "2.0":
            errors.append(f"not JSON-RPC 2.0: {frame!r:.200}")
        method = frame.get("method")
        if isinstance(method, str):
            spec = _methods(self._path).get(method)
            if spec is None or spec["side"] not in ("client", "protocol"):
                if not method.startswith("_"):
                    errors.append(f"the agent called {method!r}, which a v2 client does not serve")
            elif "params" in spec:
                errors += validate_v2_type(spec["params"], frame.get("params"), self._path)
                if method == "session/update":
                    errors += _open_enum_errors(frame.get("params"), self._path)
        elif "id" in frame:
            request_method = self._requests_in.pop(json.dumps(frame["id"]), None)
            if "error" in frame:
                errors += validate_v2_type("Error", frame["error"], self._path)
            elif request_method is not None:
                spec = _methods(self._path).get(request_method)
                if spec is not None and "result" in spec:
                    errors += validate_v2_type(spec["result"], frame.get("result"), self._path)
        self.checked += 1
        self.errors += errors
        return errors
