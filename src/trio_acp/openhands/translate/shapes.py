"""The shapes `translate/` reads without a class of its own to name them.

Pure: this layer imports no SDK and no litellm (docs/ARCHITECTURE.md, `translate/`), so
their objects are read duck-typed (`fields.py`, `content.py`: by class name along the MRO,
then attributes). These aliases say which untyped value a signature takes, and why it is
untyped, once.
"""

from __future__ import annotations

from typing import Any

#: An SDK event, action, observation or message, or a litellm stream chunk: read duck-typed,
#: since translate/ may not import the SDK (its types live behind `openhands/sdk/`).
SdkObject = Any

#: A tool call's arguments as the model wrote them: a JSON object, any JSON value per key.
ToolArgs = dict[str, Any]

#: A JSON value as it goes out in a tool call's `rawInput` / `rawOutput` (the schema's `Any`).
Json = Any

#: A JSON value we pass on unread, or read only through `isinstance` checks (a settings file,
#: an agent-server body, a tool's params in the agent spec): the SDK and pydantic take it as
#: `Any`, and a recursive JSON type would make every reader narrow what it never reads.
JsonValue = Any

#: A JSON object of that kind (module doc of `JsonValue`).
JsonObject = dict[str, Any]

#: Arguments a wrapper passes on unread to the SDK's or litellm's method it wraps, which types
#: them (or takes them as `**kwargs` itself): naming each would copy the wrapped signature.
PassedOn = Any
