"""The session's critic: the SDK's API-based critic, attached as the OpenHands CLI attaches it.

The CLI (`openhands_cli/stores/agent_store.py`, `get_default_critic`) attaches one only when
`cli_config.json` has `enable_critic` (the default) and the model is served by the OpenHands
LLM proxy (`https://llm-proxy.<env>.all-hands.dev...`) with a key: an `APIBasedCritic` at
`<base_url>/vllm` (it POSTs `<server_url>/classify`), with the model's key and
`model_name="critic"`. It is derived afresh for every session, never written to a settings
file. We do the same; `TRIO_ACP_CRITIC_URL` names the critic's server explicitly (any
vLLM-style classification service speaking that API, with the model's key), for a proxy
under another name or a self-hosted critic.

The SDK's `IterativeRefinementConfig` is not set: the CLI drives refinement itself on every
answer, not only on `finish` (`critic_review.py`, `turn.py`).

Offline: the critic renders the conversation with the chat template of its tokenizer
(`Qwen/Qwen3-4B-Instruct-2507`), which the SDK fetches from huggingface.co on first use and
caches in `~/.cache/chat_templates/`. The session's warm-up fetches it before the first
answer (`local_conversation.py`), so the first evaluation does not wait for it under the
conversation's lock; `TRIO_ACP_CRITIC_CHAT_TEMPLATE` (a `tokenizer_config.json` or a Jinja
file) gives it without any network.

A failed evaluation is not an error of the turn: the SDK logs it and leaves the answer
without a verdict; `CriticFailures` keeps the reason so the user is told (a notice).

The evaluation is a blocking request on the conversation's loop thread, under the SDK's
step: a cancel could land only once it returned (its timeout, 60 s by default). Its
client abandons the request when the run is cancelled (`_abandonable_client`).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING

from trio_acp.openhands.permissions import run_gate
from trio_acp.openhands.setup.settings import Settings
from trio_acp.openhands.setup.user_setup import SessionSetup

if TYPE_CHECKING:
    import httpx

    from trio_acp.openhands.sdk.classes import LLM, APIBasedCritic

log = logging.getLogger(__name__)

# The CLI's pattern: llm-proxy.{env}.all-hands.dev (prod "app", staging, eval...).
PROXY_URL = re.compile(r"^https?://llm-proxy\.[^./]+\.all-hands\.dev")
CRITIC_MODEL = "critic"
# The SDK's own logger for critic evaluations (`openhands.sdk.agent.critic_mixin`).
SDK_CRITIC_LOGGER = "openhands.sdk.agent.critic_mixin"
_FAILED = "✗ Critic evaluation failed: "


def critic_server_url(base_url: str | None, setup: SessionSetup) -> str | None:
    if setup.critic_url:
        return setup.critic_url.rstrip("/")
    if base_url and PROXY_URL.match(base_url):
        return f"{base_url.rstrip('/')}/vllm"
    return None


def may_have_critic(settings: Settings, setup: SessionSetup) -> bool:
    """Whether a session built from `settings` may have a critic (`session_critic`),
    told before its LLM is built: from the model's settings."""
    base_url = (settings.llm or {}).get("base_url")
    return setup.cli.critic.enable_critic and (
        critic_server_url(base_url if isinstance(base_url, str) else None, setup) is not None
    )


def session_critic(llm: LLM, setup: SessionSetup) -> APIBasedCritic | None:
    """The critic for a session's agent, or None (disabled, or no critic for this model)."""
    settings = setup.cli.critic
    if not settings.enable_critic:
        return None
    server_url = critic_server_url(llm.base_url, setup)
    api_key = llm.api_key
    if server_url is None or api_key is None:
        return None
    from trio_acp.openhands.sdk.agent_setup import api_critic

    # Its request runs on the conversation's loop thread, which a cancel can only stop
    # once it returns: up to `timeout_seconds`. A cancel abandons it instead (run_gate.py).
    # A chat template given by the user replaces the renderer the client would otherwise
    # build from the fetched tokenizer config.
    return api_critic(
        server_url=server_url,
        api_key=api_key,
        model_name=CRITIC_MODEL,
        issue_threshold=settings.issue_threshold,
        timeout_seconds=setup.critic_timeout,
        client=_abandonable_client(),
        chat_template=setup.critic_template,
    )


def _abandonable_client() -> httpx.Client:
    """An httpx client (the critic's own kind) whose request, made in a run, is abandoned
    when the run's gate closes (`RunGate.abandon_on_close`): the SDK takes the error as a
    failed evaluation, and the cancel lands."""
    import httpx

    class AbandonableTransport(httpx.BaseTransport):
        def __init__(self) -> None:
            self._inner = httpx.HTTPTransport()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            gate = run_gate.current()
            if gate is None:
                return self._inner.handle_request(request)
            return gate.abandon_on_close(lambda: self._inner.handle_request(request))

        def close(self) -> None:
            self._inner.close()

    return httpx.Client(transport=AbandonableTransport())


def prime_template(critic: APIBasedCritic) -> None:
    """Fetch (or load from the SDK's cache) the critic's chat template now; blocking."""
    from trio_acp.openhands.sdk import agent_setup

    agent_setup.prime_template(critic)


class CriticFailures(logging.Handler):
    """The reason of the last failed critic evaluation on one thread (a session's loop
    thread: several sessions evaluate at once)."""

    def __init__(self, thread: int | None) -> None:
        super().__init__(logging.ERROR)
        self.thread = thread
        self._lock_ = threading.Lock()
        self._last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.thread is not None and record.thread != self.thread:
            return
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        if message.startswith(_FAILED):
            with self._lock_:
                self._last = message[len(_FAILED) :]

    def take(self) -> str | None:
        with self._lock_:
            last, self._last = self._last, None
        return last

    def attach(self) -> None:
        logging.getLogger(SDK_CRITIC_LOGGER).addHandler(self)

    def detach(self) -> None:
        logging.getLogger(SDK_CRITIC_LOGGER).removeHandler(self)
