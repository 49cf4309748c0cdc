"""ACP v1 wire types and their JSON encoding.

Pure data: attrs classes for every type of the official ACP v1 JSON Schema (generated into
:mod:`trio_acp.schema.types`), one converter between them and JSON-ready values
(:func:`to_wire`, :func:`from_wire`), and the tables of which types each method takes
(:mod:`trio_acp.schema.methods`). No I/O, no trio.

Conventions:

- Attributes are snake_case; the wire is the schema's camelCase; ``_meta`` is ``meta``.
  Optional fields default to None and None is left out on output (so an optional field
  cannot be sent as an explicit ``null``).
- A tagged union's variants are classes of their own and the tag is implied by the class:
  ``to_wire(TextContent(text="hi")) == {"type": "text", "text": "hi"}``. Decoding an
  unknown tag gives :class:`UnknownVariant`, which encodes back to the same object.
- Enumerations (ToolKind, StopReason...) are ``str``: any string decodes.
- Decoding is strict about JSON types (a string field rejects ``5``, an integer field
  rejects ``"5"``, ``5.0`` and ``true``) and ignores unknown keys. Errors are
  :class:`SchemaError`, naming the JSON path: ``prompt[0].text: expected a string, got int``.

Leniency towards real peers (decoding only; encoding always follows the schema):

- ``InitializeRequest.client_capabilities`` is None when the client leaves it out (the
  official Python client does when all its capabilities are false): read None as "no
  capabilities", as the spec says of anything omitted.
- Lists the schema requires but peers omit or send as null decode as ``[]`` and are always
  written: ``args``/``env`` of stdio MCP servers, ``headers`` of HTTP/SSE ones, ``mcpServers``
  of session/new and session/load.
- A stdio MCP server may carry ``"type": "stdio"``; an auth method ``"type": "agent"``.
- A class without required fields (``WriteTextFileResponse``, ``LoadSessionResponse``,
  ``LogoutRequest``...) decodes from ``{}`` and from null.
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
