"""`auth/status` and `auth/status_update` (unstable ACP; schema/unstable.py).

The state is what `session/new` would find: `authenticated` when a model is configured
(the settings file or the `LLM_*` variables; its key is not checked, as the schema
allows) and the client has not logged out since; `unauthenticated` otherwise (no model,
unreadable settings, logged out). The one account listed is the configured model, by
name only: never a key.

`auth/status_update` has no client capability in the spec, and a client that does not
know the method may log every such notification as an error: it is sent only to a client
that has asked `auth/status` on this connection, and only when the state differs from
the last one it was told (the schema's SHOULD), after `authenticate` and `logout`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from trio_acp.openhands.setup.settings import SettingsError, load_settings
from trio_acp.schema import unstable

if TYPE_CHECKING:
    from trio_acp.connection import ClientProxy

log = logging.getLogger(__name__)


def auth_status(
    env: Mapping[str, str] | None, logged_out: Callable[[], bool]
) -> unstable.AuthStatusResponse:
    """The agent's authentication state now (reads the settings; never raises)."""
    try:
        settings = load_settings(env)
    except SettingsError:
        return unstable.AuthStatusResponse(state="unauthenticated")
    model = (settings.llm or {}).get("model")
    if settings.llm is None or not model:
        return unstable.AuthStatusResponse(state="unauthenticated")
    if logged_out():
        return unstable.AuthStatusResponse(state="unauthenticated")
    return unstable.AuthStatusResponse(
        state="authenticated",
        accounts=[unstable.AuthAccount(label=f"OpenHands model {model}", active=True)],
    )


class AuthStatusReporter:
    """Who to tell of a change, and what they were told last (one per connection)."""

    def __init__(self) -> None:
        self._told: unstable.AuthStatusResponse | None = None

    def asked(self, answer: unstable.AuthStatusResponse) -> unstable.AuthStatusResponse:
        """The client asked `auth/status` and gets `answer`: from now on it is told."""
        self._told = answer
        return answer

    async def maybe_tell(
        self, client: ClientProxy | None, now: unstable.AuthStatusResponse
    ) -> None:
        """`auth/status_update` if the client asked before and the state changed."""
        if self._told is None or client is None or now == self._told:
            return
        self._told = now
        try:
            await client.auth_status_update(state=now.state, accounts=now.accounts)
        except Exception:  # a gone client: nothing to tell
            log.debug("could not send auth/status_update", exc_info=True)
