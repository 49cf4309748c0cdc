"""Shared by the schema tests: the official JSON Schema, hypothesis strategies for every
trio_acp.schema type, and the official Python SDK's model for each of our classes."""

import functools
import json
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import acp.schema as A
import attrs
import jsonschema
import pydantic
import referencing
import referencing.jsonschema
from hypothesis import strategies as st

import trio_acp.schema as S
from trio_acp.schema._converter import wire_name

SCHEMA_PATH = (
    Path(__file__).resolve().parents[1]
    / "js/node_modules/@agentclientprotocol/sdk/schema/v1/schema.json"
)
if not SCHEMA_PATH.exists():  # CI installs it (scripts/dev); a missing copy is a broken setup.
    raise RuntimeError(f"{SCHEMA_PATH} is missing: run `npm ci` in tests/js (scripts/dev does it)")
SCHEMA: dict = json.loads(SCHEMA_PATH.read_text())
DEFS: dict[str, dict] = SCHEMA["$defs"]

# $defs with no class or alias of their own: JSON-RPC envelopes and "any JSON" extension
# payloads (framing is trio_acp.rpc's business; see scripts/gen_schema.py).
ENVELOPE_DEFS = {
    "AgentRequest",
    "AgentResponse",
    "AgentNotification",
    "ClientRequest",
    "ClientResponse",
    "ClientNotification",
    "ExtRequest",
    "ExtResponse",
    "ExtNotification",
}

# Variant classes -> the union they belong to (and are validated against, tag included).
VARIANT_UNION: dict[type, str] = {}
UNION_BY_NAME: dict[str, Any] = {}
for _alias, _spec in S.TAGGED_UNIONS.items():
    _name = next(n for n in S.__all__ if getattr(S, n) is _alias)
    UNION_BY_NAME[_name] = _alias
    for _cls in [*_spec.variants.values(), *([_spec.default] if _spec.default else [])]:
        VARIANT_UNION[_cls] = _name

# Classes whose properties come from more than one $def.
PROPERTY_SOURCES: dict[type, list[str]] = {
    S.SessionConfigOptionSelect: ["SessionConfigOption", "SessionConfigSelect"],
    S.SessionConfigOptionBoolean: ["SessionConfigOption", "SessionConfigBoolean"],
    S.CreateFormElicitationRequest: [
        "CreateElicitationRequest",
        "ElicitationFormMode",
        "ElicitationSessionScope",
        "ElicitationRequestScope",
    ],
    S.CreateUrlElicitationRequest: [
        "CreateElicitationRequest",
        "ElicitationUrlMode",
        "ElicitationSessionScope",
        "ElicitationRequestScope",
    ],
    S.ElicitationFormMode: [
        "ElicitationFormMode",
        "ElicitationSessionScope",
        "ElicitationRequestScope",
    ],
    S.ElicitationUrlMode: [
        "ElicitationUrlMode",
        "ElicitationSessionScope",
        "ElicitationRequestScope",
    ],
    S.AcceptElicitationResponse: ["CreateElicitationResponse", "ElicitationAcceptAction"],
    S.DeclineElicitationResponse: ["CreateElicitationResponse"],
    S.CancelElicitationResponse: ["CreateElicitationResponse"],
    S.CancelledPermissionOutcome: [],
    S.SetSessionConfigOptionRequest: ["SetSessionConfigOptionRequest"],
}

ALL_CLASSES: list[type] = sorted(
    {v for v in map(S.__dict__.get, S.__all__) if isinstance(v, type) and attrs.has(v)}
    - {S.UnknownVariant, S.TaggedUnion, S.MethodSpec},
    key=lambda c: c.__name__,
)

# -- the official JSON Schema ------------------------------------------------------------

_REGISTRY = referencing.Registry().with_resource(
    "urn:acp-schema",
    referencing.Resource.from_contents(SCHEMA, referencing.jsonschema.DRAFT202012),
)


@functools.cache
def validator(def_name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        {"$ref": f"urn:acp-schema#/$defs/{def_name}"}, registry=_REGISTRY
    )


def schema_defs_for(cls: type) -> list[str]:
    """The $defs a wire value of ``cls`` must satisfy."""
    out = []
    if cls.__name__ in DEFS:
        out.append(cls.__name__)
    if cls in VARIANT_UNION:
        out.append(VARIANT_UNION[cls])
    if not out:
        raise AssertionError(f"no $def to validate {cls.__name__} against")
    return out


# -- strategies ------------------------------------------------------------------------


def _resolve(prop: dict) -> dict:
    """Follow $ref/allOf and drop a null branch, down to the schema of the value itself."""
    while True:
        if "$ref" in prop:
            prop = DEFS[prop["$ref"].rsplit("/", 1)[1]]
        elif "allOf" in prop and len(prop["allOf"]) == 1:
            prop = prop["allOf"][0]
        elif "anyOf" in prop and len(prop["anyOf"]) == 2 and {"type": "null"} in prop["anyOf"]:
            prop = next(b for b in prop["anyOf"] if b != {"type": "null"})
        else:
            return prop


def property_schema(cls: type, attribute: str) -> dict | None:
    wire = wire_name(attribute)
    sources = PROPERTY_SOURCES.get(cls)
    if sources is None:
        sources = [c.__name__ for c in cls.__mro__ if c.__name__ in DEFS]
    for name in sources:
        prop = DEFS[name].get("properties", {}).get(wire)
        if prop is not None:
            return _resolve(prop)
    return None


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
json_objects = st.dictionaries(st.text(max_size=5), json_values, max_size=3)
URLS = st.sampled_from(["https://example.com/x", "file:///tmp/a.txt", "http://localhost:8080/mcp"])


def _enum_values(schema: dict) -> list | None:
    branches = schema.get("oneOf") or schema.get("anyOf")
    if branches and all("const" in b or b.get("title", "").lower() == "other" for b in branches):
        return [b["const"] for b in branches if "const" in b]
    if "const" in schema:
        return [schema["const"]]
    return None


def _primitive(tp: Any, schema: dict | None, attribute: str) -> st.SearchStrategy:
    schema = schema or {}
    consts = _enum_values(schema)
    if consts is not None:
        return st.sampled_from(consts)
    if tp is str:
        if attribute in ("url", "uri"):
            return URLS
        return st.text(min_size=schema.get("minLength", 0), max_size=8)
    if tp is int:
        lo = schema.get("minimum", 0)
        hi = schema.get("maximum", 2**31 - 1)
        return st.integers(lo, hi)
    if tp is float:
        return st.floats(-1e9, 1e9, allow_nan=False) | st.integers(0, 1000)
    if tp is bool:
        return st.booleans()
    raise AssertionError(tp)


# Variants the official Python SDK (schema 1.19) does not know yet.
NEWER_THAN_ACP = {S.NoticeUpdate, S.CompactionUpdate, S.CompactionSummaryChunk}


@functools.cache
def strategy(tp: Any, *, for_acp: bool = False, unknown: bool = False) -> st.SearchStrategy:
    """Values of ``tp`` whose wire form is valid against the official schema.

    ``for_acp`` leaves out variants the official SDK cannot parse; ``unknown`` adds
    UnknownVariant members to the tagged unions (not schema-valid, by definition).
    """
    return _strategy(tp, None, "", for_acp, unknown)


def _strategy(
    tp: Any, schema: dict | None, attribute: str, for_acp: bool, unknown: bool
) -> st.SearchStrategy:
    def again(t: Any, s: dict | None = None, a: str = attribute) -> st.SearchStrategy:
        return _strategy(t, s, a, for_acp, unknown)

    if tp is Any:
        return json_values
    if tp in (str, int, float, bool):
        return _primitive(tp, schema, attribute)
    origin = get_origin(tp)
    if origin is list:
        (item,) = get_args(tp)
        item_schema = _resolve(schema["items"]) if schema and "items" in schema else None
        return st.lists(again(item, item_schema), max_size=2)
    if origin is dict:
        _, value = get_args(tp)
        if value is Any:
            return json_objects
        return st.dictionaries(st.text(max_size=4), again(value), max_size=2)
    if origin is Union or origin is types.UnionType:
        args = get_args(tp)
        members = [a for a in args if a is not type(None)]
        key = frozenset(members)
        spec = next((s for u, s in S.TAGGED_UNIONS.items() if frozenset(get_args(u)) == key), None)
        if spec is not None:
            variants = [c for c in members if c is not S.UnknownVariant]
            if for_acp:
                variants = [c for c in variants if c not in NEWER_THAN_ACP]
            out = st.one_of(
                [
                    st.deferred(lambda c=c: strategy(c, for_acp=for_acp, unknown=unknown))
                    for c in variants
                ]
            )
            if unknown:
                out = out | unknown_variant(spec)
        elif tp == S.SessionConfigSelectOptions:
            out = again(list[S.SessionConfigSelectOption]) | again(list[S.SessionConfigSelectGroup])
        elif tp == S.RequestId or key == frozenset({int, str}):
            out = st.integers(0, 2**31) | st.text(max_size=6)
        elif tp == S.ElicitationContentValue:
            out = (
                st.text(max_size=5)
                | st.integers(-5, 5)
                | st.floats(-1, 1)
                | st.booleans()
                | st.lists(st.text(max_size=3), max_size=2)
            )
        elif key == frozenset({str, bool}):
            out = st.text(max_size=5) | st.booleans()
        elif len(members) > 1:
            out = st.one_of([again(m) for m in members])
        else:
            out = again(members[0], schema)
        return st.none() | out if len(members) < len(args) else out
    if attrs.has(tp):
        return st.deferred(lambda: _class_strategy(tp, for_acp, unknown))
    raise AssertionError(f"no strategy for {tp!r}")


def _class_strategy(cls: type, for_acp: bool, unknown: bool) -> st.SearchStrategy:
    kwargs = {}
    for a in attrs.fields(cls):
        s = _strategy(a.type, property_schema(cls, a.name), a.name, for_acp, unknown)
        if a.default is not attrs.NOTHING and not isinstance(a.default, attrs.Factory):
            s = st.none() | s if a.type is not Any else s
        kwargs[a.name] = s
    out = st.builds(cls, **kwargs)
    names = {a.name for a in attrs.fields(cls)}
    if {"session_id", "request_id"} <= names and cls.__name__.startswith(("Create", "Elicitation")):
        # An elicitation is scoped to a session or to a request: one of them must be there.
        out = out.map(_with_scope)
    return out


def _with_scope(obj: Any) -> Any:
    if obj.session_id is None and obj.request_id is None:
        obj.session_id = "sess-1"
    return obj


def unknown_variant(spec: S.TaggedUnion) -> st.SearchStrategy:
    known = set(spec.variants) | set(spec.decode_only)
    tags = st.text(min_size=1, max_size=8).filter(lambda s: s not in known)
    return st.builds(
        lambda tag, rest: S.UnknownVariant(tag, {**rest, spec.key: tag}), tags, json_objects
    )


# -- the official SDK's models ---------------------------------------------------------

ACP_NAMES: dict[type, Any] = {
    S.CancelledPermissionOutcome: A.DeniedOutcome,
    S.SetSessionConfigOptionRequest: Union[
        A.SetSessionConfigOptionBooleanRequest, A.SetSessionConfigOptionSelectRequest
    ],
    # Variants: the SDK's class that carries the tag.
    S.TextContent: A.TextContentBlock,
    S.ImageContent: A.ImageContentBlock,
    S.AudioContent: A.AudioContentBlock,
    S.ResourceLink: A.ResourceContentBlock,
    S.EmbeddedResource: A.EmbeddedResourceContentBlock,
    S.Content: A.ContentToolCallContent,
    S.Diff: A.FileEditToolCallContent,
    S.Terminal: A.TerminalToolCallContent,
    S.McpServerHttp: A.HttpMcpServer,
    S.McpServerSse: A.SseMcpServer,
    S.AuthMethodTerminal: A.TerminalAuthMethod,
    S.StringPropertySchema: A.ElicitationStringPropertySchema,
    S.NumberPropertySchema: A.ElicitationNumberPropertySchema,
    S.IntegerPropertySchema: A.ElicitationIntegerPropertySchema,
    S.BooleanPropertySchema: A.ElicitationBooleanPropertySchema,
    S.MultiSelectPropertySchema: A.ElicitationMultiSelectPropertySchema,
    S.SelectedPermissionOutcome: A.AllowedOutcome,
}
# Ours only: the SDK predates them (notices, compaction: ACP schema 1.25 / npm 2.4).
NOT_IN_ACP = {
    S.Notice,
    S.NoticeUpdate,
    S.NoticeCapabilities,
    S.CompactionUpdate,
    S.CompactionSummaryChunk,
    S.CompactionCapabilities,
}


def acp_type(cls: type) -> Any | None:
    if cls in NOT_IN_ACP:
        return None
    if cls in ACP_NAMES:
        return ACP_NAMES[cls]
    return getattr(A, cls.__name__)


@functools.cache
def acp_adapter(cls: type) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(acp_type(cls))


def acp_roundtrip(cls: type, wire: Any) -> Any:
    """Parse ``wire`` with the official SDK and dump it again, the way the SDK sends it."""
    adapter = acp_adapter(cls)
    obj = adapter.validate_python(wire)
    return adapter.dump_python(obj, by_alias=True, exclude_none=True, mode="json")


# Fields of the SDK's models that the stable v1 schema does not have (unstable features:
# MCP-over-ACP, NES, providers, position encodings, plan updates, fork, prompt usage). The
# SDK writes them with their defaults; we drop them on input, as any unknown key.
ACP_UNSTABLE_KEYS = {
    "acp",
    "nes",
    "providers",
    "positionEncoding",
    "positionEncodings",
    "plan",
    "fork",
    "usage",
}


def assert_same_but_unstable(ours: Any, theirs: Any, path: str = "$") -> None:
    """``ours == theirs``, except for keys of ACP_UNSTABLE_KEYS present only in theirs."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        extra = set(ours) - set(theirs)
        assert not extra, f"{path}: keys {extra} not in the SDK's output"
        for k, v in theirs.items():
            if k not in ours:
                assert k in ACP_UNSTABLE_KEYS, f"{path}.{k} dropped"
                continue
            assert_same_but_unstable(ours[k], v, f"{path}.{k}")
    elif isinstance(theirs, list) and isinstance(ours, list):
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs, strict=False)):
            assert_same_but_unstable(a, b, f"{path}[{i}]")
    else:
        assert ours == theirs and type(ours) is type(theirs), f"{path}: {ours!r} != {theirs!r}"


def assert_omits_none(obj: Any, wire: Any, path: str = "$") -> None:
    """Optional attributes that are None are absent from the wire form, at every depth."""
    if attrs.has(type(obj)) and not isinstance(obj, S.UnknownVariant):
        assert isinstance(wire, dict), path
        for a in attrs.fields(type(obj)):
            value = getattr(obj, a.name)
            key = wire_name(a.name)
            if value is None and a.default is None:
                assert key not in wire, f"{path}.{key} is None but written"
            elif value is not None and a.type is not Any and a.name != "meta":
                assert_omits_none(value, wire[key], f"{path}.{key}")
    elif isinstance(obj, list):
        for i, (x, w) in enumerate(zip(obj, wire, strict=True)):
            assert_omits_none(x, w, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k, x in obj.items():
            assert_omits_none(x, wire[k], f"{path}.{k}")
