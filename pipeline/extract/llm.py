"""The LLM client: any OpenAI-compatible endpoint through `openai` and Instructor.

Two bounded retry layers: `RetryingTransport` retries transport faults (429, 5xx, timeouts,
connection errors) below the OpenAI client, whose own retries are off; Instructor re-asks an
answer that fails validation, showing the model the error, at most `SGAM_LLM_MAX_REASKS`
times. Whatever finally fails becomes one typed error from `pipeline.errors` that carries the
attempts, the usage and the last error — never a bare provider exception.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx2
import instructor
import openai
from instructor.core.exceptions import IncompleteOutputException, InstructorRetryException
from pydantic import BaseModel, ValidationError

from pipeline.errors import (
    InvalidInput,
    LlmAnswerInvalid,
    LlmFailure,
    LlmRequestRejected,
    LlmUnavailable,
)
from pipeline.extract.transport import RetryingTransport, is_retryable_status
from pipeline.settings import Settings
from schemas.extraction import Usage

M = TypeVar("M", bound=BaseModel)

MODES = {
    "tools": instructor.Mode.TOOLS,
    "json_schema": instructor.Mode.JSON_SCHEMA,
    "json": instructor.Mode.JSON,
    "md_json": instructor.Mode.MD_JSON,
}
_NO_KEY = "none"  # local servers need no key, but the client insists on one
# Instructor logs each failed attempt at ERROR; we report failures as typed errors instead, so
# its records reach a handler only when the application configures one.
logging.getLogger("instructor").addHandler(
    logging.NullHandler()
)  # local servers need no key, but the client insists on one


@dataclass
class _Tally:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    invalid_answers: int = 0

    def count(self, response: Any) -> None:
        usage = getattr(response, "usage", None)
        self.prompt_tokens += getattr(usage, "prompt_tokens", 0) or 0
        self.completion_tokens += getattr(usage, "completion_tokens", 0) or 0

    def invalid(self, *_: Any, **__: Any) -> None:
        self.invalid_answers += 1


class LlmClient:
    """One endpoint from the settings. Build it once (it pools connections) and pass it to
    each extraction; `transport` replaces the HTTP transport, e.g. in tests."""

    def __init__(
        self,
        settings: Settings,
        transport: httpx2.BaseTransport | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if settings.llm_base_url is None:
            raise InvalidInput("SGAM_LLM_BASE_URL", "is not set: no LLM endpoint is configured")
        self.settings = settings
        self.base_url = settings.llm_base_url
        self.model = settings.llm_model
        self._transport = transport if transport is not None else httpx2.HTTPTransport()
        self._sleep = sleep

    def ask(
        self, messages: list[dict[str, str]], response_model: type[M], *, prompt_version: str
    ) -> tuple[M, Usage]:
        """The validated answer and what it cost; a typed `LlmFailure` when there is none."""
        settings = self.settings
        transport = RetryingTransport(
            self._transport,
            max_attempts=settings.llm_max_attempts,
            deadline_s=settings.llm_deadline_s,
            sleep=self._sleep,
        )
        http = httpx2.Client(transport=transport, timeout=settings.llm_timeout_s)
        client = openai.OpenAI(
            base_url=self.base_url,
            api_key=settings.llm_api_key.get_secret_value() or _NO_KEY,
            http_client=http,
            max_retries=0,  # transport retries are ours, with a deadline
            timeout=settings.llm_timeout_s,
        )
        patched = instructor.from_openai(client, mode=MODES[settings.llm_mode])
        tally = _Tally()
        patched.on("completion:response", tally.count)
        patched.on("parse:error", tally.invalid)
        started = time.perf_counter()

        def usage() -> Usage:
            return Usage(
                extractor=f"llm:{self.model}",
                model=self.model,
                prompt_version=prompt_version,
                prompt_tokens=tally.prompt_tokens,
                completion_tokens=tally.completion_tokens,
                attempts=transport.attempts,
                invalid_answers=tally.invalid_answers,
                latency_ms=round((time.perf_counter() - started) * 1000, 1),
            )

        try:
            answer = patched.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                response_model=response_model,
                max_retries=settings.llm_max_reasks,
                temperature=0.0,
                max_tokens=settings.llm_max_tokens,
            )
        except (InstructorRetryException, IncompleteOutputException, openai.OpenAIError) as exc:
            raise failure(exc, transport.attempts, usage()) from exc
        finally:
            http.close()
        return answer, usage()

    def within(self, seconds: float) -> LlmClient:
        """The same endpoint and connections, giving up after `seconds` in all (the hot path's
        deadline): every request, retry and re-ask must fit."""
        bounded = self.settings.model_copy(
            update={
                "llm_deadline_s": seconds,
                "llm_timeout_s": min(self.settings.llm_timeout_s, seconds),
            }
        )
        return LlmClient(bounded, self._transport, sleep=self._sleep)

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> LlmClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def failure(error: BaseException, attempts: int, usage: Usage) -> LlmFailure:
    """The typed error for what finally went wrong, decided by the innermost cause."""
    cause = error.__cause__ if isinstance(error, InstructorRetryException) else error
    cause = cause or error
    # A connection error's own cause names what happened (refused, timed out, DNS).
    shown = cause.__cause__ if isinstance(cause, openai.APIConnectionError) else None
    shown = shown or cause
    last = f"{type(shown).__name__}: {_first_line(shown)}"
    if isinstance(cause, openai.APIStatusError):
        kind: type[LlmFailure] = (
            LlmUnavailable if is_retryable_status(cause.status_code) else LlmRequestRejected
        )
        return kind(f"HTTP {cause.status_code} from the endpoint", **_spent(attempts, usage, last))
    if isinstance(cause, openai.APIConnectionError):  # includes timeouts
        return LlmUnavailable("the endpoint is unreachable", **_spent(attempts, usage, last))
    if isinstance(cause, ValidationError | json.JSONDecodeError | IncompleteOutputException):
        return LlmAnswerInvalid(
            "the model's answer failed validation", **_spent(attempts, usage, last)
        )
    return LlmAnswerInvalid("the model's answer was unusable", **_spent(attempts, usage, last))


def _spent(attempts: int, usage: Usage, last: str) -> dict[str, Any]:
    return {"attempts": attempts, "usage": usage, "last_error": last}


def _first_line(error: BaseException) -> str:
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]  # where the answer broke, not just "1 validation error"
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}"[:300]
    text = str(error).strip().splitlines()
    return (text[0] if text else "")[:300]
