"""The one exception decoding raises, with the JSON path of the first problem."""

from typing import Any

# What the wire value was, in the words of the error message ("got int").
_KIND = {
    type(None): "null",
    bool: "bool",
    int: "int",
    float: "float",
    str: "string",
    list: "array",
    dict: "object",
}


def kind(value: Any) -> str:
    k = _KIND.get(type(value))
    if k is None:
        for base, name in _KIND.items():
            if isinstance(value, base):
                return name
        return type(value).__name__
    return k


def format_path(path: tuple[str | int, ...]) -> str:
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        elif out:
            out += f".{seg}"
        else:
            out = seg
    return out


class SchemaError(ValueError):
    """A JSON value does not have the shape of the ACP type it was decoded as.

    ``str()`` names the JSON path of the first problem and what is wrong with it, e.g.
    ``prompt[0].text: expected a string, got int`` -- short enough to be the message (and
    ``data``) of a JSON-RPC ``-32602 Invalid params`` error.
    """

    def __init__(self, reason: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(reason, path)
        #: What is wrong, without the path.
        self.reason = reason
        #: Where: object keys and array indices from the decoded value's root.
        self.path = path

    def prefixed(self, *segments: str | int) -> "SchemaError":
        """The same error seen from an enclosing value."""
        return SchemaError(self.reason, segments + self.path)

    def __str__(self) -> str:
        where = format_path(self.path)
        return f"{where}: {self.reason}" if where else self.reason

    def __repr__(self) -> str:
        return f"SchemaError({self.reason!r}, {self.path!r})"
