"""Transport retries for the LLM endpoint, below the OpenAI client and Instructor.

One `RetryingTransport` serves one extraction: it retries 429 (honouring Retry-After), 408,
5xx, timeouts and connection errors with jittered exponential backoff, a bounded number of
attempts and one deadline for the whole extraction (re-asks included), and it counts every
request it sends. Validation re-asks are Instructor's business, one layer up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx2
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    stop_any,
    wait_random_exponential,
)
from tenacity.stop import stop_base

MAX_RETRY_AFTER_S = 120.0
_backoff = wait_random_exponential(multiplier=0.5, max=20.0)


def is_retryable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


class RetryingTransport(httpx2.BaseTransport):
    """Wraps a pooled transport (shared, never closed here) for one extraction."""

    def __init__(
        self,
        inner: httpx2.BaseTransport,
        *,
        max_attempts: int,
        deadline_s: float,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._inner = inner
        self._max_attempts = max_attempts
        self._deadline_s = deadline_s
        self._sleep = sleep
        self._clock = clock
        self._started = clock()
        self.attempts = 0

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.attempts and self._elapsed() >= self._deadline_s:
            raise httpx2.TimeoutException(
                f"the extraction's {self._deadline_s:g} s deadline has passed", request=request
            )
        retrying = Retrying(
            stop=stop_any(stop_after_attempt(self._max_attempts), _Deadline(self)),
            wait=_retry_after_or_backoff,
            retry=retry_if_exception_type(httpx2.TransportError)
            | retry_if_result(lambda response: is_retryable_status(response.status_code)),
            before_sleep=_release,
            sleep=self._sleep,
            # Out of attempts: hand the last response (or error) to the client, which raises.
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
        )
        response: httpx2.Response = retrying(self._send, request)
        return response

    def _send(self, request: httpx2.Request) -> httpx2.Response:
        self.attempts += 1
        return self._inner.handle_request(request)

    def _elapsed(self) -> float:
        return self._clock() - self._started

    def past_deadline(self, upcoming_sleep: float) -> bool:
        return self._elapsed() + upcoming_sleep >= self._deadline_s

    def close(self) -> None:
        """The pooled transport outlives this extraction; its owner closes it."""


class _Deadline(stop_base):
    """Stop when the next sleep would end past the extraction's deadline."""

    def __init__(self, transport: RetryingTransport) -> None:
        self._transport = transport

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self._transport.past_deadline(retry_state.upcoming_sleep)


def _retry_after_or_backoff(state: RetryCallState) -> float:
    outcome = state.outcome
    if outcome is not None and not outcome.failed:
        delay = retry_after(outcome.result())
        if delay is not None:
            return delay
    return _backoff(state)


def retry_after(response: httpx2.Response) -> float | None:
    """Seconds the server asked us to wait (delta-seconds or an HTTP date), capped."""
    header = response.headers.get("retry-after")
    if header is None:
        return None
    try:
        seconds = float(header)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(header) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _release(state: RetryCallState) -> None:
    # A response we retry past still holds a pooled connection until it is closed.
    if state.outcome is not None and not state.outcome.failed:
        state.outcome.result().close()
