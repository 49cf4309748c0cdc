"""The pieces the generated types need from hand-written code: unknown variants and the
description of a tagged union."""

from typing import Any

import attrs


@attrs.define
class UnknownVariant:
    """A tagged-union member whose tag this version of the protocol does not know.

    Peers speaking a newer ACP send update kinds, content blocks, config option types... that
    did not exist when this code was written. Rejecting the whole message for that would break
    forward compatibility, so the object is kept as it came: ``tag`` is the value of the
    union's tag key and ``data`` the complete JSON object, which is also exactly what is
    written back out.
    """

    tag: str
    data: dict[str, Any]


@attrs.frozen
class TaggedUnion:
    """How one union is told apart on the wire: the value of ``key`` names the variant."""

    key: str
    variants: dict[str, type]
    #: The variant of an object that has no ``key`` at all (written without it, too).
    default: type | None = None
    #: Extra tag values accepted on input for a variant, never written.
    decode_only: dict[str, type] = attrs.field(factory=dict)
