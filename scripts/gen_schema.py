"""Generate ``src/trio_acp/schema/types.py`` from the official ACP v1 JSON Schema.

    uv run python scripts/gen_schema.py [path/to/schema.json]

The default input is the schema shipped by the npm package ``@agentclientprotocol/sdk``
(installed under ``tests/js/node_modules`` by ``scripts/dev``). The output is committed: the
package never reads the schema at run time.

Plain objects are translated mechanically. The unions are not: the schema spells them in
several different ways (discriminated ``oneOf``, ``anyOf`` with a tag-less default branch,
objects that mix common properties with a ``oneOf``), and a Python user wants one class per
variant with the tag implied by the class. Those choices live in the tables below
(``TAGGED_UNIONS``, ``COMPOSITE_VARIANTS``, ``SUBCLASS_VARIANTS``), so re-running the generator
on a newer schema either reproduces the same shape or fails loudly on something it has not
been told about.
"""

from __future__ import annotations

import builtins
import json
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCHEMA = ROOT / "tests/js/node_modules/@agentclientprotocol/sdk/schema/v1/schema.json"
OUTPUT = ROOT / "src/trio_acp/schema/types.py"

# JSON-RPC envelopes and "any JSON" extension payloads: framing belongs to trio_acp.rpc, and
# the method tables in trio_acp.schema.methods say which params/result type goes with which
# method, so there is nothing for an attrs class to add here.
SKIPPED = {
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

# Unions whose members are told apart by a string property. Each entry:
#   key, [(tag, variant class)], default variant for an object without the key (or None),
#   extra tags accepted on input only.
TAGGED_UNIONS: dict[str, tuple[str, list[tuple[str, str]], str | None, dict[str, str]]] = {
    "ContentBlock": (
        "type",
        [
            ("text", "TextContent"),
            ("image", "ImageContent"),
            ("audio", "AudioContent"),
            ("resource_link", "ResourceLink"),
            ("resource", "EmbeddedResource"),
        ],
        None,
        {},
    ),
    "ToolCallContent": (
        "type",
        [("content", "Content"), ("diff", "Diff"), ("terminal", "Terminal")],
        None,
        {},
    ),
    "SessionUpdate": (
        "sessionUpdate",
        [
            ("user_message_chunk", "UserMessageChunk"),
            ("agent_message_chunk", "AgentMessageChunk"),
            ("agent_thought_chunk", "AgentThoughtChunk"),
            ("tool_call", "ToolCallStart"),
            ("tool_call_update", "ToolCallProgress"),
            ("plan", "AgentPlanUpdate"),
            ("available_commands_update", "AvailableCommandsUpdate"),
            ("current_mode_update", "CurrentModeUpdate"),
            ("config_option_update", "ConfigOptionUpdate"),
            ("session_info_update", "SessionInfoUpdate"),
            ("usage_update", "UsageUpdate"),
            ("notice", "NoticeUpdate"),
            ("compaction_update", "CompactionUpdate"),
            ("compaction_summary_chunk", "CompactionSummaryChunk"),
        ],
        None,
        {},
    ),
    "RequestPermissionOutcome": (
        "outcome",
        [("cancelled", "CancelledPermissionOutcome"), ("selected", "SelectedPermissionOutcome")],
        None,
        {},
    ),
    # A stdio server has no "type" on the wire; some clients send "stdio" anyway.
    "McpServer": (
        "type",
        [("http", "McpServerHttp"), ("sse", "McpServerSse")],
        "McpServerStdio",
        {"stdio": "McpServerStdio"},
    ),
    # "type" omitted means an agent-handled method; "agent" is the same thing spelled out.
    "AuthMethod": (
        "type",
        [("terminal", "AuthMethodTerminal")],
        "AuthMethodAgent",
        {"agent": "AuthMethodAgent"},
    ),
    "SessionConfigOption": (
        "type",
        [("select", "SessionConfigOptionSelect"), ("boolean", "SessionConfigOptionBoolean")],
        None,
        {},
    ),
    "CreateElicitationRequest": (
        "mode",
        [("form", "CreateFormElicitationRequest"), ("url", "CreateUrlElicitationRequest")],
        None,
        {},
    ),
    "CreateElicitationResponse": (
        "action",
        [
            ("accept", "AcceptElicitationResponse"),
            ("decline", "DeclineElicitationResponse"),
            ("cancel", "CancelElicitationResponse"),
        ],
        None,
        {},
    ),
    "ElicitationPropertySchema": (
        "type",
        [
            ("string", "StringPropertySchema"),
            ("number", "NumberPropertySchema"),
            ("integer", "IntegerPropertySchema"),
            ("boolean", "BooleanPropertySchema"),
            ("array", "MultiSelectPropertySchema"),
        ],
        None,
        {},
    ),
    "MultiSelectItems": (
        "type",
        [("string", "StringMultiSelectItems")],
        "TitledMultiSelectItems",
        {},
    ),
}

# Variants that are a schema object under another name: the SessionUpdate variants share
# their payload type with other uses (a ToolCallUpdate is also the toolCall of a permission
# request; three chunk kinds share ContentChunk), so each gets a subclass of its own.
SUBCLASS_VARIANTS: dict[str, tuple[str, str]] = {
    "UserMessageChunk": (
        "ContentChunk",
        "A chunk of the user's message, mostly seen while a session is replayed.",
    ),
    "AgentMessageChunk": ("ContentChunk", "A chunk of the agent's response."),
    "AgentThoughtChunk": ("ContentChunk", "A chunk of the agent's internal reasoning."),
    "ToolCallStart": ("ToolCall", "A new tool call reported by the agent."),
    "ToolCallProgress": ("ToolCallUpdate", "Changes to a tool call already reported."),
    "AgentPlanUpdate": ("Plan", "The agent's execution plan (always the complete list)."),
    "NoticeUpdate": (
        "Notice",
        "A live notice for the user (only if the client advertised notices).",
    ),
}

# Other names for ToolCallContent variants, matching the official Python SDK's spelling.
CLASS_ALIASES = {
    "ContentToolCallContent": "Content",
    "DiffToolCallContent": "Diff",
    "TerminalToolCallContent": "Terminal",
}

# Variants of unions the schema writes as "common properties + oneOf/anyOf": each variant is
# flattened into one class holding the common properties and the branch's own.
#   name: (union def, branch def or None, docstring)
COMPOSITE_VARIANTS: dict[str, tuple[str, str | None, str]] = {
    "SessionConfigOptionSelect": (
        "SessionConfigOption",
        "SessionConfigSelect",
        "A session configuration option whose value is picked from a list.",
    ),
    "SessionConfigOptionBoolean": (
        "SessionConfigOption",
        "SessionConfigBoolean",
        "A session configuration option that is on or off.",
    ),
    "CreateFormElicitationRequest": (
        "CreateElicitationRequest",
        "ElicitationFormMode",
        "Ask the user to fill in a form.",
    ),
    "CreateUrlElicitationRequest": (
        "CreateElicitationRequest",
        "ElicitationUrlMode",
        "Send the user to a URL.",
    ),
    "AcceptElicitationResponse": (
        "CreateElicitationResponse",
        "ElicitationAcceptAction",
        "The user accepted the elicitation.",
    ),
    "DeclineElicitationResponse": (
        "CreateElicitationResponse",
        None,
        "The user declined the elicitation.",
    ),
    "CancelElicitationResponse": (
        "CreateElicitationResponse",
        None,
        "The user dismissed the elicitation without choosing.",
    ),
    "CancelledPermissionOutcome": (
        "RequestPermissionOutcome",
        None,
        "The prompt turn was cancelled before the user responded.",
    ),
}

# Untagged unions: the converter tells the members apart by shape.
UNTAGGED_UNIONS = {
    "EmbeddedResourceResource": "Union[TextResourceContents, BlobResourceContents]",
    "SessionConfigSelectOptions": (
        "Union[list[SessionConfigSelectOption], list[SessionConfigSelectGroup]]"
    ),
    "ElicitationContentValue": "Union[str, int, float, bool, list[str]]",
    "RequestId": "Union[int, str, None]",
    # The only input kind so far; kept as an alias so the name exists for users.
    "AvailableCommandInput": "UnstructuredCommandInput",
}

# Elicitation requests are scoped to a session (optionally a tool call) or to a request;
# the schema mixes the scope into the mode objects with an anyOf.
SCOPE_FIELDS = [
    ("sessionId", "SessionId | None", "Session scope: the session this elicitation belongs to."),
    ("toolCallId", "ToolCallId | None", "Session scope: the tool call that needs it, if any."),
    ("requestId", "RequestId", "Request scope: the JSON-RPC request that needs the input."),
]

CLASS_DOC_LINES = 3
FIELD_DOC_LINES = 2
WIDTH = 96


def _is_enum_branch(branch: dict) -> bool:
    """A constant, or the "any other value" branch of an open enumeration."""
    return "const" in branch or branch.get("title", "").lower() == "other"


def snake(name: str) -> str:
    if name == "_meta":
        return "meta"
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def camel(name: str) -> str:
    if name == "meta":
        return "_meta"
    first, *rest = name.split("_")
    return first + "".join(p.capitalize() for p in rest)


_LINK = re.compile(r"\[([^\]]+)\]\([^)]+\)")


# Sentences that restate this module's conventions (None is omitted, and omitted means null).
_BOILERPLATE = re.compile(
    r"(Optional\.|This field is optional\.|Omitted and `null` are equivalent[^.]*\.)\s*"
)


def _paragraphs(description: str) -> list[str]:
    text = _LINK.sub(r"\1", description or "")
    paras = [_BOILERPLATE.sub("", " ".join(p.split())).strip() for p in re.split(r"\n\s*\n", text)]
    return [p for p in paras if p and not p.startswith(("See protocol docs", "See RFD"))]


def summarize(description: str, width: int, max_lines: int) -> list[str]:
    """The first paragraph, or its first sentence if that is too long, in max_lines lines."""
    paras = _paragraphs(description)
    if not paras:
        return []
    lines = textwrap.wrap(paras[0], width)
    if len(lines) > max_lines:
        sentence = re.split(r"(?<=[.!?])\s", paras[0], maxsplit=1)[0]
        lines = textwrap.wrap(sentence, width)
        if len(lines) > max_lines:
            lines = lines[:max_lines]
            lines[-1] = lines[-1].rstrip(".,;: ") + "…"
    return lines


@dataclass
class Field:
    py: str
    ann: str
    default: str | None  # None: required
    doc: list[str]
    deps: list[str]


@dataclass
class Node:
    name: str
    kind: str  # "class" | "alias"
    deps: list[str] = field(default_factory=list)  # in order of first use
    source: list[str] = field(default_factory=list)


class Generator:
    def __init__(self, schema: dict, version: str) -> None:
        self.defs: dict[str, dict] = schema["$defs"]
        self.version = version
        self.nodes: dict[str, Node] = {}
        self.str_aliases: list[str] = []
        self.exports: list[str] = []
        self.plain_aliases: dict[str, str] = {}  # alias name -> python type it stands for

    # -- types -------------------------------------------------------------------------

    def ref_name(self, ref: str) -> str:
        name = ref.rsplit("/", 1)[1]
        if name not in self.defs:
            raise SystemExit(f"dangling $ref {ref}")
        return name

    def pytype(self, prop: dict) -> tuple[str, bool, list[str]]:
        """(annotation, nullable, names it depends on) for one property schema."""
        if "$ref" in prop:
            name = self.ref_name(prop["$ref"])
            return name, name == "RequestId", [name]
        if "allOf" in prop and len(prop["allOf"]) == 1:
            return self.pytype(prop["allOf"][0])
        if "anyOf" in prop:
            branches = [b for b in prop["anyOf"] if b.get("type") != "null"]
            if len(branches) == 1 and len(prop["anyOf"]) == 2:
                ann, _, deps = self.pytype(branches[0])
                return ann, True, deps
            raise SystemExit(f"unexpected anyOf property: {json.dumps(prop)[:200]}")
        t = prop.get("type")
        nullable = False
        if isinstance(t, list):
            rest = [x for x in t if x != "null"]
            nullable = len(rest) < len(t)
            if len(rest) != 1:
                raise SystemExit(f"unexpected type list {t}")
            t = rest[0]
        if t is None:
            return "Any", True, []
        if t == "string":
            return "str", nullable, []
        if t == "integer":
            return "int", nullable, []
        if t == "number":
            return "float", nullable, []
        if t == "boolean":
            return "bool", nullable, []
        if t == "array":
            item, _, deps = self.pytype(prop["items"])
            return f"list[{item}]", nullable, deps
        if t == "object":
            extra = prop.get("additionalProperties")
            if isinstance(extra, dict):
                value, _, deps = self.pytype(extra)
                return f"dict[str, {value}]", nullable, deps
            return "dict[str, Any]", nullable, []
        raise SystemExit(f"unexpected property schema {json.dumps(prop)[:200]}")

    def fields_of(self, props: dict, required: set[str]) -> list[Field]:
        out = []
        meta = None
        for wire, prop in props.items():
            py = snake(wire)
            if camel(py) != wire:
                raise SystemExit(f"property {wire!r} does not survive snake_case round trip")
            ann, nullable, deps = self.pytype(prop)
            doc = summarize(prop.get("description", ""), WIDTH - 7, FIELD_DOC_LINES)
            if wire == "_meta":
                doc = []  # the same boilerplate everywhere
            # Any and RequestId include null already.
            with_none = ann if ann in ("Any", "RequestId") else f"{ann} | None"
            if (
                wire in required
                and prop.get("x-deserialize-default-on-null")
                and ann.startswith("list[")
            ):
                # Required on the wire, but real peers leave it out: accept that as [] and
                # always write it back.
                f = Field(py, ann, "attrs.Factory(list)", doc, deps)
            elif wire in required:
                f = Field(py, with_none if nullable else ann, None, doc, deps)
            else:
                f = Field(py, with_none, "None", doc, deps)
            if wire == "_meta":
                meta = f
            else:
                out.append(f)
        if meta is not None:
            out.append(meta)
        return out

    # -- nodes -------------------------------------------------------------------------

    def add_class(
        self, name: str, doc: list[str], fields: list[Field], base: str | None = None
    ) -> None:
        deps = [base] if base else []
        for f in fields:
            deps += [d for d in f.deps if d not in deps]
        lines = ["@attrs.define(kw_only=True)", f"class {name}{f'({base})' if base else ''}:"]
        lines.append(self._docstring(doc))
        if fields:
            lines.append("")
        for i, f in enumerate(fields):
            # A field named like a builtin would shadow it for later annotations in the body.
            later = " ".join(g.ann for g in fields[i + 1 :])
            if f.py in dir(builtins) and re.search(rf"\b{f.py}\b", later):
                raise SystemExit(f"{name}.{f.py} shadows a builtin used by a later annotation")
            for d in f.doc:
                lines.append(f"    #: {d}")
            default = "" if f.default is None else f" = {f.default}"
            lines.append(f"    {f.py}: {f.ann}{default}")
        self.nodes[name] = Node(name, "class", deps, lines)
        self.exports.append(name)

    def add_alias(self, name: str, expr: str, doc: list[str], deps: list[str]) -> None:
        line = f"{name} = {expr}"
        m = re.fullmatch(r"(Union|Literal)\[(.*)\]", expr)
        if len(line) > WIDTH + 4 and m:
            items = re.split(r", (?![^\[]*\])", m.group(2))
            line = "\n".join([f"{name} = {m.group(1)}["] + [f"    {i}," for i in items] + ["]"])
        lines = [f"#: {d}" for d in doc] + [line]
        self.nodes[name] = Node(name, "alias", deps, lines)
        self.exports.append(name)

    @staticmethod
    def _docstring(doc: list[str]) -> str:
        while doc and not doc[-1]:
            doc = doc[:-1]
        if not doc:
            return '    """"""'
        if len(doc) == 1 and len(doc[0]) <= WIDTH - 10:
            return f'    """{doc[0]}"""'
        body = "\n".join(f"    {d}" if d else "" for d in doc)
        return f'    """{body.lstrip()}\n    """'

    def class_doc(self, d: dict, extra: list[str] | None = None) -> list[str]:
        doc = summarize(d.get("description", ""), WIDTH - 4, CLASS_DOC_LINES)
        if extra:
            doc = doc + [""] + extra
        return doc

    # -- the schema --------------------------------------------------------------------

    def build(self) -> None:
        variant_tag: dict[str, tuple[str, str, str]] = {}
        for union, (key, variants, default, _extra) in TAGGED_UNIONS.items():
            for tag, cls in variants:
                variant_tag[cls] = (union, key, tag)
            if default:
                variant_tag[default] = (union, key, "")

        def tag_note(cls: str) -> list[str]:
            if cls not in variant_tag:
                return []
            union, key, tag = variant_tag[cls]
            if not tag:
                return [f"Variant of {union}: written without ``{key}``."]
            return [f'Variant of {union}: ``"{key}": "{tag}"`` on the wire.']

        handled = set(SKIPPED)
        for name, d in self.defs.items():
            if name in SKIPPED:
                continue
            if name in UNTAGGED_UNIONS:
                expr = UNTAGGED_UNIONS[name]
                deps = [d for d in re.findall(r"\b[A-Z]\w+\b", expr) if d not in ("Union", "None")]
                self.add_alias(name, expr, summarize(d.get("description", ""), WIDTH - 3, 2), deps)
                handled.add(name)
                continue
            if name in TAGGED_UNIONS:
                _key, variants, default, _ = TAGGED_UNIONS[name]
                members = [cls for _, cls in variants] + ([default] if default else [])
                expr = "Union[" + ", ".join(members + ["UnknownVariant"]) + "]"
                doc = summarize(d.get("description", ""), WIDTH - 3, 2)
                self.add_alias(name, expr, doc, members)
                handled.add(name)
                continue
            t = d.get("type")
            branches = d.get("oneOf") or d.get("anyOf")
            if t == "string" and not branches:
                self.str_aliases.append(name)
                self.add_alias(name, "str", summarize(d.get("description", ""), WIDTH - 3, 2), [])
                self.plain_aliases[name] = "str"
                handled.add(name)
                continue
            if t == "integer" and not branches:
                self.add_alias(name, "int", summarize(d.get("description", ""), WIDTH - 3, 2), [])
                handled.add(name)
                continue
            if t is None and branches and all(_is_enum_branch(b) for b in branches):
                consts = [b["const"] for b in branches if "const" in b]
                base = "int" if all(isinstance(c, int) for c in consts) else "str"
                doc = summarize(d.get("description", ""), WIDTH - 3, 2)
                if all("const" in b for b in branches):
                    doc.append(
                        f"Any {'integer' if base == 'int' else 'string'} is accepted on input:"
                        " newer peers may send values this version does not know."
                    )
                else:
                    doc.append("Other values are allowed by the schema.")
                self.add_alias(name, base, doc, [])
                literal = ", ".join(json.dumps(c) for c in consts)
                known = [f"The {name} values defined by ACP v1."]
                self.add_alias(f"Known{name}", f"Literal[{literal}]", known, [])
                handled.add(name)
                continue
            if t == "object":
                self.object_def(name, d, tag_note(name))
                handled.add(name)
                continue
            raise SystemExit(f"don't know how to translate $defs/{name}")

        for name, (base, doc) in SUBCLASS_VARIANTS.items():
            self.add_class(name, [doc, ""] + tag_note(name), [], base)
        for name, (union, branch, doc) in COMPOSITE_VARIANTS.items():
            self.composite(name, union, branch, [doc, ""] + tag_note(name))
        for alias, target in CLASS_ALIASES.items():
            doc = [f"The {target} variant of ToolCallContent, by its name in the official SDK."]
            self.add_alias(alias, target, doc, [target])

    def object_def(self, name: str, d: dict, note: list[str]) -> None:
        props = dict(d.get("properties", {}))
        required = set(d.get("required", []))
        if name in ("SessionConfigOption", "CreateElicitationRequest", "CreateElicitationResponse"):
            raise AssertionError("tagged unions are handled before object_def")
        fields = self.fields_of(props, required)
        if name == "SetSessionConfigOptionRequest":
            # The value's JSON type says which branch applies: a bool is written with
            # "type": "boolean", a value id (string) without a type.
            meta = fields.pop()
            fields.append(
                Field(
                    "value",
                    "SessionConfigValueId | bool",
                    None,
                    ["A value id for select options; a bool for boolean options."],
                    ["SessionConfigValueId"],
                )
            )
            fields.append(meta)
        elif d.get("anyOf"):
            if name not in ("ElicitationFormMode", "ElicitationUrlMode"):
                raise SystemExit(f"unexpected anyOf in object $defs/{name}")
            fields = self.with_scope(fields)
        self.add_class(name, self.class_doc(d, note), fields)

    def with_scope(self, fields: list[Field]) -> list[Field]:
        meta = [f for f in fields if f.py == "meta"]
        rest = [f for f in fields if f.py != "meta"]
        for wire, ann, doc in SCOPE_FIELDS:
            deps = [d for d in re.findall(r"\b[A-Z]\w+\b", ann) if d != "None"]
            rest.append(Field(snake(wire), ann, "None", [doc], deps))
        return rest + meta

    def composite(self, name: str, union: str, branch: str | None, doc: list[str]) -> None:
        u = self.defs[union]
        props = dict(u.get("properties", {}))
        required = set(u.get("required", []))
        meta = props.pop("_meta", None)
        scoped = False
        if branch:
            b = self.defs[branch]
            props.update(b.get("properties", {}))
            required |= set(b.get("required", []))
            scoped = bool(b.get("anyOf"))
        if meta is not None:
            props["_meta"] = meta
        fields = self.fields_of(props, required)
        if scoped:
            fields = self.with_scope(fields)
        self.add_class(name, doc, fields)

    # -- output ------------------------------------------------------------------------

    def ordered(self) -> list[Node]:
        """Definitions before their uses, otherwise in schema order."""
        done: set[str] = set()
        out: list[Node] = []

        def visit(name: str, stack: tuple[str, ...] = ()) -> None:
            if name in done or name not in self.nodes:
                return
            if name in stack:
                raise SystemExit(f"reference cycle: {' -> '.join(stack + (name,))}")
            for dep in self.nodes[name].deps:
                visit(dep, stack + (name,))
            done.add(name)
            out.append(self.nodes[name])

        simple = [n for n in self.nodes.values() if n.kind == "alias" and not n.deps]
        for n in simple:
            visit(n.name)
        for name in self.nodes:
            visit(name)
        return out

    def tagged_table(self) -> list[str]:
        lines = [
            "# How the converter reads and writes the tagged unions. An object without the tag",
            "# key decodes as ``default`` where the schema has one; ``decode_only`` tags are",
            "# accepted on input and never written.",
            "TAGGED_UNIONS: dict[Any, TaggedUnion] = {",
        ]
        for union, (key, variants, default, extra) in TAGGED_UNIONS.items():
            lines.append(f"    {union}: TaggedUnion(")
            lines.append(f"        key={json.dumps(key)},")
            lines.append("        variants={")
            for tag, cls in variants:
                lines.append(f"            {json.dumps(tag)}: {cls},")
            lines.append("        },")
            if default:
                lines.append(f"        default={default},")
            if extra:
                inner = ", ".join(f"{json.dumps(k)}: {v}" for k, v in extra.items())
                lines.append(f"        decode_only={{{inner}}},")
            lines.append("    ),")
        lines.append("}")
        return lines

    def render(self) -> str:
        head = [
            "# Generated by scripts/gen_schema.py from the ACP v1 JSON Schema",
            f"# ({self.version}).",
            "# Do not edit: change the generator and run `uv run python scripts/gen_schema.py`.",
            '"""ACP v1 wire types: one attrs class per object of the official JSON Schema.',
            "",
            "Attribute names are the schema's property names in snake_case (``_meta`` is",
            "``meta``). Optional fields default to None, which is left out of the wire form. The",
            "variants of a tagged union are separate classes and the tag is implied by the class;",
            "see ``TAGGED_UNIONS`` at the end. Enumerations are plain ``str`` (or ``int``) aliases",
            "so that values added by newer peers still decode; the ``Known*`` literals list the",
            "v1 values.",
            '"""',
            "",
            "from typing import Any, Literal, Union",
            "",
            "import attrs",
            "",
            "from ._variants import TaggedUnion, UnknownVariant",
            "",
        ]
        exports = sorted(set(self.exports) | {"TAGGED_UNIONS"})
        head.append("__all__ = [")
        head += [f"    {json.dumps(e)}," for e in exports]
        head.append("]")
        body: list[str] = []
        prev_kind = None
        for node in self.ordered():
            if node.kind == "class" or prev_kind == "class":
                body += ["", ""]
            elif node.kind == "alias" and any(line.startswith("#:") for line in node.source):
                body.append("")
            body += node.source
            prev_kind = node.kind
        tail = ["", ""] + self.tagged_table()
        return "\n".join(head + body + tail) + "\n"


def render(path: Path = DEFAULT_SCHEMA) -> str:
    """The source of types.py for the schema at ``path``."""
    schema = json.loads(path.read_text())
    version = "schema v1"
    pkg = path.parents[2] / "package.json"
    if pkg.exists():
        meta = json.loads(pkg.read_text())
        version = f"{meta['name']} {meta['version']}, schema/v1/schema.json"
    gen = Generator(schema, version)
    gen.build()
    return gen.render()


def main(argv: list[str]) -> None:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_SCHEMA
    OUTPUT.write_text(render(path))
    print(f"wrote {OUTPUT.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
