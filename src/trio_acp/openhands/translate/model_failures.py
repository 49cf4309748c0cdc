"""When the model call fails: what is retried, how long we wait, and what the user is told.

The SDK retries a failed model call with tenacity, on the exceptions its `LLM` lists as
transient (rate limits, 5xx, timeouts, dropped connections, broken streams) and never on
the others (400, 401, 403, 404, a context window exceeded). Its defaults wait 8, 16, 32
and 64 s between five attempts: one HTTP 500 took two minutes to reach the editor. Ours
(`LLM_FAILURE_DEFAULTS`, applied by `sdk.build_llm` wherever the user set nothing):

- 4 attempts, waiting 2, 4 and 8 s between them (14 s of back-off in all);
- a stream that sends nothing for 60 s is a stall (`stream_idle_timeout`), and a timed-out
  attempt (a stall, or the SDK's hard per-attempt `timeout`, 300 s) is retried only once;
- a 429's `Retry-After` is honoured when it asks for at most `RETRY_AFTER_CAP` seconds
  (the wait is then the longer of it and the back-off); a longer one ends the turn at once,
  saying how long the provider asks to wait;
- a prompt too long for the context window is never retried as is: the agent condenses
  the conversation and calls again, and after `CONTEXT_OVERFLOWS` overflows in a row the
  turn ends (the SDK alone would go on condensing to the iteration limit).

Everything here is pure: `sdk.py` plugs `RetryPolicy` into the SDK's retry decorator,
and `session.py` turns a failed turn into a message with `describe_model_failure`.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Iterator, Mapping

import attrs

from trio_acp.openhands.translate.shapes import JsonObject, JsonValue, PassedOn
from trio_acp.openhands.translate.text import one_line

#: Our defaults for OpenHands `LLM` fields; any the user sets (`LLM_*`, or the settings
#: file) wins. `num_retries` counts attempts, not retries (tenacity's stop_after_attempt).
LLM_FAILURE_DEFAULTS: JsonObject = {
    "num_retries": 4,
    "retry_multiplier": 2.0,
    "retry_min_wait": 2,
    "retry_max_wait": 10,
    "stream_idle_timeout": 60,
}
#: Attempts for a call that timed out (a stalled stream, or the per-attempt timeout): each
#: one costs the whole timeout, so one retry is all a user should wait through.
TIMEOUT_ATTEMPTS = 2
#: The longest `Retry-After` we wait for, in seconds; a longer one fails the turn at once.
RETRY_AFTER_CAP = 30.0
#: Context-window overflows in a row (the agent condenses after each) that end the turn.
CONTEXT_OVERFLOWS = 3

RETRY_INFO_ATTR = "trio_acp_retry"


@attrs.frozen
class RetryInfo:
    """What the retry policy decided about one failed attempt (kept on its exception)."""

    attempt: int  # 1-based number of the attempt that failed
    attempts: int  # the most attempts this call may make
    wait: float | None = None  # seconds until the next attempt, if there is one
    retry_after: float | None = None  # what the provider asked for, if it did


def _mark(exc: BaseException, **changes: PassedOn) -> None:  # RetryInfo's fields
    old = getattr(exc, RETRY_INFO_ATTR, None)
    info = attrs.evolve(old, **changes) if isinstance(old, RetryInfo) else RetryInfo(**changes)
    try:
        setattr(exc, RETRY_INFO_ATTR, info)
    except (AttributeError, TypeError):
        pass


def retry_info(error: BaseException | None) -> RetryInfo | None:
    for exc in chain(error):
        info = getattr(exc, RETRY_INFO_ATTR, None)
        if isinstance(info, RetryInfo):
            return info
    return None


@attrs.frozen
class RetryPolicy:
    """Our additions to the SDK's retry decision and back-off, for one model call."""

    attempts: int

    def attempts_for(self, exc: BaseException | None) -> int:
        """How many attempts a call failing this way gets in all."""
        return min(self.attempts, TIMEOUT_ATTEMPTS) if is_timeout(exc) else self.attempts

    def should_retry(self, sdk_says: bool, attempt: int, exc: BaseException | None) -> bool:
        if exc is None:
            return sdk_says
        retry_after = retry_after_seconds(exc)
        _mark(exc, attempt=attempt, attempts=self.attempts_for(exc), retry_after=retry_after)
        if not sdk_says:
            return False
        if is_web_page_reply(exc):
            return False  # the same page again: retrying cannot make it the API
        if attempt >= self.attempts_for(exc):
            return False
        if retry_after is not None and retry_after > RETRY_AFTER_CAP:
            return False
        return True

    def wait(self, backoff: float, exc: BaseException | None) -> float:
        retry_after = retry_after_seconds(exc) if exc is not None else None
        wait = backoff if retry_after is None else max(backoff, min(retry_after, RETRY_AFTER_CAP))
        if exc is not None:
            _mark(exc, wait=wait)
        return wait


# --- reading exceptions -----------------------------------------------------------------


def chain(error: BaseException | None) -> Iterator[BaseException]:
    """The error and its causes (`raise ... from`), then contexts, without loops."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _any_named(error: BaseException | None, *names: str) -> BaseException | None:
    wanted = set(names)
    for exc in chain(error):
        if _names(exc) & wanted:
            return exc
    return None


def is_timeout(error: BaseException | None) -> bool:
    return _any_named(error, "Timeout", "LLMTimeoutError", "APITimeoutError") is not None


# litellm's words for a whole (not streamed) reply that was no completion: the body the
# OpenAI client could not parse as one, as its repr. A web page there (HTTP 200, text/html:
# a web UI, a sign-in page) is reported with a made-up status 500, which the SDK retries as
# a server error; it is the streamed path's `NotAModelReply` (sdk/__init__.py).
_INVALID_REPLY = "Empty or invalid response from LLM endpoint. Received: "
_WEB_PAGE = re.compile(
    r"""['"](?:\\[nrt]|\s)*<(?:!doctype\s+html|html[\s>]|head[\s>]|body[\s>])""", re.I
)


def is_web_page_reply(error: BaseException | None) -> bool:
    """Whether a whole (non-streamed) model reply was a web page rather than the API's."""
    for exc in chain(error):
        text = str(exc)
        at = text.find(_INVALID_REPLY)
        if at >= 0 and _WEB_PAGE.match(text, at + len(_INVALID_REPLY)):
            return True
    return False


def http_status(error: BaseException | None) -> int | None:
    """The HTTP status the provider really answered (not one litellm made up for a broken stream)."""
    for exc in chain(error):
        response = getattr(exc, "response", None)
        if "HTTPStatusError" in _names(exc) and response is not None:
            status = getattr(response, "status_code", None)
            if isinstance(status, int):
                return status
    return None


def _headers(error: BaseException | None) -> Iterator[Mapping[str, JsonValue]]:
    for exc in chain(error):
        for name in ("litellm_response_headers", "headers"):
            headers = getattr(exc, name, None)
            if headers is not None and hasattr(headers, "get"):
                yield headers
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        if headers is not None and hasattr(headers, "get"):
            yield headers


def retry_after_seconds(error: BaseException | None) -> float | None:
    """The provider's `Retry-After` (or `retry-after-ms`) in seconds, if it sent one."""
    for headers in _headers(error):
        value = headers.get("retry-after-ms") or headers.get("Retry-After-Ms")
        if value is not None:
            try:
                return max(0.0, float(value) / 1000)
            except ValueError:
                pass
        value = headers.get("retry-after") or headers.get("Retry-After")
        if value is None:
            continue
        value = str(value).strip()
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                continue
            seconds = when.timestamp() - time.time()
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


def _root_cause(error: BaseException | None) -> str | None:
    """The innermost exception, named: what actually broke under litellm's wrappers."""
    last = None
    for exc in chain(error):
        if type(exc).__name__ != "CancelledError":
            last = exc
    if last is None:
        return None
    text = one_line(str(last))
    return f"{type(last).__name__}: {text}" if text else type(last).__name__


def _timeout_seconds(error: BaseException | None, detail: str | None) -> str | None:
    match = re.search(
        r"timeout after ([0-9.]+) seconds",
        " ".join([str(e) for e in chain(error)] + [detail or ""]),
    )
    return match.group(1) if match else None


def provider_message(error: BaseException | None) -> str | None:
    """What the provider said (the `message` of an OpenAI-style error body), if anything."""
    for exc in chain(error):
        body = getattr(exc, "body", None)
        if isinstance(body, Mapping):
            nested = body.get("error")
            inner: Mapping[JsonValue, JsonValue] = nested if isinstance(nested, Mapping) else body
            message = inner.get("message")
            if isinstance(message, str) and message.strip():
                return one_line(message)
    return None


# --- what we tell the user ---------------------------------------------------------------


@attrs.frozen
class ModelFailure:
    kind: str  # auth, forbidden, not_found, context_window, bad_request, rate_limit, ...
    message: str
    http_status: int | None
    retryable: bool
    attempts: int | None

    def data(self) -> JsonObject:
        return {
            "kind": self.kind,
            "httpStatus": self.http_status,
            "retryable": self.retryable,
            "attempts": self.attempts,
        }


_RETRY_SETTINGS = "LLM_NUM_RETRIES, LLM_RETRY_MIN_WAIT, LLM_RETRY_MAX_WAIT"


def _classify(error: BaseException | None, code: str | None) -> tuple[str, int | None] | None:
    status = http_status(error)
    names = {name for exc in chain(error) for name in _names(exc)}
    if code:
        names.add(code)
    if names & {"ContextWindowExceededError", "LLMContextWindowExceedError", "ContextStillTooLong"}:
        return "context_window", status
    if "NotAModelReply" in names or is_web_page_reply(error):
        return "not_a_reply", status
    if status == 401 or names & {"AuthenticationError", "LLMAuthenticationError"}:
        return "auth", status
    if status == 403 or "PermissionDeniedError" in names:
        return "forbidden", status
    if status == 404 or "NotFoundError" in names:
        return "not_found", status
    if status == 429 or names & {"RateLimitError", "LLMRateLimitError"}:
        return "rate_limit", status
    if names & {"Timeout", "LLMTimeoutError", "APITimeoutError"}:
        return "timeout", status
    if "MidStreamFallbackError" in names:
        return ("bad_stream" if "JSONDecodeError" in names else "broken_stream"), status
    if status is None and names & {
        "APIConnectionError",
        "ConnectError",
        "ConnectionResetError",
        "ConnectionRefusedError",
        "ClientOSError",
    }:
        return "connection", status
    if status is not None and status >= 500:
        return "server", status
    if (
        status is not None
        and 400 <= status < 500
        or names & {"BadRequestError", "LLMBadRequestError"}
    ):
        return "bad_request", status
    if names & {"LLMServiceUnavailableError", "InternalServerError", "ServiceUnavailableError"}:
        return "server", status
    return None


def describe_model_failure(
    error: BaseException | None, code: str | None = None, detail: str | None = None, model: str = ""
) -> ModelFailure | None:
    """A message for a turn that failed because the model call did, or None if it did not."""
    found = _classify(error, code)
    if found is None:
        return None
    kind, status = found
    info = retry_info(error)
    attempts = info.attempt if info is not None else None
    said = provider_message(error) or (one_line(detail) if detail else None)
    http = f"HTTP {status}" if status is not None else None
    the_model = f"model {model}" if model else "the model"
    tries = f" after {attempts} attempts" if attempts and attempts > 1 else ""
    retry_after = info.retry_after if info is not None else None

    if kind == "auth":
        text = (
            f"the model provider rejected the API key ({http or 'authentication failed'}) for {the_model}: "
            "check LLM_API_KEY (or the api_key in your OpenHands settings) and that it belongs to this provider"
        )
    elif kind == "forbidden":
        text = (
            f"the model provider refused access to {the_model} ({http or 'permission denied'}): "
            "the API key may lack access to this model, or the provider does not serve your region; "
            "check LLM_API_KEY and LLM_MODEL"
        )
    elif kind == "not_found":
        text = (
            f"the model provider does not know {the_model} or the endpoint ({http or 'not found'}): "
            "check LLM_MODEL (litellm's provider/model name) and LLM_BASE_URL"
        )
    elif kind == "context_window":
        text = (
            f"the conversation no longer fits {the_model}'s context window, even after condensing: "
            "start a new session, or choose a model with a larger window"
        )
    elif kind == "not_a_reply":
        text = (
            f"the answer to the call for {the_model} was not a model reply but a web page "
            "(HTTP 200, text/html: a web UI, or a proxy's or a network's sign-in page); check "
            "LLM_BASE_URL: it must be the API's base URL (for an OpenAI-compatible server it "
            "usually ends in /v1)"
        )
    elif kind == "bad_request":
        text = (
            f"the model provider rejected the request as invalid ({http or 'bad request'}); retrying "
            "would not help: check LLM_MODEL, LLM_BASE_URL and any other LLM_* settings"
        )
    elif kind == "rate_limit":
        if retry_after is not None and retry_after > RETRY_AFTER_CAP:
            text = (
                f"the model provider is rate-limiting requests ({http or 'rate limited'}) and asks to wait "
                f"{retry_after:.0f} s, longer than trio-acp waits ({RETRY_AFTER_CAP:.0f} s): try again later"
            )
        else:
            text = (
                f"the model provider is rate-limiting requests ({http or 'rate limited'}){tries}: "
                f"wait a little and try again (retries: {_RETRY_SETTINGS})"
            )
    elif kind == "timeout":
        seconds = _timeout_seconds(error, detail)
        if "idle timeout" in " ".join([str(e) for e in chain(error)] + [detail or ""]):
            what = f"the model's reply stream sent nothing for {seconds or 'too many'} s (LLM_STREAM_IDLE_TIMEOUT)"
        else:
            what = f"the model call took longer than {seconds or 'LLM_TIMEOUT'} s (LLM_TIMEOUT)"
        text = f"{what}{tries}: try again; raise the timeout if this model is slow to answer"
    elif kind == "broken_stream":
        text = (
            f"the model's reply was cut off: the connection closed in the middle of the stream{tries}: "
            "try again; check LLM_BASE_URL or any proxy in between if it keeps happening"
        )
    elif kind == "bad_stream":
        text = (
            f"the model's reply stream contained malformed data{tries}: try again; check LLM_BASE_URL "
            "or any proxy in between if it keeps happening"
        )
    elif kind == "connection":
        text = (
            f"could not reach the model provider (the connection failed or was reset){tries}: "
            "check LLM_BASE_URL and the network"
        )
    else:  # server
        text = (
            f"the model provider failed ({http or 'service unavailable'}){tries}: its service may be down "
            f"or overloaded; try again later (retries: {_RETRY_SETTINGS})"
        )
    if status is not None and said:
        text += f" — the provider said: {said[:300]}"
    elif status is None and kind not in ("timeout", "not_a_reply"):
        cause = _root_cause(error)
        if cause:
            text += f" ({cause[:200]})"
    retryable = kind in {
        "rate_limit",
        "timeout",
        "broken_stream",
        "bad_stream",
        "connection",
        "server",
    }
    return ModelFailure(
        kind=kind, message=text, http_status=status, retryable=retryable, attempts=attempts
    )


def retry_reason(error: BaseException | None) -> str:
    """Why a model call is being retried, in a few words ("the provider had an error (HTTP 500)")."""
    found = _classify(error, None)
    if found is None:
        return one_line(str(error))[:200] if error is not None else "unknown error"
    kind, status = found
    reason = {
        "rate_limit": "the provider is rate-limiting requests",
        "timeout": "it timed out",
        "broken_stream": "the reply was cut off mid-stream",
        "bad_stream": "the reply stream had malformed data",
        "connection": "the connection failed",
        "server": "the provider had an error",
        "not_a_reply": "the answer was not a model reply",
    }.get(kind, kind.replace("_", " "))
    return reason + (f" (HTTP {status})" if status is not None else "")


def retry_when(error: BaseException | None) -> str:
    """When the next attempt starts: "in 4 s", or "now"."""
    info = retry_info(error)
    wait = info.wait if info is not None else None
    return f"in {wait:.0f} s" if wait and wait >= 0.5 else "now"


def retry_note(attempt: int, total: int, error: BaseException | None) -> str:
    """The thought shown while a failed model call waits for its next attempt."""
    return (
        f"\n(The model call failed: {retry_reason(error)}. "
        f"Retrying {retry_when(error)}, attempt {attempt + 1} of {total}.)\n"
    )
