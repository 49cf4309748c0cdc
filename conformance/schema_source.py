"""The official ACP v1 JSON Schema, from the registries, and validation against it.

The suite never carries its own copy of the schema.  It looks, in order, at:

1. ``--schema PATH`` / ``$ACP_SCHEMA_JSON``;
2. the npm package installed in a trio-acp checkout (``tests/js/node_modules/
   @agentclientprotocol/sdk/schema/v1/schema.json``, put there by ``scripts/dev``);
3. a cache (``$XDG_CACHE_HOME/acp-conformance/``) filled by ``npm pack
   @agentclientprotocol/sdk@VERSION`` from the npm registry, when ``npm`` is on PATH.

Without a schema (or without ``jsonschema``) the schema checks are "not tested".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

#: The npm package (and version) whose schema/v1/schema.json is the reference.
NPM_PACKAGE = "@agentclientprotocol/sdk"
NPM_VERSION = "2.4.0"
_IN_PACKAGE = "package/schema/v1/schema.json"


class SchemaUnavailable(Exception):
    pass


def _checkout_path() -> Path | None:
    try:
        from trio_acp.testing.wire_check import DEFAULT_SCHEMA_PATH
    except ImportError:  # pragma: no cover - the suite ships with trio-acp
        return None
    return DEFAULT_SCHEMA_PATH


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "acp-conformance" / f"sdk-{NPM_VERSION}"


def _from_npm(target: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise SchemaUnavailable("npm is not on PATH to fetch the schema from the npm registry")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [npm, "pack", f"{NPM_PACKAGE}@{NPM_VERSION}", "--silent"],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0:
            raise SchemaUnavailable(f"npm pack failed: {proc.stderr.strip()[:300]}")
        tarballs = list(Path(tmp).glob("*.tgz"))
        if not tarballs:
            raise SchemaUnavailable("npm pack produced no tarball")
        with tarfile.open(tarballs[0]) as tar:
            member = tar.extractfile(_IN_PACKAGE)
            if member is None:
                raise SchemaUnavailable(f"{_IN_PACKAGE} is not in {tarballs[0].name}")
            data = member.read()
    out = target / "schema.json"
    out.write_bytes(data)
    return out


def locate_schema(explicit: str | None = None, *, allow_download: bool = True) -> Path:
    """The path of the official schema.json (see the module docstring for the order)."""
    for candidate in (explicit, os.environ.get("ACP_SCHEMA_JSON")):
        if candidate:
            path = Path(candidate)
            if not path.is_file():
                raise SchemaUnavailable(f"no schema at {path}")
            return path
    checkout = _checkout_path()
    if checkout is not None and checkout.is_file():
        return checkout
    cached = _cache_dir() / "schema.json"
    if cached.is_file():
        return cached
    if not allow_download:
        raise SchemaUnavailable(
            "the official schema is not installed (run scripts/dev, or pass --schema)"
        )
    return _from_npm(_cache_dir())


class SchemaValidator:
    """Validates values against ``$defs/<Type>`` of one schema document."""

    def __init__(self, path: Path) -> None:
        try:
            import jsonschema
        except ImportError as exc:  # pragma: no cover - a dev/extra dependency
            raise SchemaUnavailable("the jsonschema package is not installed") from exc
        self.path = path
        self.document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        self._cls = jsonschema.validators.validator_for(self.document)
        self._root = {k: v for k, v in self.document.items() if k in ("$schema", "$defs")}
        self._cache: dict[str, Any] = {}

    @property
    def defs(self) -> dict[str, Any]:
        return self.document.get("$defs", {})

    def has(self, type_name: str) -> bool:
        return type_name in self.defs

    def errors(self, type_name: str, value: Any) -> list[str]:
        validator = self._cache.get(type_name)
        if validator is None:
            validator = self._cls({**self._root, "$ref": f"#/$defs/{type_name}"})
            self._cache[type_name] = validator
        out = []
        for e in validator.iter_errors(value):
            where = "/".join(map(str, e.absolute_path)) or "<root>"
            out.append(f"{type_name} at {where}: {e.message[:200]}")
        return out

    @cache  # noqa: B019 - one validator per run
    def known_properties(self, type_name: str) -> frozenset[str]:
        """Every property name a value of this type may have at its root, over all variants."""
        names: set[str] = set()
        seen: set[int] = set()

        def walk(node: Any) -> None:
            if not isinstance(node, dict) or id(node) in seen:
                return
            seen.add(id(node))
            names.update((node.get("properties") or {}).keys())
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                walk(self.defs.get(ref.split("/")[-1]))
            for key in ("allOf", "anyOf", "oneOf"):
                for sub in node.get(key) or []:
                    walk(sub)
            for key in ("then", "else"):
                walk(node.get(key))

        walk(self.defs.get(type_name))
        return frozenset(names)


#: Methods whose params/result are unions in trio-acp's tables: the schema's own names.
_UNION_TYPES = {"elicitation/create": ("CreateElicitationRequest", "CreateElicitationResponse")}


def type_names(method: str, *, side: str) -> tuple[str | None, str | None]:
    """(params type, result type) names of an ACP method, from trio-acp's method tables.

    ``side`` is "agent" for methods the agent serves, "client" for methods it calls.
    """
    from trio_acp import schema

    if method in _UNION_TYPES:
        return _UNION_TYPES[method]
    table = schema.AGENT_METHODS if side == "agent" else schema.CLIENT_METHODS
    spec = table.get(method)
    if spec is None:
        return None, None

    def name(t: Any) -> str | None:
        if t is None:
            return None
        n = getattr(t, "__name__", None)
        return n if isinstance(n, str) else None

    return name(spec.params), name(spec.result)
