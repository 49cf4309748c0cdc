"""The retry policy and the failure messages on their own (pure: no SDK, no litellm).

The exceptions are stand-ins named like litellm's and the SDK's, which is all the policy
looks at (class names, `Retry-After` headers, the cause chain); the real ones are covered
end to end in test_model_failures.py.
"""

from __future__ import annotations

import email.utils
import time

from trio_acp.openhands.translate.model_failures import (
    RETRY_AFTER_CAP,
    TIMEOUT_ATTEMPTS,
    RetryPolicy,
    describe_model_failure,
    retry_after_seconds,
    retry_note,
)


class RateLimitError(Exception):
    def __init__(self, headers):
        super().__init__("rate limited")
        self.litellm_response_headers = headers


class Timeout(Exception):
    pass


class InternalServerError(Exception):
    pass


def test_retry_after_forms():
    assert retry_after_seconds(RateLimitError({"retry-after": "7"})) == 7.0
    assert retry_after_seconds(RateLimitError({"retry-after-ms": "1500"})) == 1.5
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    assert 15 < retry_after_seconds(RateLimitError({"retry-after": when})) <= 20
    assert retry_after_seconds(RateLimitError({"retry-after": "soon"})) is None
    assert retry_after_seconds(RateLimitError({})) is None
    # Found through the cause chain, as litellm wraps the provider's error.
    try:
        try:
            raise RateLimitError({"retry-after": "3"})
        except RateLimitError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert retry_after_seconds(outer) == 3.0


def test_policy_waits_for_retry_after_within_its_bound_and_gives_up_beyond():
    policy = RetryPolicy(attempts=4)
    short = RateLimitError({"retry-after": "5"})
    assert policy.should_retry(True, 1, short)
    assert policy.wait(2.0, short) == 5.0  # the provider's wait, longer than the back-off
    assert policy.wait(8.0, short) == 8.0  # the back-off, longer than the provider's
    long = RateLimitError({"retry-after": str(RETRY_AFTER_CAP + 1)})
    assert not policy.should_retry(True, 1, long)
    # What the SDK refuses to retry stays refused; the last attempt is the last.
    assert not policy.should_retry(False, 1, InternalServerError())
    assert not policy.should_retry(True, 4, InternalServerError())
    assert policy.should_retry(True, 3, InternalServerError())


def test_a_timeout_gets_fewer_attempts():
    policy = RetryPolicy(attempts=4)
    assert policy.attempts_for(Timeout()) == TIMEOUT_ATTEMPTS
    assert policy.should_retry(True, TIMEOUT_ATTEMPTS - 1, Timeout())
    assert not policy.should_retry(True, TIMEOUT_ATTEMPTS, Timeout())
    assert RetryPolicy(attempts=1).attempts_for(Timeout()) == 1


def test_notes_and_messages_carry_what_the_policy_decided():
    policy = RetryPolicy(attempts=4)
    exc = RateLimitError({"retry-after": "3"})
    policy.should_retry(True, 1, exc)
    policy.wait(2.0, exc)
    assert retry_note(1, 4, exc) == (
        "\n(The model call failed: the provider is rate-limiting requests. Retrying in 3 s, attempt 2 of 4.)\n"
    )
    failure = describe_model_failure(exc, "LLMRateLimitError", None, "openai/x")
    assert failure is not None and failure.kind == "rate_limit" and failure.retryable
    refused = RateLimitError({"retry-after": "600"})
    policy.should_retry(True, 1, refused)
    failure = describe_model_failure(refused, "LLMRateLimitError", None, "openai/x")
    assert "asks to wait 600 s" in failure.message and failure.attempts == 1


def test_failures_that_are_not_the_models_are_left_alone():
    assert describe_model_failure(ValueError("a tool broke"), "ValueError", "a tool broke") is None
    assert describe_model_failure(None, "MaxBudgetReached", "budget") is None
