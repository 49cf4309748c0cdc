"""Reading the fields of litellm's stream chunks quickly: `field(obj, name)`.

Every streamed token is a litellm `ModelResponseStream` whose `choices[i]` and `delta` are
pydantic models that keep most of their fields in ``__pydantic_extra__``, not in the
instance ``__dict__``; plain ``getattr`` then misses the normal lookup and runs pydantic's
``BaseModel.__getattr__`` (about 1–2 µs each), and a field the delta leaves out
(``reasoning_content`` on a plain text delta) raises and catches an AttributeError inside it
(about 5–10 µs). Reading a token takes seven such lookups. `field` reads the dicts first:
the same answers as ``getattr(obj, name, None)``, several times faster (bench/README.md,
"Streaming cost").
"""

from __future__ import annotations

from trio_acp.openhands.translate.shapes import SdkObject

__all__ = ["field"]

_MISSING = object()
# (class, name) -> whether the class (its MRO) defines `name`. Looked up in the classes'
# own dicts: getattr on a pydantic model *class* runs its metaclass's __getattr__, which
# raises for every field name. A handful of entries: the stream's few classes × the names
# read here.
_CLASS_ATTRIBUTES: dict[tuple[type, str], bool] = {}


def _on_class(cls: type, name: str) -> bool:
    key = (cls, name)
    found = _CLASS_ATTRIBUTES.get(key)
    if found is None:
        found = _CLASS_ATTRIBUTES[key] = any(name in vars(base) for base in cls.__mro__)
    return found


def field(obj: object, name: str) -> SdkObject:
    """``getattr(obj, name, None)`` for a public attribute name, fast on pydantic models
    whose fields live in ``__pydantic_extra__`` (litellm's stream types)."""
    if _on_class(type(obj), name):
        # A class attribute, property or descriptor: the normal lookup decides.
        return getattr(obj, name, None)
    attributes = getattr(obj, "__dict__", None)
    if attributes is not None:
        value = attributes.get(name, _MISSING)
        if value is not _MISSING:
            return value
    extra = getattr(obj, "__pydantic_extra__", None)
    if isinstance(extra, dict):
        # What pydantic's __getattr__ would find (public names are never private
        # attributes), or its AttributeError: None.
        return extra.get(name)
    return getattr(obj, name, None)
