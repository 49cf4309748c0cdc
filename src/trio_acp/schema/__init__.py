"""ACP v1 wire types and their JSON encoding.

Pure data: attrs classes for every type of the official ACP v1 JSON Schema (see
:mod:`trio_acp.schema.types`), one cattrs converter between them and JSON-ready values
(:func:`to_wire`, :func:`from_wire`), and the tables saying which types each method takes
(:mod:`trio_acp.schema.methods`). No I/O, no trio.
"""

from ._converter import converter, from_wire, to_wire
from ._errors import SchemaError
from ._variants import TaggedUnion, UnknownVariant
from .methods import (
    AGENT_METHODS,
    CANCEL_REQUEST_METHOD,
    CLIENT_METHODS,
    PROTOCOL_METHODS,
    PROTOCOL_VERSION,
    MethodSpec,
)
from .types import *  # noqa: F403 -- the generated module's __all__ is the list of types
from .types import __all__ as _types_all

__all__ = [
    "AGENT_METHODS",
    "CANCEL_REQUEST_METHOD",
    "CLIENT_METHODS",
    "PROTOCOL_METHODS",
    "PROTOCOL_VERSION",
    "MethodSpec",
    "SchemaError",
    "TaggedUnion",
    "UnknownVariant",
    "converter",
    "from_wire",
    "to_wire",
    *_types_all,
]
