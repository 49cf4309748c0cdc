"""Checking JSON-RPC frames against the official ACP v1 JSON Schema.

The schema comes from the official npm package `@agentclientprotocol/sdk`
(`schema/v1/schema.json`), installed by `scripts/dev` into `tests/js/node_modules`;
`ACP_SCHEMA_JSON` points elsewhere. It is never vendored: the check is against the
registry's artifact, not our copy of it.

Unstable methods the agent serves (`trio_acp.schema.unstable`, e.g. `session/fork`) are
checked against the same package's `schema.unstable.json`, next to the stable one.

`FrameChecker` follows one connection from one side: it remembers the method of every
request so that it can check the matching response's `result` against the right type.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from .. import schema
from ..schema.unstable import UNSTABLE_AGENT_METHODS

_REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_SCHEMA_PATH = (
    _REPO_ROOT / "tests/js/node_modules/@agentclientprotocol/sdk/schema/v1/schema.json"
)


def official_schema_path() -> Path:
    path = Path(os.environ.get("ACP_SCHEMA_JSON") or DEFAULT_SCHEMA_PATH)
    if not path.is_file():
        raise FileNotFoundError(
            f"the official ACP schema is not at {path}: run `scripts/dev test` (it runs "
            "`npm ci` in tests/js) or set ACP_SCHEMA_JSON"
        )
    return path


@cache
def _validators(unstable: bool = False) -> tuple[Any, dict[str, Any]]:
    import jsonschema

    path = official_schema_path()
    if unstable:
        path = path.with_name("schema.unstable.json")
    document = json.loads(path.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(document)
    return cls, document


@cache
def _validator_for(type_name: str) -> Any:
    cls, document = _validators()
    if type_name not in document["$defs"]:
        # Not a stable type: an unstable method's, defined by the unstable schema only.
        cls, document = _validators(unstable=True)
    # The whole document as the root, so that every `#/$defs/...` reference resolves.
    # The root's own anyOf (any ACP message) would apply next to the $ref: drop it.
    root = {k: v for k, v in document.items() if k in ("$schema", "$defs")}
    return cls({**root, "$ref": f"#/$defs/{type_name}"})


def validate_type(type_name: str, value: Any) -> list[str]:
    """Errors (empty when valid) of `value` against `$defs/<type_name>`: the stable
    schema's, else the unstable one's (an unstable variant or field the agent sends to a
    client that opted in, e.g. `plan_update`; the tests of each check the opt-in)."""
    errors = _errors(_validator_for(type_name), type_name, value)
    if errors and type_name in _validators(unstable=True)[1]["$defs"]:
        if not _errors(_unstable_validator_for(type_name), type_name, value):
            return []
    return errors


def _errors(validator: Any, type_name: str, value: Any) -> list[str]:
    return [
        f"{type_name}: {'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(value)
    ]


@cache
def _unstable_validator_for(type_name: str) -> Any:
    cls, document = _validators(unstable=True)
    root = {k: v for k, v in document.items() if k in ("$schema", "$defs")}
    return cls({**root, "$ref": f"#/$defs/{type_name}"})


def _spec(method: str) -> schema.MethodSpec | None:
    return (
        schema.AGENT_METHODS.get(method)
        or UNSTABLE_AGENT_METHODS.get(method)
        or schema.CLIENT_METHODS.get(method)
    )


class FrameChecker:
    """Checks frames one side *sends*; feed it the frames it receives too, for ids."""

    def __init__(self) -> None:
        self._requests_in: dict[Any, str] = {}  # id → method, requests the sender answers
        self.errors: list[str] = []
        self.checked = 0

    def received(self, frame: dict[str, Any]) -> None:
        if "method" in frame and "id" in frame:
            self._requests_in[frame["id"]] = frame["method"]

    def sent(self, frame: dict[str, Any]) -> list[str]:
        errors: list[str] = []
        if frame.get("jsonrpc") != "2.0":
            errors.append(f"not JSON-RPC 2.0: {frame!r:.200}")
        method = frame.get("method")
        if isinstance(method, str):
            spec = _spec(method)
            if spec is not None:
                errors += validate_type(spec.params.__name__, frame.get("params"))
        elif "id" in frame:
            request_method = self._requests_in.pop(frame["id"], None)
            if "error" in frame:
                errors += validate_type("Error", frame["error"])
            elif request_method is not None:
                spec = _spec(request_method)
                if spec is not None and spec.result is not None:
                    errors += validate_type(spec.result.__name__, frame.get("result"))
        self.checked += 1
        self.errors += errors
        return errors
