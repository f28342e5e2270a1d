"""Transport retries and the endpoint's budget, below the OpenAI client and Instructor.

One `RetryingTransport` per LLM client (per process) sends every request. Before each send it
waits for the endpoint's budget (`pipeline.extract.budget`); a 429 pauses the endpoint for its
`Retry-After` — for every caller sharing the budget — and the request waits and is sent again
without spending an attempt, up to `SGAM_LLM_MAX_WAIT_S` of waiting per extraction. 408, 5xx,
timeouts and connection errors are retried with jittered exponential backoff, a bounded number
of attempts, and one deadline for the whole extraction (re-asks included, time spent waiting
for the budget not). What one extraction has spent is a `Call`, found through a context
variable, so one pooled transport serves many extractions at once from many threads.
Validation re-asks are Instructor's business, one layer up.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

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

from pipeline.extract.budget import Budget, BudgetUnavailable

MAX_RETRY_AFTER_S = 120.0
_backoff = wait_random_exponential(multiplier=0.5, max=20.0)


def is_retryable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


def _is_fault(status: int) -> bool:
    """Retried by backoff; a 429 is a wait for the budget instead."""
    return status != 429 and is_retryable_status(status)


@dataclass
class Call:
    """One extraction's requests, waits and tokens so far."""

    deadline_s: float
    max_wait_s: float
    clock: Callable[[], float] = time.monotonic
    started: float = field(init=False)
    attempts: int = 0
    throttled: int = 0
    waited_s: float = 0.0
    charged_tokens: int = 0  # what the budget was charged before sending
    prompt_tokens: int = 0
    completion_tokens: int = 0
    invalid_answers: int = 0
    finish_reasons: list[str] = field(default_factory=list)  # of the last answer
    response_model: str | None = None

    def __post_init__(self) -> None:
        self.started = self.clock()

    def elapsed(self) -> float:
        """Time spent on the extraction itself, waits for the budget left out."""
        return self.clock() - self.started - self.waited_s

    def count(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        self.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
        self.completion_tokens += getattr(usage, "completion_tokens", 0) or 0
        choices = getattr(response, "choices", None) or []
        reasons = (getattr(choice, "finish_reason", None) for choice in choices)
        self.finish_reasons = [str(reason) for reason in reasons if reason]
        self.response_model = getattr(response, "model", None) or self.response_model


CURRENT_CALL: ContextVar[Call | None] = ContextVar("sgam_llm_call", default=None)


class RetryingTransport(httpx2.BaseTransport):
    """Wraps the pooled transport it owns (and closes)."""

    def __init__(
        self,
        inner: httpx2.BaseTransport,
        *,
        max_attempts: int,
        deadline_s: float,
        max_wait_s: float = 600.0,
        budget: Budget | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._inner = inner
        self._max_attempts = max_attempts
        self._deadline_s = deadline_s
        self._max_wait_s = max_wait_s
        self._budget = budget
        self._sleep = sleep

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        call = CURRENT_CALL.get()
        if call is None:  # a request outside `LlmClient.ask`: give it a budget of its own
            call = Call(self._deadline_s, self._max_wait_s)
        if call.attempts and call.elapsed() >= call.deadline_s:
            raise httpx2.TimeoutException(
                f"the extraction's {call.deadline_s:g} s deadline has passed", request=request
            )
        cost = len(request.content) // 4  # about a token per 4 bytes of the prompt
        while True:
            self._wait_for_budget(call, cost, request)
            response = self._send_retrying(call, request)
            if response.status_code != 429:
                return response
            delay = retry_after(response)
            if delay is None:
                delay = 1.0 + call.throttled
            if call.waited_s + delay > call.max_wait_s:
                return response  # the client raises it: LlmUnavailable, tried again later
            response.close()
            call.throttled += 1
            if self._budget is not None:
                self._pause(delay, request)  # everyone waits; `_wait_for_budget` sleeps it
            else:
                self._sleep(delay)
                call.waited_s += delay

    def _send_retrying(self, call: Call, request: httpx2.Request) -> httpx2.Response:
        retrying = Retrying(
            stop=stop_any(stop_after_attempt(self._max_attempts), _Deadline(call)),
            wait=_retry_after_or_backoff,
            retry=retry_if_exception_type(httpx2.TransportError)
            | retry_if_result(lambda response: _is_fault(response.status_code)),
            before_sleep=_release,
            sleep=self._sleep,
            # Out of attempts: hand the last response (or error) to the client, which raises.
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
        )
        response: httpx2.Response = retrying(self._send, call, request)
        return response

    def _send(self, call: Call, request: httpx2.Request) -> httpx2.Response:
        call.attempts += 1
        return self._inner.handle_request(request)

    def _wait_for_budget(self, call: Call, cost: int, request: httpx2.Request) -> None:
        if self._budget is None:
            return
        while True:
            try:
                wait = self._budget.take(cost)
            except BudgetUnavailable as error:
                raise httpx2.ConnectError(str(error), request=request) from error
            if wait <= 0:
                call.charged_tokens += cost
                return
            if call.waited_s + wait > call.max_wait_s:
                raise httpx2.TimeoutException(
                    f"waited {call.waited_s:.0f} s for the endpoint's budget "
                    f"(SGAM_LLM_MAX_WAIT_S={call.max_wait_s:g})",
                    request=request,
                )
            wait *= 1 + random.random() / 10  # callers released together do not all wake at once
            self._sleep(wait)
            call.waited_s += wait

    def _pause(self, seconds: float, request: httpx2.Request) -> None:
        assert self._budget is not None
        try:
            self._budget.pause(seconds)
        except BudgetUnavailable as error:
            raise httpx2.ConnectError(str(error), request=request) from error

    def settle(self, tokens: int) -> None:
        """Charge the budget the difference between a request's estimate and its usage."""
        if self._budget is not None and tokens:
            # A missed correction only leaves the estimate as the charge.
            with contextlib.suppress(BudgetUnavailable):
                self._budget.settle(tokens)

    def close(self) -> None:
        self._inner.close()


class _Deadline(stop_base):
    """Stop when the next sleep would end past the extraction's deadline."""

    def __init__(self, call: Call) -> None:
        self._call = call

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self._call.elapsed() + retry_state.upcoming_sleep >= self._call.deadline_s


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
