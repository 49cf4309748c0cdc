"""The cattrs converter between the attrs classes of ``types`` and JSON-ready values.

Every hook is built once per type, when first needed. Classes are encoded by
cattrs-generated functions (attributes renamed to the wire's camelCase, None left out) and
decoded by the straight-line functions of ``_structure``; unions dispatch on their tag with
a dict lookup. Decoding is strict about JSON types -- cattrs' defaults would happily turn
``5`` into ``"5"`` -- and lenient where the protocol's real peers are (see ``from_wire``).
"""

import functools
import types as _pytypes
from collections.abc import Callable
from typing import Any, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.fns import identity
from cattrs.gen import make_dict_unstructure_fn, override

from . import types as t
from ._errors import SchemaError, kind
from ._structure import make_structure_fn
from ._variants import TaggedUnion, UnknownVariant

__all__ = ["converter", "from_wire", "to_wire"]

#: The converter behind ``to_wire``/``from_wire``; its hooks are the same functions (but
#: ``converter.structure`` lets the converter's own exceptions through: use ``from_wire``).
converter = cattrs.Converter(forbid_extra_keys=False)

_NoneType = type(None)
_MISSING: Any = object()


def wire_name(attribute: str) -> str:
    """The JSON key of an attribute: camelCase, and ``meta`` is ``_meta``."""
    if attribute == "meta":
        return "_meta"
    first, *rest = attribute.split("_")
    return first + "".join(p.capitalize() for p in rest)


def explain(exc: BaseException) -> SchemaError:
    """A SchemaError for any exception met while decoding.

    The hooks raise SchemaError with the path below them; anything else escaping a hook is
    a bug or a value no rule foresaw, and is still reported as invalid input.
    """
    if isinstance(exc, SchemaError):
        return exc
    return SchemaError(f"invalid value ({type(exc).__name__}: {exc})")


# -- primitives --------------------------------------------------------------------------


def _expected(what: str, value: Any) -> SchemaError:
    return SchemaError(f"expected {what}, got {kind(value)}")


def _structure_str(v: Any, _: Any) -> str:
    if v.__class__ is str or isinstance(v, str):
        return v
    raise _expected("a string", v)


def _structure_int(v: Any, _: Any) -> int:
    # bool is an int subclass; True is not a line number.
    if v.__class__ is int or (isinstance(v, int) and not isinstance(v, bool)):
        return v
    raise _expected("an integer", v)


def _structure_float(v: Any, _: Any) -> float:
    # Kept as given (an int stays an int) so that re-encoding reproduces the input.
    if v.__class__ is float or v.__class__ is int:
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    raise _expected("a number", v)


def _structure_bool(v: Any, _: Any) -> bool:
    if v is True or v is False:
        return v
    raise _expected("a boolean", v)


def _structure_any(v: Any, _: Any) -> Any:
    return v


_PRIMITIVES: dict[Any, Callable[[Any, Any], Any]] = {
    str: _structure_str,
    int: _structure_int,
    float: _structure_float,
    bool: _structure_bool,
}
_PRIMITIVE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean"}

for _tp, _fn in _PRIMITIVES.items():
    converter.register_structure_hook(_tp, _fn)
    converter.register_unstructure_hook(_tp, identity)
converter.register_structure_hook_func(lambda tp: tp is Any, _structure_any)
converter.register_unstructure_hook_func(lambda tp: tp is Any, identity)


def _is_plain(tp: Any) -> bool:
    """Whether values of ``tp`` are already JSON-ready (so encoding is the identity)."""
    if tp in _PRIMITIVES or tp is Any or tp is _NoneType:
        return True
    origin = get_origin(tp)
    if origin is list:
        return _is_plain(get_args(tp)[0])
    if origin is dict:
        return _is_plain(get_args(tp)[1])
    if origin is Union or origin is _pytypes.UnionType:
        return all(_is_plain(a) for a in get_args(tp))
    return False


# -- containers ---------------------------------------------------------------------------


def _list_structure_factory(tp: Any) -> Callable[[Any, Any], list[Any]]:
    (item_tp,) = get_args(tp) or (Any,)
    item = converter.get_structure_hook(item_tp)

    if item_tp is Any:

        def structure_any_list(v: Any, _: Any) -> list[Any]:
            if v.__class__ is list:
                return v
            raise _expected("an array", v)

        return structure_any_list

    if item_tp in _PRIMITIVES:

        def structure_plain_list(v: Any, _: Any) -> list[Any]:
            if v.__class__ is not list:
                raise _expected("an array", v)
            for i, x in enumerate(v):
                if x.__class__ is not item_tp:
                    try:
                        item(x, item_tp)
                    except SchemaError as e:
                        raise e.prefixed(i) from None
            return v

        return structure_plain_list

    def structure_list(v: Any, _: Any) -> list[Any]:
        if v.__class__ is not list:
            raise _expected("an array", v)
        try:
            return [item(x, item_tp) for x in v]
        except Exception:
            pass
        # Slow path, errors only: find the first bad element to say where it is.
        for i, x in enumerate(v):
            try:
                item(x, item_tp)
            except Exception as e:
                raise explain(e).prefixed(i) from None
        raise AssertionError("unreachable")  # pragma: no cover

    return structure_list


def _list_unstructure_factory(tp: Any) -> Callable[[Any], Any]:
    (item_tp,) = get_args(tp) or (Any,)
    if _is_plain(item_tp):
        return identity
    item = converter.get_unstructure_hook(item_tp)

    def unstructure_list(v: list[Any]) -> list[Any]:
        return [item(x) for x in v]

    return unstructure_list


def _dict_structure_factory(tp: Any) -> Callable[[Any, Any], dict[str, Any]]:
    _, value_tp = get_args(tp) or (str, Any)
    if value_tp is Any:

        def structure_object(v: Any, _: Any) -> dict[str, Any]:
            if v.__class__ is dict or isinstance(v, dict):
                return v
            raise _expected("an object", v)

        return structure_object

    value = converter.get_structure_hook(value_tp)

    def structure_dict(v: Any, _: Any) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise _expected("an object", v)
        out = {}
        for k, x in v.items():
            try:
                out[k] = value(x, value_tp)
            except Exception as e:
                raise explain(e).prefixed(k) from None
        return out

    return structure_dict


def _dict_unstructure_factory(tp: Any) -> Callable[[Any], Any]:
    _, value_tp = get_args(tp) or (str, Any)
    if _is_plain(value_tp):
        return identity
    value = converter.get_unstructure_hook(value_tp)

    def unstructure_dict(v: dict[str, Any]) -> dict[str, Any]:
        return {k: value(x) for k, x in v.items()}

    return unstructure_dict


def _is_list(tp: Any) -> bool:
    return get_origin(tp) is list


def _is_dict(tp: Any) -> bool:
    return get_origin(tp) is dict


converter.register_structure_hook_factory(_is_list, _list_structure_factory)
converter.register_unstructure_hook_factory(_is_list, _list_unstructure_factory)
converter.register_structure_hook_factory(_is_dict, _dict_structure_factory)
converter.register_unstructure_hook_factory(_is_dict, _dict_unstructure_factory)


# -- attrs classes ---------------------------------------------------------------------

# variant class -> (union spec, tag it is written with; None for a union's default variant)
_VARIANT_TAGS: dict[type, tuple[TaggedUnion, str | None]] = {}
for _spec in t.TAGGED_UNIONS.values():
    for _tag, _cls in _spec.variants.items():
        _VARIANT_TAGS[_cls] = (_spec, _tag)
    if _spec.default is not None:
        _VARIANT_TAGS[_spec.default] = (_spec, None)


def _overrides(cls: type) -> dict[str, Any]:
    out = {}
    for a in attrs.fields(cls):
        # Fields with a factory default (``[]``) are required on the wire: always written.
        omit = False if isinstance(a.default, attrs.Factory) else None  # type: ignore[arg-type]
        out[a.name] = override(rename=wire_name(a.name), omit_if_default=omit)
    return out


def _class_structure_factory(cls: type) -> Callable[[Any, Any], Any]:
    if cls is UnknownVariant:
        raise TypeError("UnknownVariant is produced by decoding a union, not decoded directly")
    fn = make_structure_fn(cls, wire_name, converter.get_structure_hook, explain)
    if cls is t.SetSessionConfigOptionRequest:
        fn = _config_value_structure(fn)
    return fn


def _class_unstructure_factory(cls: type) -> Callable[[Any], Any]:
    if cls is UnknownVariant:
        return _unstructure_unknown
    gen: Callable[[Any], Any] = make_dict_unstructure_fn(
        cls, converter, _cattrs_omit_if_default=True, **_overrides(cls)
    )
    if cls is t.SetSessionConfigOptionRequest:
        return _config_value_unstructure(gen)
    spec, tag = _VARIANT_TAGS.get(cls, (None, None))
    if spec is None or tag is None:
        return gen
    key = spec.key

    def unstructure_variant(obj: Any) -> dict[str, Any]:
        d: dict[str, Any] = gen(obj)
        d[key] = tag
        return d

    unstructure_variant.__qualname__ = unstructure_variant.__name__ = f"unstructure_{cls.__name__}"
    return unstructure_variant


def _unstructure_unknown(obj: UnknownVariant) -> dict[str, Any]:
    return obj.data


converter.register_structure_hook_factory(attrs.has, _class_structure_factory)
converter.register_unstructure_hook_factory(attrs.has, _class_unstructure_factory)


def _config_value_structure(
    gen: Callable[[dict[str, Any], Any], Any],
) -> Callable[[dict[str, Any], Any], Any]:
    """``session/set_config_option``: ``"type": "boolean"`` goes with a bool value, no type
    with a value id. Anything else is a kind of option this version cannot set."""

    def structure(v: dict[str, Any], tp: Any) -> Any:
        obj = gen(v, tp)
        typ = v.get("type")
        if typ is None:
            if obj.value.__class__ is not str:
                raise _expected("a string", obj.value).prefixed("value")
        elif typ == "boolean":
            if obj.value.__class__ is not bool:
                raise _expected("a boolean", obj.value).prefixed("value")
        elif typ.__class__ is str:
            raise SchemaError(f"unsupported config option type {typ!r}", ("type",))
        else:
            raise _expected("a string", typ).prefixed("type")
        return obj

    return structure


def _config_value_unstructure(
    gen: Callable[[Any], dict[str, Any]],
) -> Callable[[Any], dict[str, Any]]:
    def unstructure(obj: Any) -> dict[str, Any]:
        d = gen(obj)
        if obj.value is True or obj.value is False:
            d["type"] = "boolean"
        return d

    return unstructure


# -- unions ----------------------------------------------------------------------------

_TAGGED_BY_MEMBERS = {frozenset(get_args(u)): spec for u, spec in t.TAGGED_UNIONS.items()}
_EMBEDDED_RESOURCE = frozenset(get_args(t.EmbeddedResourceResource))
_SELECT_OPTIONS = frozenset(get_args(t.SessionConfigSelectOptions))


def _is_union(tp: Any) -> bool:
    origin = get_origin(tp)
    return origin is Union or origin is _pytypes.UnionType


def _tagged_structure(spec: TaggedUnion) -> Callable[[Any, Any], Any]:
    key = spec.key
    # Filled on first use: building the variants' hooks here could recurse into this one.
    by_tag: dict[str, Callable[[dict[str, Any], Any], Any]] = {}
    default: dict[str, Callable[[dict[str, Any], Any], Any]] = {}

    def resolve() -> None:
        for tag, cls in {**spec.decode_only, **spec.variants}.items():
            by_tag[tag] = converter.get_structure_hook(cls)
        if spec.default is not None:
            default[""] = converter.get_structure_hook(spec.default)

    def structure_tagged(v: Any, _: Any) -> Any:
        if v.__class__ is not dict and not isinstance(v, dict):
            raise _expected("an object", v)
        tag = v.get(key, _MISSING)
        if tag.__class__ is str:
            hook = by_tag.get(tag)
            if hook is None:
                if by_tag:
                    return UnknownVariant(tag, v)
                resolve()
                return structure_tagged(v, _)
            # Class hooks ignore their second argument: they know their class.
            return hook(v, None)
        if tag is _MISSING:
            if spec.default is None:
                raise SchemaError("missing required field", (key,))
            if not default:
                resolve()
            return default[""](v, None)
        raise _expected("a string", tag).prefixed(key)

    return structure_tagged


def _by_class_unstructure(members: frozenset[Any], what: str) -> Callable[[Any], Any]:
    by_class: dict[type, Callable[[Any], Any]] = {}

    def unstructure_member(obj: Any) -> Any:
        try:
            return by_class[obj.__class__](obj)
        except KeyError:
            pass
        cls = obj.__class__
        if cls not in members:
            raise TypeError(f"{cls.__name__} is not a {what} variant") from None
        by_class[cls] = converter.get_unstructure_hook(cls)
        return by_class[cls](obj)

    return unstructure_member


def _embedded_resource_structure(v: Any, _: Any) -> Any:
    # Untagged on the wire: a text resource has "text", a binary one "blob".
    if not isinstance(v, dict):
        raise _expected("an object", v)
    if "text" in v:
        return converter.get_structure_hook(t.TextResourceContents)(v, t.TextResourceContents)
    if "blob" in v:
        return converter.get_structure_hook(t.BlobResourceContents)(v, t.BlobResourceContents)
    raise SchemaError('expected a resource with "text" or "blob"')


def _select_options_structure(v: Any, _: Any) -> Any:
    # A flat list of options, or a list of groups: the first element says which.
    if v.__class__ is not list:
        raise _expected("an array", v)
    grouped = bool(v) and isinstance(v[0], dict) and "group" in v[0]
    tp = list[t.SessionConfigSelectGroup] if grouped else list[t.SessionConfigSelectOption]
    return converter.get_structure_hook(tp)(v, tp)


def _primitive_union_structure(members: tuple[Any, ...]) -> Callable[[Any, Any], Any]:
    plain = tuple(m for m in members if m in _PRIMITIVES)
    lists = [m for m in members if get_origin(m) is list]
    names = [_PRIMITIVE_NAMES[m] for m in plain] + ["an array of strings"] * bool(lists)
    what = ", ".join(names[:-1]) + " or " + names[-1]
    accepts = set(plain)
    if float in accepts:
        accepts.add(int)
    list_hook = converter.get_structure_hook(lists[0]) if lists else None

    def structure_primitive_union(v: Any, _: Any) -> Any:
        if v.__class__ in accepts:
            return v
        if list_hook is not None and v.__class__ is list:
            return list_hook(v, None)
        raise _expected(what, v)

    return structure_primitive_union


def _union_structure_factory(tp: Any) -> Callable[[Any, Any], Any]:
    args = get_args(tp)
    members = tuple(a for a in args if a is not _NoneType)
    nullable = len(members) < len(args)
    key = frozenset(members)
    if key in _TAGGED_BY_MEMBERS:
        inner = _tagged_structure(_TAGGED_BY_MEMBERS[key])
    elif key == _EMBEDDED_RESOURCE:
        inner = _embedded_resource_structure
    elif key == _SELECT_OPTIONS:
        inner = _select_options_structure
    elif len(members) == 1:
        inner = converter.get_structure_hook(members[0])
    elif all(m in _PRIMITIVES or (get_origin(m) is list and _is_plain(m)) for m in members):
        inner = _primitive_union_structure(members)
    else:
        raise TypeError(f"no decoding rule for {tp!r}")
    if not nullable:
        return inner
    if len(members) == 1 and members[0] in _PRIMITIVES and members[0] is not float:
        # Optional strings, ints and bools are common enough for a one-call check.
        exact = members[0]

        def structure_optional_primitive(v: Any, _: Any) -> Any:
            if v is None or v.__class__ is exact:
                return v
            return inner(v, exact)

        return structure_optional_primitive
    inner_tp = members[0] if len(members) == 1 else Union[members]  # noqa: UP007

    def structure_optional(v: Any, _: Any) -> Any:
        return None if v is None else inner(v, inner_tp)

    return structure_optional


def _union_unstructure_factory(tp: Any) -> Callable[[Any], Any]:
    members = tuple(a for a in get_args(tp) if a is not _NoneType)
    if _is_plain(Union[members]):  # noqa: UP007
        return identity
    key = frozenset(members)
    if key == _SELECT_OPTIONS:
        item = _by_class_unstructure(
            frozenset({t.SessionConfigSelectOption, t.SessionConfigSelectGroup}),
            "SessionConfigSelectOptions",
        )
        return lambda v: [item(x) for x in v]
    if len(members) == 1 and attrs.has(members[0]):
        # An instance of a subclass encodes as what it is: that is how an unstable
        # extension of a stable type (schema/unstable.py) keeps its extra fields.
        base = members[0]
        base_hook = converter.get_unstructure_hook(base)

        def as_its_class(v: Any) -> Any:
            return base_hook(v) if v.__class__ is base else to_wire(v)

        inner: Callable[[Any], Any] = as_its_class
    elif len(members) == 1:
        inner = converter.get_unstructure_hook(members[0])
    else:
        inner = _by_class_unstructure(key, " | ".join(m.__name__ for m in members))

    # None never reaches here from a class (None fields are left out), only from a caller
    # encoding an Optional value directly.
    def unstructure_optional(v: Any) -> Any:
        return None if v is None else inner(v)

    return unstructure_optional if len(members) < len(get_args(tp)) else inner


converter.register_structure_hook_factory(_is_union, _union_structure_factory)
converter.register_unstructure_hook_factory(_is_union, _union_unstructure_factory)


# -- the public functions ----------------------------------------------------------------

_structure_hooks: dict[Any, Callable[[Any, Any], Any]] = {}
_unstructure_hooks: dict[type, Callable[[Any], Any]] = {}


def to_wire(obj: Any) -> Any:
    """Encode an ACP value (an attrs instance, a list of them, ...) as JSON-ready data.

    The result holds only dicts, lists, strings, numbers, bools and None, ready for
    ``orjson.dumps``. Optional attributes that are None are left out. Nothing is validated:
    encoding trusts the objects it is given. Containers inside ``meta``, ``raw_input`` and
    the like are passed through, not copied.
    """
    try:
        return _unstructure_hooks[obj.__class__](obj)
    except KeyError:
        pass
    hook = converter.get_unstructure_hook(obj.__class__)
    _unstructure_hooks[obj.__class__] = hook
    return hook(obj)


def from_wire(tp: Any, data: Any) -> Any:
    """Decode JSON data (as parsed by ``orjson.loads``) as the ACP type ``tp``.

    ``tp`` is a class of ``trio_acp.schema`` or one of its union aliases
    (``from_wire(SessionUpdate, {...})``). Raises :class:`SchemaError`, and nothing else,
    when ``data`` does not fit. Extra keys are ignored; tagged unions decode unknown tags as
    :class:`UnknownVariant`. A class without required fields also decodes from None: a
    JSON-RPC result or params that is null or absent (``"result": null`` for session/load in
    the stable docs, no params for logout) means "all defaults".
    Containers of the input may be shared with the result rather than copied.
    """
    try:
        hook = _structure_hooks[tp]
    except KeyError:
        hook = _structure_hooks[tp] = converter.get_structure_hook(tp)
    if data is None and _all_optional(tp):
        return tp()
    try:
        return hook(data, tp)
    except SchemaError:
        raise
    except Exception as e:
        raise explain(e) from None


@functools.cache
def _all_optional(tp: Any) -> bool:
    return attrs.has(tp) and all(a.default is not attrs.NOTHING for a in attrs.fields(tp))
