"""What a `Session` (session.py) is made of, besides its id, its roots and its client.

`sessions/build.py` assembles these from the user's set-up and the client's request:
- `SessionBuild`: what the session was built from — the SDK, how its conversation is
  opened (in this process, or on an agent-server), how a configured model's LLM is built,
  the secrets to mask, the critic's settings, trio-acp's own credential files;
- `SessionChoices`: what the user picks in the session (model, mode) and what it offers.

The session's storage is the `SessionStore` itself (store.py): its files, its journal and
its rules file all live in the session's directory there.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import attrs

from trio_acp.credentials import SecretValues
from trio_acp.openhands.permissions.policy import ALWAYS_ASK

if TYPE_CHECKING:
    from trio_acp.openhands.backends.conversation import Conversation
    from trio_acp.openhands.permissions.credential_files import CredentialFiles
    from trio_acp.openhands.sdk.classes import LLM, Event, LLMStreamChunk
    from trio_acp.openhands.sdk.classes import LocalConversation as SdkConversation
    from trio_acp.openhands.sdk.loaded import Sdk
    from trio_acp.openhands.setup.models import ModelChoice
    from trio_acp.openhands.setup.user_setup import CriticSettings


class LocalFactory(Protocol):
    """Builds the in-process SDK conversation (blocking: a worker thread calls it)."""

    def __call__(
        self,
        *,
        callbacks: list[Callable[[Event], None]],
        token_callbacks: list[Callable[[LLMStreamChunk], None]],
    ) -> SdkConversation: ...


class OpenConversation(Protocol):
    """Opens a conversation that is not in this process (an agent-server's,
    remote_conversation.py)."""

    async def __call__(
        self,
        *,
        on_event: Callable[[Event], None],
        on_token: Callable[[object], None],  # the server's token events, read duck-typed
        name: str,
    ) -> Conversation: ...


# How a configured model's LLM is built (blocking: a worker thread calls it).
MakeLlm = Callable[["ModelChoice"], "LLM"]


@attrs.frozen
class SessionBuild:
    """What the session was built from (see the module's docstring).

    Exactly one of `open_local` (the conversation runs here) and `open_remote` (on an
    agent-server, which runs its tools and outlives this process) is set.
    """

    # None only in the stand-in of a session whose build waits for the SDK's import
    # (`PrepareBuild`, sessions/deferred_build.py).
    sdk: Sdk | None
    open_local: LocalFactory | None = None
    open_remote: OpenConversation | None = None
    make_llm: MakeLlm | None = None
    secrets: SecretValues = attrs.field(factory=SecretValues)
    # The critic settings, when the agent has a critic.
    critic: CriticSettings | None = None
    # trio-acp's own credential files: reading one is always asked (confirm.py).
    credential_files: CredentialFiles | None = None

    @property
    def in_process(self) -> bool:
        return self.open_remote is None


# What builds a session's `SessionBuild` once the SDK is imported: a session answered
# before the import (sessions/deferred_build.py) opens its conversation in the background.
PrepareBuild = Callable[[], Awaitable[SessionBuild]]


@attrs.frozen
class SessionChoices:
    """The user's choices the session starts with, and the models it offers (options.py)."""

    model: str = ""
    mode: str = ALWAYS_ASK
    models: Sequence[ModelChoice] = ()


def conversation_opener(build: SessionBuild, cwd: str) -> OpenConversation:
    """How a session's conversation is opened: on its agent-server, or here."""
    if build.open_remote is not None:
        return build.open_remote
    if build.open_local is None or build.sdk is None:
        raise TypeError("a SessionBuild needs the SDK and open_local or open_remote")
    from trio_acp.openhands.backends.local_conversation import LocalConversation

    return functools.partial(
        LocalConversation.open,
        build.sdk,
        build.open_local,
        make_llm=build.make_llm,
        credential_files=build.credential_files,
        cwd=cwd,
    )
