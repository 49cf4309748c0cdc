"""Generated decoding functions for the attrs classes.

cattrs' own generated structure functions come in two flavours: one that reports which
attribute failed (a try/except and a notes list per attribute, a dict of arguments built up
and splatted) and one that does not. Decoding notifications is the hot path of an ACP
client, so each class gets one straight-line function instead -- JSON types checked inline,
the constructor called with keyword arguments -- and finding *where* the input is wrong is
left to a second, generic pass that only runs once decoding has failed.
"""

import linecache
from collections.abc import Callable
from typing import Any, Union, get_args

import attrs

from ._errors import SchemaError, kind

_NoneType = type(None)
_PRIMITIVES = (str, int, float, bool)


def _split_optional(tp: Any) -> tuple[Any, bool]:
    args = get_args(tp)
    if _NoneType not in args:
        return tp, False
    members = tuple(a for a in args if a is not _NoneType)
    return (members[0] if len(members) == 1 else Union[members]), True  # noqa: UP007


def make_structure_fn(
    cls: type,
    wire_name: Callable[[str], str],
    hook_for: Callable[[Any], Callable[[Any, Any], Any]],
    explain: Callable[[BaseException], SchemaError],
) -> Callable[[Any, Any], Any]:
    """A function decoding a JSON object (a dict) as ``cls``; raises SchemaError."""
    name = f"structure_{cls.__name__}"
    globs: dict[str, Any] = {"__cl": cls, "_mapping": _from_mapping}
    body = []
    args = []
    # (wire key, required, null allowed, hook or None for Any, the hook's type) per field
    specs: list[tuple[str, bool, bool, Any, Any]] = []
    for a in attrs.fields(cls):
        wire = wire_name(a.name)
        local = f"v_{a.name}"
        args.append(f"{a.name}={local}")
        required = a.default is attrs.NOTHING
        if a.type is Any:
            specs.append((wire, required, True, None, Any))
            body.append(f"{local} = o[{wire!r}]" if required else f"{local} = o.get({wire!r})")
            continue
        inner, nullable = _split_optional(a.type)
        hook = hook_for(inner)
        specs.append((wire, required, nullable or not required, hook, inner))
        h = f"h_{a.name}"
        globs[h] = hook
        globs[f"t_{a.name}"] = inner
        call = f"{h}({local}, t_{a.name})"
        body.append(f"{local} = o[{wire!r}]" if required else f"{local} = o.get({wire!r})")
        if isinstance(a.default, attrs.Factory):  # type: ignore[arg-type]
            # Required on the wire, yet left out (or null) by some peers.
            globs[f"f_{a.name}"] = a.default.factory
            body.append(f"{local} = f_{a.name}() if {local} is None else {call}")
        elif inner in _PRIMITIVES:
            # The common case costs a class check; the hook only sees mismatches, which it
            # either accepts (an int for a float) or reports.
            check = f"{local}.__class__ is not {inner.__name__}"
            if nullable or not required:
                check = f"{local} is not None and {check}"
            body.append(f"if {check}: {local} = {call}")
        elif nullable or not required:
            body.append(f"if {local} is not None: {local} = {call}")
        else:
            body.append(f"{local} = {call}")
    lines = [
        f"def {name}(o, _=None):",
        "    if o.__class__ is not dict:",
        "        o = _mapping(o)",
        "    try:",
        *[f"        {line}" for line in body],
        f"        return __cl({', '.join(args)})",
        "    except Exception:",
        "        pass",
        "    raise _diagnose(o)",
    ]

    def _diagnose(o: dict[str, Any]) -> SchemaError:
        # Decoding failed: try each field alone, in order, to say which one is wrong.
        for wire, required, nullable, hook, tp in specs:
            if wire not in o:
                if required:
                    return SchemaError("missing required field", (wire,))
                continue
            value = o[wire]
            if hook is None or (value is None and nullable):
                continue
            try:
                hook(value, tp)
            except Exception as e:
                return explain(e).prefixed(wire)
        return SchemaError(f"invalid {cls.__name__}")

    globs["_diagnose"] = _diagnose
    source = "\n".join(lines) + "\n"
    filename = f"<trio_acp.schema generated {name}>"
    # Tracebacks through generated code show its lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), globs)
    fn: Callable[[Any, Any], Any] = globs[name]
    fn.__qualname__ = name
    return fn


def _from_mapping(o: Any) -> dict[str, Any]:
    if isinstance(o, dict):
        return dict(o)
    raise SchemaError(f"expected an object, got {kind(o)}")
