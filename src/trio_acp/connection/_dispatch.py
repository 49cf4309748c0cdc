"""The typed layer between JSON values and ACP objects, shared by both sides.

A `TypedHandler` turns the rpc layer's ``(method, params)`` calls into calls of an
implementation's methods with decoded schema objects, and a `_Proxy` does the reverse for
calls going out. Both are table-driven: the method tables in `trio_acp.schema` say what a
method's params and result are, and the side-specific table here says which Python method
implements it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from .. import schema
from ..rpc._context import current_request_id
from ..rpc._errors import RequestError
from ..rpc._messages import RequestId

if TYPE_CHECKING:
    from ..rpc import Peer

log = logging.getLogger(__name__)


@attrs.frozen
class Route:
    method: str
    attr: str
    spec: schema.MethodSpec
    required: bool


def build_routes(
    table: dict[str, schema.MethodSpec], attrs_by_method: dict[str, str], required: set[str]
) -> dict[str, Route]:
    return {
        method: Route(method, attrs_by_method[method], spec, method in required)
        for method, spec in table.items()
    }


def missing_required(impl: object, routes: dict[str, Route]) -> list[str]:
    return [
        r.attr for r in routes.values() if r.required and not callable(getattr(impl, r.attr, None))
    ]


def decode_params(route: Route, params: Any) -> Any:
    try:
        return schema.from_wire(route.spec.params, params)
    except schema.SchemaError as exc:
        raise RequestError.invalid_params({"method": route.method, "error": str(exc)}) from None


def encode_result(route: Route, result: Any) -> Any:
    # ACP results are objects: an implementation that returns None for an empty result
    # (e.g. session/load) must still put `{}` on the wire — `null` fails the schema and
    # some clients.
    if result is None:
        return {}
    return schema.to_wire(result)


class TypedHandler:
    """An rpc `Handler` that dispatches to an implementation object by method table.

    Unknown methods and optional methods the implementation lacks answer -32601.
    Method names starting with ``_`` are extensions: they go to ``ext_method`` /
    ``ext_notification`` when the implementation has them (unknown extension
    notifications are ignored, as the spec asks).
    """

    def __init__(
        self,
        impl: object,
        routes: dict[str, Route],
        *,
        on_request: Callable[[str, object], None] | None = None,
        on_received: dict[str, Callable[[Any], None]] | None = None,
    ) -> None:
        self._impl = impl
        self._routes = routes
        # Called with (method, decoded params) before the implementation sees a request;
        # the agent side uses it to learn the client's capabilities from `initialize`.
        self._on_request = on_request
        # {method: hook}: called with the decoded params the moment such a request is
        # read, in wire order (`request_received`); the task gets the same object.
        self._on_received = on_received or {}
        # {request id: decoded params} between the reader and the request's task.
        self._decoded: dict[RequestId, Any] = {}
        self._bound = {m: getattr(impl, r.attr, None) for m, r in routes.items()}

    def request_received(self, request_id: RequestId, method: str, params: Any) -> None:
        """The rpc layer's wire-order hook: the params of a method with an `on_received`
        hook are decoded here, once, handed to the hook, and kept for the request's task.

        Only for requests whose params decode (a malformed one is answered -32602 by its
        task and must leave no bookkeeping behind).
        """
        hook = self._on_received.get(method)
        route = self._routes.get(method)
        if hook is None or route is None or self._bound.get(method) is None:
            return
        try:
            decoded = schema.from_wire(route.spec.params, params)
        except schema.SchemaError:
            return
        self._decoded[request_id] = decoded
        hook(decoded)

    async def handle_request(self, method: str, params: Any) -> Any:
        route = self._routes.get(method)
        if route is None or route.spec.result is None:
            if method.startswith("_"):
                ext = getattr(self._impl, "ext_method", None)
                if ext is not None:
                    return await ext(method, params)
            raise RequestError.method_not_found(method)
        fn = self._bound[method]
        if fn is None:
            raise RequestError.method_not_found(method)
        request_id = current_request_id.get()
        decoded = None
        if self._decoded and request_id is not None:
            decoded = self._decoded.pop(request_id, None)  # decoded once, when it was read
        if decoded is None:
            decoded = decode_params(route, params)
        if self._on_request is not None:
            self._on_request(method, decoded)
        result = await fn(decoded)
        return encode_result(route, result)

    async def handle_notification(self, method: str, params: Any) -> None:
        route = self._routes.get(method)
        if route is None or route.spec.result is not None:
            if method.startswith("_"):
                ext = getattr(self._impl, "ext_notification", None)
                if ext is not None:
                    await ext(method, params)
                return
            # Unknown notifications (including `$/...` ones) are ignored: there is no one
            # to answer, and the spec lets receivers ignore them.
            log.debug("ignoring unknown notification %r", method)
            return
        fn = self._bound[method]
        if fn is None:
            log.debug("ignoring notification %r: not implemented", method)
            return
        try:
            decoded = schema.from_wire(route.spec.params, params)
        except schema.SchemaError as exc:
            log.warning("dropping malformed %s notification: %s", method, exc)
            return
        await fn(decoded)


def build_params[T](cls: Callable[..., T], params: T | None, kwargs: dict[str, object]) -> T:
    """Accept either a ready request object or its fields as keyword arguments."""
    if params is not None:
        if kwargs:
            raise TypeError("pass either a request object or keyword arguments, not both")
        return params
    return cls(**kwargs)


class Proxy:
    """Calls the remote side's methods with schema objects; see the side modules."""

    def __init__(self, peer: Peer | None, table: dict[str, schema.MethodSpec]) -> None:
        # None until the connection opens (the agent side builds its proxy first).
        self._peer = peer
        self._table = table

    @property
    def _live(self) -> Peer:
        if self._peer is None:
            raise RuntimeError("the connection is not open yet")
        return self._peer

    async def _request(
        self, method: str, params: Any, *, on_late: Callable[[Any], None] | None = None
    ) -> Any:
        spec = self._table[method]
        late_raw: Callable[[Any], None] | None = None
        if on_late is not None:
            hook = on_late

            def late_raw(raw: Any) -> None:
                try:
                    decoded = schema.from_wire(spec.result, raw)
                except Exception:
                    log.warning("dropping a malformed late answer to %s", method, exc_info=True)
                    return
                hook(decoded)

        raw = await self._live.request(method, schema.to_wire(params), on_late=late_raw)
        return schema.from_wire(spec.result, raw)

    async def _notify(self, method: str, params: Any, *, at_once: bool = False) -> None:
        await self._live.notify(method, schema.to_wire(params), at_once=at_once)

    async def ext_method(self, method: str, params: Any = None) -> Any:
        """Call an extension method (its name must start with ``_``)."""
        if not method.startswith("_"):
            raise ValueError(f"extension method names start with '_': {method!r}")
        return await self._live.request(method, params if params is not None else {})

    async def ext_notification(self, method: str, params: Any = None) -> None:
        if not method.startswith("_"):
            raise ValueError(f"extension notification names start with '_': {method!r}")
        await self._live.notify(method, params if params is not None else {})
