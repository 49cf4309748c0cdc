"""A session's config options: the approval mode, the model, its reasoning effort, and
whether replies stream; offered to the client (`session/new` and the like), switched on
request (`session/set_mode`, `session/set_config_option`, `/mode`), saved with the session
(store.py) and re-applied when it is opened again.

The session's collaborator for them (`Session.options`): it changes them on the session's
conversation once it exists (`conversation`), and tells the session when the approval mode
changed (`on_mode`: how new tool calls are shown).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable

import trio

from trio_acp import schema
from trio_acp.openhands.backends.conversation import Conversation
from trio_acp.openhands.errors import internal
from trio_acp.openhands.permissions.policy import MODE_IDS, mode_option, mode_state
from trio_acp.openhands.sdk import REASONING_EFFORTS
from trio_acp.openhands.sessions.store import SessionStore
from trio_acp.openhands.setup.config_options import model_option, stream_option
from trio_acp.openhands.setup.models import ModelChoice
from trio_acp.openhands.translate import one_line
from trio_acp.rpc import RequestError

log = logging.getLogger(__name__)


class SessionOptions:
    def __init__(
        self,
        session_id: uuid.UUID,
        *,
        mode: str,
        model: str,
        models: list[ModelChoice],
        offers_booleans: bool,
        store: SessionStore | None,
        send_update: Callable[[schema.SessionUpdate], Awaitable[None]],
        on_mode: Callable[[str], None],
    ) -> None:
        self._id = session_id
        self.mode = mode
        self.model = model
        # The models the `model` option offers (`model` is one's id).
        self.models = list(models)
        # The model's reasoning effort, when it has one to choose (else no option).
        self.reasoning_effort: str | None = None
        # Whether replies stream token by token (the `stream` boolean option).
        self.stream = True
        # Only clients that take boolean options are offered `stream`.
        self._offers_booleans = offers_booleans
        self._store = store
        self._send_update = send_update
        self._on_mode = on_mode
        # One LLM switch at a time: each builds on the LLM the last one installed.
        self._llm_switch = trio.Lock()
        # The session's conversation, once it is open.
        self.conversation: Conversation | None = None

    def mode_state(self) -> schema.SessionModeState:
        return mode_state(self.mode)

    def config_options(self) -> list[schema.SessionConfigOption]:
        options: list[schema.SessionConfigOption] = [
            mode_option(self.mode),
            model_option(self.model, self.models),
        ]
        if self.reasoning_effort is not None:
            options.append(
                schema.SessionConfigOptionSelect(
                    id="thought_level",
                    name="Reasoning effort",
                    category="thought_level",
                    current_value=self.reasoning_effort,
                    options=[
                        schema.SessionConfigSelectOption(value=v, name=v.capitalize())
                        for v in REASONING_EFFORTS
                    ],
                )
            )
        if self._offers_booleans:
            options.append(stream_option(self.stream))
        return options

    def config_values(self) -> dict[str, str | bool]:
        """{config id: value} of every option, offered to this client or not: what a
        fork carries over, and what `set_config_option` re-applies."""
        values: dict[str, str | bool] = {"mode": self.mode, "model": self.model}
        if self.reasoning_effort is not None:
            values["thought_level"] = self.reasoning_effort
        values["stream"] = self.stream
        return values

    async def _set_model(self, value: object) -> None:
        """Switch the session's LLM to another configured model; the next request uses it.

        The reasoning effort follows the new model: kept where it has one (the new
        model's own, or "high", if none was chosen), gone where it has none. Streaming
        stays as the session has it.
        """
        choice = (
            next((c for c in self.models if c.id == value), None)
            if isinstance(value, str)
            else None
        )
        if choice is None:
            ids = [c.id for c in self.models] or [self.model]
            raise RequestError.invalid_params(
                f"unknown model {value!r}; the configured models are: {', '.join(ids)}",
            )
        if choice.id == self.model:
            return
        assert self.conversation is not None
        try:
            new_effort = await self.conversation.use_model(
                choice, reasoning_effort=self.reasoning_effort, stream=self.stream
            )
        except Exception as exc:
            log.warning(
                "switching session %s to model %s failed", self._id, choice.id, exc_info=True
            )
            raise internal(f"model {choice.id!r} cannot be used: {one_line(exc, 500)}") from None
        self.model = choice.id
        self.reasoning_effort = new_effort

    async def _set_stream(self, value: object) -> None:
        if not isinstance(value, bool):
            raise RequestError.invalid_params("the stream option takes a boolean value")
        assert self.conversation is not None
        await self.conversation.update_llm(stream=value)
        self.stream = value

    async def _set_reasoning_effort(self, value: object) -> None:
        if self.reasoning_effort is None:
            raise RequestError.invalid_params("this model has no reasoning effort to choose")
        if not isinstance(value, str) or value not in REASONING_EFFORTS:
            raise RequestError.invalid_params(
                f"reasoning effort must be one of {', '.join(REASONING_EFFORTS)}"
            )
        assert self.conversation is not None
        await self.conversation.update_llm(reasoning_effort=value)
        self.reasoning_effort = value

    async def apply_mode(self, mode: str) -> None:
        assert self.conversation is not None
        await self.conversation.set_mode(mode)
        self._on_mode(mode)

    async def set_mode(self, mode: str, *, announce: bool) -> None:
        """Switch the approval mode; `announce` sends current_mode_update and config_option_update."""
        if mode not in MODE_IDS:
            raise RequestError.invalid_params(
                f"unknown mode {mode!r}; one of: {', '.join(MODE_IDS)}"
            )
        await self.apply_mode(mode)
        self.mode = mode
        self._save_options()
        if announce:
            await self.announce_mode()

    async def announce_mode(self) -> None:
        await self._send_update(schema.CurrentModeUpdate(current_mode_id=self.mode))
        await self._send_update(schema.ConfigOptionUpdate(config_options=self.config_options()))

    async def set_config_option(
        self, config_id: str, value: object
    ) -> list[schema.SessionConfigOption]:
        if config_id == "mode":
            if not isinstance(value, str):
                raise RequestError.invalid_params("the mode option takes a string value")
            await self.set_mode(value, announce=False)
        elif config_id in ("thought_level", "model", "stream"):
            async with self._llm_switch:
                if config_id == "thought_level":
                    await self._set_reasoning_effort(value)
                elif config_id == "model":
                    await self._set_model(value)
                else:
                    # Accepted from any client (a saved value is re-applied this way),
                    # though only clients that take boolean options are offered it.
                    await self._set_stream(value)
        else:
            raise RequestError.invalid_params(f"unknown config option {config_id!r}")
        self._save_options()
        return self.config_options()

    # A session keeps its settings: every config option value is saved with it (the
    # session index, store.py) and re-applied when it is loaded or resumed. The model
    # comes before the reasoning effort, which depends on what the model supports.
    _RESTORE_ORDER = ("mode", "model", "thought_level", "stream")

    def _current_options(self) -> dict[str, str | bool]:
        # Every option, offered to this client or not (a boolean one is kept for a client
        # that takes them).
        return self.config_values()

    def _save_options(self) -> None:
        if self._store is None:
            return
        try:
            self._store.write_options(self._id, self._current_options())
        except OSError:
            log.warning("could not save the settings of session %s", self._id, exc_info=True)

    async def restore(self) -> None:
        if self._store is None:
            return
        saved = self._store.read_options(self._id)
        order = {config_id: i for i, config_id in enumerate(self._RESTORE_ORDER)}
        for config_id in sorted(saved, key=lambda c: (order.get(c, len(order)), c)):
            if self._current_options().get(config_id) == saved[config_id]:
                continue
            try:
                await self.set_config_option(config_id, saved[config_id])
            except RequestError as exc:
                # E.g. a model no longer configured: the session opens with the default.
                log.warning(
                    "session %s: not restoring %s=%r: %s",
                    self._id,
                    config_id,
                    saved[config_id],
                    exc.message,
                )
        self._save_options()
