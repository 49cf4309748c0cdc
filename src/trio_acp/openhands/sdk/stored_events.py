"""A stored conversation's events, read for `session/load`'s replay without the SDK's
validation (docs/ARCHITECTURE.md, "session/load").

Opening a conversation, the SDK reads every event file and validates it with pydantic;
for a long history that is most of a load (bench/README.md, "Big histories"), nearly all
of it the SDK's discriminated-union validator, run in Python for every nested object.
The replay needs far less: the translator reads a few fields of each event. So the files
are parsed as plain JSON (orjson) and each event is a *view* of its JSON: an object whose
class bears the SDK class's name and ancestry (what the translator recognizes events by:
`translate.content.class_names`), whose fields are read from the JSON when first asked
for, with the SDK field's default when the file leaves it out, and converted as the SDK's
validation converts them for the simple annotations (strings, numbers, enums, lists,
nested models, unions of models told apart by their discriminator). Anything else —
another annotation, a property or method of the SDK class, a class with validators of its
own — is read from the SDK's own object, validated from the same JSON when first needed
(`StoredEvent.sdk_object`). tests/openhands/test_stored_events.py compares the replay of
the views with the replay of the SDK's parse, on every scripted scenario's conversation.

`read_events` takes only what the SDK's open would take the same way: the event files the
SDK's `EventLog` iterates (contiguous indexes from 0), every one non-empty JSON naming a
known kind, with no key its class does not have, and the active branch (`base_state.json`'s
leaf back to the root, the SDK's `path_to_root`) whole. Anything else raises
`StoredEventsError`, and the caller lets the SDK open the conversation first, which
reports the damage as before.

Imports the SDK: only `trio_acp.openhands.sdk.loaded` imports it.
"""

from __future__ import annotations

import collections.abc
import enum
import os
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import orjson
from openhands.sdk.conversation.persistence_const import EVENT_NAME_RE, EVENTS_DIR
from openhands.sdk.event import Event
from openhands.sdk.event.types import ROOT_PARENT_ID
from openhands.sdk.utils.models import DiscriminatedUnionMixin
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from trio_acp.openhands.sessions.small_files import read_bytes

__all__ = ["StoredEvent", "StoredEventsError", "read_events"]


class StoredEventsError(Exception):
    """The stored events cannot be read this way (a damaged file, a gap, a broken
    branch...): open the conversation the SDK's way, which reports what is wrong."""


class _Real(Exception):
    """This value is read from the SDK's own object (no view of it)."""


def read_events(conversation_dir: Path, leaf_id: str | None) -> list[StoredEvent | BaseModel]:
    """The conversation's events as `LocalConversation.state.events` iterates them (the
    SDK's `EventLog`: the contiguous indexes from 0), as views; `leaf_id` is the active
    branch's head (`base_state.json`'s `leaf_event_id`), checked as the SDK's open walks it."""
    folder = conversation_dir / EVENTS_DIR
    by_index: dict[int, tuple[str, str]] = {}
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                match = EVENT_NAME_RE.match(entry.name)
                if match is not None:
                    by_index[int(match.group("idx"))] = (entry.name, match.group("event_id"))
    except FileNotFoundError:
        by_index = {}
    except OSError as exc:
        raise StoredEventsError(f"cannot list {folder}: {exc}") from None
    count = 0
    while count in by_index:
        count += 1
    if count != len(by_index):
        raise StoredEventsError("a gap in the event files")
    events: list[StoredEvent | BaseModel] = []
    ids: dict[str, int] = {}
    parents: list[str | None] = []
    for index in range(count):
        name, event_id = by_index[index]
        try:
            data = orjson.loads(read_bytes(os.path.join(folder, name)))
        except (OSError, orjson.JSONDecodeError) as exc:
            raise StoredEventsError(f"{name}: {type(exc).__name__}") from None
        if not isinstance(data, dict):
            raise StoredEventsError(f"{name}: not an object")
        event = _event_view(data, name)
        events.append(event)
        ids.setdefault(event_id, index)
        parent = data.get("parent_id")
        if parent is not None and not isinstance(parent, str):
            raise StoredEventsError(f"{name}: parent_id")
        parents.append(parent)
    _check_branch(leaf_id, ids, [by_index[i][1] for i in range(count)], parents)
    return events


def _check_branch(
    leaf_id: str | None, ids: dict[str, int], names: list[str], parents: list[str | None]
) -> None:
    """The SDK's `EventLog.path_to_root(leaf)` would succeed: every id on the way known,
    no cycle (its `_effective_parent_id`: a legacy event without a parent follows the one
    before it)."""
    seen: set[str] = set()
    current = leaf_id
    while current is not None:
        if current in seen:
            raise StoredEventsError("a cycle in the event tree")
        seen.add(current)
        index = ids.get(current)
        if index is None:
            raise StoredEventsError(f"the event tree names a missing event {current}")
        parent = parents[index]
        if parent == ROOT_PARENT_ID:
            current = None
        elif parent is not None:
            current = parent
        elif index == 0:
            current = None
        else:
            current = names[index - 1]


# --------------------------------------------------------------------------- views


class StoredEvent:
    """A view of an SDK model's stored JSON (see the module's docstring). Its class is
    made per SDK class (`_view_class`); `sdk_object()` is the SDK's own object."""

    __slots__ = ("__dict__", "_data", "_real")
    # Per view class: the SDK class, its fields' readers, its properties' getters, the
    # SDK's class names.
    _sdk: type[BaseModel]
    _fields: dict[str, _Field]
    _properties: dict[str, Callable[[Any], Any]]
    _plain: frozenset[str]  # the JSON keys whose value is the field's (`_make`)
    _checks: tuple[tuple[str, tuple[type, ...]], ...]  # scalar keys, their JSON types
    _names: frozenset[str]  # every attribute of the SDK class
    sdk_class_names: tuple[str, ...]

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # What the SDK's own properties, run on the view, check with isinstance (a
        # content block's type...): the view passes for an instance of its SDK class.
        return self._sdk

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self._real: BaseModel | None = None

    def sdk_object(self) -> BaseModel:
        real = self._real
        if real is None:
            real = self._real = self._sdk.model_validate(self._data)
        return real

    def __getattr__(self, name: str) -> Any:
        # Only for what is not yet in the instance's dict: read once, then kept. (A
        # long replay asks this ~9 times an event: the field's read is inlined.)
        field = self._fields.get(name)
        if field is not None:
            key, other, convert, default = field
            value = self._data.get(key, _ABSENT)
            if value is _ABSENT and other is not None:
                value = self._data.get(other, _ABSENT)
            if value is _ABSENT:
                value = default.factory() if type(default) is _Fresh else default
            elif value is not None and convert is not None:
                try:
                    value = convert(value)
                except _Real:
                    value = _REAL
            if value is _REAL:
                value = getattr(self.sdk_object(), name)
        elif name.startswith("__"):
            raise AttributeError(name)
        elif name not in self._names and not name.startswith("_"):
            # Nothing of the SDK's class: its object would not have it either (a
            # translator asking `getattr(event, "x", None)` of every event).
            raise AttributeError(name)
        else:
            getter = self._properties.get(name)
            value = _REAL
            if getter is not None:
                try:
                    value = getter(self)
                except Exception:  # the SDK's object says (or raises) the same
                    value = _REAL
            if value is _REAL:
                value = getattr(self.sdk_object(), name)
        self.__dict__[name] = value
        return value

    def __repr__(self) -> str:
        return f"<stored {self._sdk.__name__}>"


_Convert = Callable[[Any], Any]
_Field = tuple[str, "str | None", "_Convert | None", Any]

_REAL = object()  # read from the SDK's object
_VIEWS: dict[type[BaseModel], type[StoredEvent] | None] = {}
_KEYS: dict[type[BaseModel], frozenset[str]] = {}
# Per class: the JSON keys of its required fields (`_event_view`).
_REQUIRED: dict[type[BaseModel], frozenset[str]] = {}
_EVENT_KINDS: dict[str, type[BaseModel]] = {}
_FLOAT = (int, float)
# The SDK's validators a view can do without: the discriminated union's dispatch (done
# by `kind` here), the reserved-id check (`_event_view`), and the removal of deprecated
# keys (a JSON object with a key its class lacks is not viewed).
_VALIDATORS_VIEWED = {"_validate_subtype", "_reject_reserved_id", "_handle_deprecated_fields"}


def _event_view(data: dict[str, Any], name: str) -> StoredEvent | BaseModel:
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise StoredEventsError(f"{name}: no kind")
    cls = _EVENT_KINDS.get(kind)
    if cls is None:
        try:
            cls = _EVENT_KINDS[kind] = Event.resolve_kind(kind)
        except Exception:
            raise StoredEventsError(f"{name}: unknown kind {kind}") from None
    if data.get("id") == ROOT_PARENT_ID:
        raise StoredEventsError(f"{name}: a reserved id")
    view = _view_class(cls)
    if view is None:  # read by the SDK: its validators, or its set-up after validation
        try:
            return cls.model_validate(data)
        except Exception as exc:  # damaged: the SDK's open names it
            raise StoredEventsError(f"{name}: {type(exc).__name__}") from None
    if not _KEYS[cls].issuperset(data):
        raise StoredEventsError(f"{name}: a key {kind} does not have")
    if not _REQUIRED[cls] <= data.keys():
        raise StoredEventsError(f"{name}: a required field is missing")
    try:
        return _make(view, data)
    except _Real:
        # The event's own scalar fields are checked now (cheap), a damaged one is then
        # the SDK's to name; nested values are read, or found damaged, when asked for.
        raise StoredEventsError(f"{name}: the type of a field") from None


def _make(view: type[StoredEvent], data: dict[str, Any]) -> StoredEvent:
    """A view of `data`, its plain fields (strings, booleans, integers, literals: the JSON
    value is the field's value) in its instance dict at once: a replay reads them as
    plain attributes, only the others go through `StoredEvent.__getattr__`. `_Real` for a
    scalar field of the wrong JSON type."""
    for key, types_ in view._checks:
        value = data.get(key)
        if value is not None and type(value) not in types_:
            raise _Real
    built = view(data)
    plain = view._plain
    built.__dict__ = {key: value for key, value in data.items() if key in plain}
    return built


def _view_class(cls: type[BaseModel]) -> type[StoredEvent] | None:
    """The view class of `cls`, or None: `cls` is read by the SDK (validators of its own,
    set-up after validation)."""
    if cls in _VIEWS:
        return _VIEWS[cls]
    _VIEWS[cls] = None  # a model nested in itself reads as the SDK's
    if _has_own_logic(cls):
        return None
    fields: dict[str, _Field] = {}
    keys = {"kind"}
    by_name = bool(cls.model_config.get("populate_by_name"))
    plain: set[str] = set()
    checks: list[tuple[str, tuple[type, ...]]] = []
    for field_name, info in cls.model_fields.items():
        key = info.alias or field_name
        keys.add(key)
        other = field_name if by_name and key != field_name else None
        if other is not None:
            keys.add(other)
        fields[field_name] = field = _field_reader(key, other, info)
        if other is None and key == field_name and field[2] in _PLAIN_TYPES:
            types_ = _PLAIN_TYPES[field[2]]
            if types_ is not None:
                checks.append((key, types_))
            if types_ is not _FLOAT:  # a float field's int is converted when read
                plain.add(key)
    _KEYS[cls] = frozenset(keys)
    _REQUIRED[cls] = frozenset(
        info.alias or field_name
        for field_name, info in cls.model_fields.items()
        if info.is_required() and not by_name
    )
    properties: dict[str, Callable[[Any], Any]] = {}
    for base in reversed(cls.__mro__):
        if base.__module__.startswith(("pydantic", "builtins", "abc", "typing")):
            continue
        for attr, value in vars(base).items():
            if isinstance(value, property) and value.fget is not None:
                properties[attr] = value.fget
    view = type(
        cls.__name__,
        (StoredEvent,),
        {
            "__slots__": (),
            "_sdk": cls,
            "_fields": fields,
            "_properties": properties,
            "_plain": frozenset(plain),
            "_checks": tuple(checks),
            "_names": frozenset(dir(cls)),
            "sdk_class_names": tuple(c.__name__ for c in cls.__mro__),
        },
    )
    _VIEWS[cls] = view
    return view


def _has_own_logic(cls: type[BaseModel]) -> bool:
    decorators = cls.__pydantic_decorators__
    for group in (
        decorators.validators,
        decorators.field_validators,
        decorators.root_validators,
        decorators.model_validators,
    ):
        if any(name not in _VALIDATORS_VIEWED for name in group):
            return True
    if (
        cls.model_config.get("validate_by_name")
        or cls.model_config.get("validate_by_alias") is False
    ):
        return True
    post_init = cls.model_post_init
    # pydantic's own set-up of private attributes is not the class's logic.
    return (
        post_init is not BaseModel.model_post_init
        and post_init.__name__ != "init_private_attributes"
    )


def _field_reader(key: str, other: str | None, info: FieldInfo) -> _Field:
    """(JSON key, the field's name if it may come under it too, conversion, the value
    when the key is absent); `_REAL`: read from the SDK's object."""
    try:
        convert: _Convert | None = _converter(info.annotation)
    except _Real:
        convert = _always_real
    default = info.default
    factory = info.default_factory
    if factory in (list, dict, set, frozenset, tuple):
        default = _Fresh(factory)  # an empty one, made when read
    elif (
        factory is not None  # the SDK's own factory (an id, a time...)
        or default is PydanticUndefined  # a required field, missing
        or isinstance(default, (list, dict, set))  # pydantic copies a mutable default
    ):
        default = _REAL
    return (key, other, convert, default)


class _Fresh:
    """A field's default made anew each time (a builtin default factory)."""

    __slots__ = ("factory",)

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory


def _always_real(value: Any) -> Any:
    raise _Real


_ABSENT = object()
_PLAIN = (typing.Any, type(None), object)


def _converter(annotation: Any) -> _Convert | None:
    """How the SDK's validation turns the JSON value into the field's value: None for as
    it is; `_Real` for what only the SDK's validation can tell."""
    if annotation in _EXACT:
        return _EXACT[annotation]
    if annotation in _PLAIN:
        return None
    if annotation is float:
        return _float
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return None
    if origin is Annotated:
        if any(not isinstance(m, FieldInfo) for m in annotation.__metadata__):
            raise _Real
        return _converter(args[0])
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            return _converter(members[0])
        if all(isinstance(m, type) and issubclass(m, BaseModel) for m in members):
            return _union_of_models(members)
        if all(m in (str, bool) for m in members):
            return None
        raise _Real
    if origin in (list, collections.abc.Sequence):  # a JSON array validates as a list
        inner = _converter(args[0]) if args else None
        return _list_of(inner)
    if origin in (set, frozenset):
        if args and _converter(args[0]) not in _PLAIN_TYPES:
            raise _Real  # a set of models (unhashable): the SDK's
        return _set_of(origin)
    if origin is dict:
        if args and args[0] is not str:
            raise _Real
        inner = _converter(args[1]) if args else None
        return _dict_of(inner)
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return _enum(annotation)
        if issubclass(annotation, BaseModel):
            return _model(annotation)
    raise _Real


def _exact(kind: type) -> _Convert:
    """The JSON value as it is, if it is of `kind` exactly (else the SDK's validation says
    what becomes of it)."""

    def check(value: Any) -> Any:
        if type(value) is not kind:
            raise _Real
        return value

    return check


_EXACT: dict[type, _Convert] = {kind: _exact(kind) for kind in (str, bool, int)}


def _float(value: Any) -> Any:
    if type(value) is int:
        return float(value)
    if type(value) is not float:
        raise _Real
    return value


# The conversions whose JSON value is checked when a view is made (`_make`), by the JSON
# types they take: None, any (the value is the field's); `_FLOAT`, checked there but
# converted when read.
_PLAIN_TYPES: dict[_Convert | None, tuple[type, ...] | None] = {
    None: None,
    **{check: (kind,) for kind, check in _EXACT.items()},
    _float: _FLOAT,
}


def _enum(cls: type[enum.Enum]) -> _Convert:
    def convert(value: Any) -> Any:
        try:
            return cls(value)
        except ValueError:
            raise _Real from None

    return convert


def _list_of(inner: _Convert | None) -> _Convert:
    def convert(value: Any) -> Any:
        if type(value) is not list:
            raise _Real
        return list(value) if inner is None else [inner(v) for v in value]

    return convert


def _set_of(kind: type) -> _Convert:
    def convert(value: Any) -> Any:
        if type(value) is not list:
            raise _Real
        try:
            return kind(value)
        except TypeError:  # an unhashable member: the SDK's validation says so
            raise _Real from None

    return convert


def _dict_of(inner: _Convert | None) -> _Convert:
    def convert(value: Any) -> Any:
        if type(value) is not dict:
            raise _Real
        return dict(value) if inner is None else {k: inner(v) for k, v in value.items()}

    return convert


def _model(cls: type[BaseModel]) -> _Convert:
    def convert(value: Any) -> Any:
        if type(value) is not dict:
            raise _Real
        target = cls
        if issubclass(cls, DiscriminatedUnionMixin):
            kind = value.get("kind")
            if not isinstance(kind, str):
                raise _Real
            try:
                target = cls.resolve_kind(kind)
            except Exception:
                raise _Real from None
        view = _view_class(target)
        if view is None:  # the SDK's own object (its validators)
            try:
                return target.model_validate(value)
            except Exception:
                raise _Real from None
        if not _KEYS[target].issuperset(value) or not _REQUIRED[target] <= value.keys():
            raise _Real
        return _make(view, value)

    return convert


def _union_of_models(members: list[type[BaseModel]]) -> _Convert:
    """Models told apart by a `type` literal each has (the SDK's content blocks)."""
    by_tag: dict[str, type[BaseModel]] = {}
    for member in members:
        info = member.model_fields.get("type")
        if info is None or typing.get_origin(info.annotation) is not Literal:
            raise _Real
        for tag in typing.get_args(info.annotation):
            if tag in by_tag:
                raise _Real
            by_tag[tag] = member
    convert_by_tag = {tag: _model(member) for tag, member in by_tag.items()}

    def convert(value: Any) -> Any:
        if type(value) is not dict:
            raise _Real
        tag = value.get("type")
        converter = convert_by_tag.get(tag) if isinstance(tag, str) else None
        if converter is None:
            raise _Real
        return converter(value)

    return convert
