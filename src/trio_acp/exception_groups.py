"""Taking exception groups apart: the one place the public context managers
(`rpc.open_peer`, `openhands.open_openhands_agent`) and the session boundary learn what
failed inside a nursery's group, and re-raise it alone.

Pure: imports neither trio nor the SDK (the rpc layer uses it).
"""

from __future__ import annotations

from typing import NoReturn


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside `exc`, however deeply grouped (`[exc]` for a lone one)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for member in exc.exceptions for leaf in leaves(member)]
    return [exc]


def reraise(exc: BaseException) -> NoReturn:
    """Raise `exc` from inside an `except` block without making the group being handled
    its `__context__` (the trick Trio's own nursery uses)."""
    context = exc.__context__
    try:
        raise exc
    finally:
        exc.__context__ = context
        del exc, context
