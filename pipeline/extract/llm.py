"""The LLM client: any OpenAI-compatible endpoint through `openai` and Instructor.

One client per process (`shared_client`) serves every extraction, from as many threads as
`SGAM_LLM_CONCURRENCY`, over one pool of kept-alive connections. Two bounded retry layers:
`RetryingTransport` waits for the endpoint's budget (`SGAM_LLM_RPM`/`TPM`, a 429's pause) and
retries transport faults (5xx, timeouts, connection errors) below the OpenAI client, whose own
retries are off; Instructor re-asks an answer that fails validation, showing the model the
error, at most `SGAM_LLM_MAX_REASKS` times. Whatever finally fails becomes one typed error
from `pipeline.errors` that carries the attempts, the usage and the last error — never a bare
provider exception.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import httpx2
import instructor
from instructor.core.exceptions import IncompleteOutputException, InstructorRetryException
from pydantic import BaseModel, ValidationError

from pipeline.errors import (
    LlmAnswerInvalid,
    LlmFailure,
    LlmRequestRejected,
    LlmUnavailable,
    SettingError,
)
from pipeline.extract.budget import Budget, budget_for
from pipeline.extract.transport import CURRENT_CALL, Call, RetryingTransport, is_retryable_status
from pipeline.observe import conventions as names
from pipeline.observe import tracing
from pipeline.settings import Settings
from schemas.extraction import Usage

if TYPE_CHECKING:
    # Imported where used: `openai` and its aiohttp were a third of `sgam serve`'s start-up.
    import openai
    from openai.types.chat import ChatCompletion

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
logging.getLogger("instructor").addHandler(logging.NullHandler())


class LlmClient:
    """One endpoint from the settings, built once per process: one HTTP client whose pooled
    connections every extraction reuses, one OpenAI client, one Instructor patch, and the
    endpoint's budget (`budget`; none: a 429 is waited out by this caller alone). `ask` may
    be called from many threads at once; what each call spends is kept apart. `transport`
    replaces the HTTP transport, e.g. in tests."""

    def __init__(
        self,
        settings: Settings,
        transport: httpx2.BaseTransport | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        budget: Budget | None = None,
    ) -> None:
        if settings.llm_base_url is None:
            raise SettingError("SGAM_LLM_BASE_URL", "is not set: no LLM endpoint is configured")
        self.settings = settings
        self.base_url = settings.llm_base_url
        self.model = settings.llm_model
        self.deadline_s = settings.llm_deadline_s
        self.timeout_s = settings.llm_timeout_s
        if transport is None:
            # Room for every request in flight, and each connection kept for the next one.
            in_flight = settings.llm_concurrency
            limits = httpx2.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
            transport = httpx2.HTTPTransport(limits=limits)
        self._transport = RetryingTransport(
            transport,
            max_attempts=settings.llm_max_attempts,
            deadline_s=settings.llm_deadline_s,
            max_wait_s=settings.llm_max_wait_s,
            budget=budget,
            sleep=sleep,
        )
        self._http = httpx2.Client(transport=self._transport, timeout=settings.llm_timeout_s)
        import openai

        client = openai.OpenAI(
            base_url=self.base_url,
            api_key=settings.llm_api_key.get_secret_value() or _NO_KEY,
            http_client=self._http,
            max_retries=0,  # transport retries are ours, with a deadline
            timeout=settings.llm_timeout_s,
        )
        mode = MODES[settings.llm_mode]
        self._patched = instructor.Instructor(
            client=client,
            create=instructor.patch(create=_completions(client, self._http), mode=mode),
            mode=mode,
            provider=instructor.Provider.OPENAI,
        )
        self._patched.on("completion:response", _on_response)
        self._patched.on("parse:error", _on_invalid)
        self._span_attributes = inference_attributes(settings)

    def ask(
        self, messages: list[dict[str, str]], response_model: type[M], *, prompt_version: str
    ) -> tuple[M, Usage]:
        """The validated answer and what it cost; a typed `LlmFailure` when there is none."""
        import openai

        settings = self.settings
        call = Call(self.deadline_s, settings.llm_max_wait_s)
        token = CURRENT_CALL.set(call)

        def usage() -> Usage:
            return Usage(
                extractor=f"llm:{self.model}",
                model=self.model,
                prompt_version=prompt_version,
                prompt_tokens=call.prompt_tokens,
                completion_tokens=call.completion_tokens,
                attempts=call.attempts,
                invalid_answers=call.invalid_answers,
                latency_ms=round((call.clock() - call.started) * 1000, 1),
            )

        with tracing.span(
            f"{names.CHAT} {self.model}", kind="client", attributes=self._span_attributes
        ) as opened:
            try:
                answer = self._patched.chat.completions.create(
                    model=self.model,
                    messages=messages,  # type: ignore[arg-type]
                    response_model=prepared(response_model),
                    max_retries=settings.llm_max_reasks,
                    temperature=0.0,
                    max_tokens=settings.llm_max_tokens,
                    timeout=self.timeout_s,
                )
            except (InstructorRetryException, IncompleteOutputException, openai.OpenAIError) as exc:
                raise failure(exc, call.attempts, usage()) from exc
            finally:
                CURRENT_CALL.reset(token)
                if call.prompt_tokens:  # the answer's usage corrects the estimate charged
                    spent = call.prompt_tokens + call.completion_tokens
                    self._transport.settle(spent - call.charged_tokens)
                if opened.is_recording():
                    opened.set_attributes(_spent_attributes(call))
        return answer, usage()

    def within(self, seconds: float) -> LlmClient:
        """The same client and connections, giving up after `seconds` in all (the hot path's
        deadline): every request, retry and re-ask must fit."""
        bounded = copy.copy(self)
        bounded.deadline_s = seconds
        bounded.timeout_s = min(self.timeout_s, seconds)
        bounded.settings = self.settings.model_copy(
            update={"llm_deadline_s": seconds, "llm_timeout_s": bounded.timeout_s}
        )
        return bounded

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LlmClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def inference_attributes(settings: Settings) -> dict[str, str | int | float]:
    """What a GenAI inference span says about the request: the operation, the provider's API
    flavour, the model, the answer's limits and the endpoint's host (never its path or key)."""
    endpoint = urlsplit(settings.llm_base_url or "")
    attributes: dict[str, str | int | float] = {
        names.GEN_AI_OPERATION_NAME: names.CHAT,
        names.GEN_AI_PROVIDER_NAME: names.OPENAI,
        names.GEN_AI_REQUEST_MODEL: settings.llm_model,
        names.GEN_AI_REQUEST_MAX_TOKENS: settings.llm_max_tokens,
        names.GEN_AI_REQUEST_TEMPERATURE: 0.0,
        names.GEN_AI_OUTPUT_TYPE: "json",
        names.SGAM_PROMPT_VERSION: settings.llm_prompt,
    }
    if endpoint.hostname:
        attributes[names.SERVER_ADDRESS] = endpoint.hostname
        attributes[names.SERVER_PORT] = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    return attributes


def _spent_attributes(call: Call) -> dict[str, str | int | list[str]]:
    """What the call spent and how the last answer ended, set when the call is over."""
    spent: dict[str, str | int | list[str]] = {
        names.GEN_AI_USAGE_INPUT_TOKENS: call.prompt_tokens,
        names.GEN_AI_USAGE_OUTPUT_TOKENS: call.completion_tokens,
        names.SGAM_LLM_ATTEMPTS: call.attempts,
        names.SGAM_LLM_INVALID_ANSWERS: call.invalid_answers,
    }
    if call.finish_reasons:
        spent[names.GEN_AI_RESPONSE_FINISH_REASONS] = call.finish_reasons
    if call.response_model is not None:
        spent[names.GEN_AI_RESPONSE_MODEL] = call.response_model
    return spent


def _remember_async_validator_checks() -> None:
    """Instructor checks the response model for async validators seven times a call, walking
    its whole class tree each time: a fifth of a call's CPU. Our response models are built
    once per catalogue and never change, so a model that passed once passes again: the check
    remembers the models it passed (a model that fails is checked, and fails, every time)."""
    from instructor.v2.core import patch as patched_create
    from instructor.v2.validation import async_validators

    check = getattr(async_validators, "reject_async_validators", None)
    if check is None or getattr(check, "remembers", False):
        return  # another Instructor, or done already
    passed: set[Any] = set()

    def remembering(response_model: Any) -> None:
        try:
            if response_model in passed:
                return
        except TypeError:  # unhashable: not one of ours
            check(response_model)
            return
        check(response_model)
        if len(passed) > 256:  # ours are a handful (one per catalogue); anyone else's: bounded
            passed.clear()
        passed.add(response_model)

    remembering.remembers = True  # type: ignore[attr-defined]
    async_validators.reject_async_validators = remembering
    if getattr(patched_create, "reject_async_validators", None) is check:
        patched_create.reject_async_validators = remembering  # type: ignore[attr-defined]


_remember_async_validator_checks()


def _completions(client: openai.OpenAI, http: httpx2.Client) -> Callable[..., ChatCompletion]:
    """Chat completions with the body Instructor built, posted straight through the HTTP
    client. The OpenAI SDK's request path first walks the whole request (the messages, the
    tool's JSON schema) through its type transforms, builds an options object it deep-copies
    six times, parses the URL four times, and builds the answer field by field: more than a
    third of an extraction's CPU, to send the same JSON and read the same answer. The errors
    are the SDK's own (`failure` reads them): a timeout, a connection error, a status error
    made by the SDK from the response."""
    import openai
    from openai.types.chat import ChatCompletion

    url = f"{str(client.base_url).rstrip('/')}/chat/completions"
    headers = {"Authorization": f"Bearer {client.api_key}", "Accept": "application/json"}
    headers["Content-Type"] = "application/json"

    def create(*, timeout: float | None = None, **body: Any) -> ChatCompletion:
        content = json.dumps(
            body, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_jsonable
        ).encode()
        request = http.build_request(
            "POST",
            url,
            content=content,
            headers=headers,
            timeout=timeout if timeout is not None else httpx2.USE_CLIENT_DEFAULT,
        )
        try:
            response = http.send(request)
        except httpx2.TimeoutException as error:
            raise openai.APITimeoutError(request=request) from error
        except openai.OpenAIError:
            raise
        except Exception as error:
            raise openai.APIConnectionError(request=request) from error
        if response.is_error:
            raise client._make_status_error_from_response(response) from None
        answer = response.json()
        try:
            return ChatCompletion.model_validate(answer)
        except ValidationError:  # a server's odd field: built without validation, as the SDK does
            return ChatCompletion.construct(**answer)

    return create


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


@lru_cache(maxsize=64)
def prepared(response_model: type[M]) -> type[M]:
    """The response model as Instructor wraps it, once per model: given a new wrapper on
    every call, Instructor would generate its JSON schema again each time."""
    return instructor.response_schema(response_model)


def _on_response(response: Any) -> None:
    call = CURRENT_CALL.get()
    if call is not None:
        call.count(response)


def _on_invalid(*_: Any, **__: Any) -> None:
    call = CURRENT_CALL.get()
    if call is not None:
        call.invalid_answers += 1


_shared: dict[int, tuple[int, Settings, LlmClient]] = {}
_shared_lock = threading.Lock()


def import_sdk() -> None:
    """The OpenAI SDK imported now, not in a request (a server with a model, as it starts)."""
    import openai  # noqa: F401


def shared_client(settings: Settings) -> LlmClient:
    """This process's client for `settings`' endpoint, built on first use (after a fork, a
    child builds its own: connections are not shared across processes)."""
    pid = os.getpid()
    entry = _shared.get(id(settings))
    if entry is not None and entry[0] == pid and entry[1] is settings:
        return entry[2]
    with _shared_lock:
        entry = _shared.get(id(settings))
        if entry is None or entry[0] != pid or entry[1] is not settings:
            entry = (pid, settings, LlmClient(settings, budget=budget_for(settings)))
            _shared[id(settings)] = entry
    return entry[2]


def failure(error: BaseException, attempts: int, usage: Usage) -> LlmFailure:
    """The typed error for what finally went wrong, decided by the innermost cause."""
    import openai

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
    if cut_short(cause):  # the next answer may arrive whole
        return LlmUnavailable("the answer was cut short", **_spent(attempts, usage, last))
    if isinstance(cause, ValidationError):
        return LlmAnswerInvalid(
            "the model's answer failed validation", **_spent(attempts, usage, last)
        )
    return LlmAnswerInvalid("the model's answer was unusable", **_spent(attempts, usage, last))


def cut_short(error: BaseException) -> bool:
    """An answer that did not arrive whole: an HTTP body that is not JSON (the response's own
    envelope, which no model writes, broke off), an answer stopped at max_tokens, or tool
    arguments that end before their JSON does (the parser reached the end of its input)."""
    if isinstance(error, json.JSONDecodeError | IncompleteOutputException):
        return True
    if isinstance(error, ValidationError):
        return any(
            problem["type"] == "json_invalid"
            and str(problem.get("ctx", {}).get("error", "")).startswith("EOF while parsing")
            for problem in error.errors()
        )
    return False


def _spent(attempts: int, usage: Usage, last: str) -> dict[str, Any]:
    return {"attempts": attempts, "usage": usage, "last_error": last}


def _first_line(error: BaseException) -> str:
    if isinstance(error, ValidationError) and error.errors():
        first = error.errors()[0]  # where the answer broke, not just "1 validation error"
        where = ".".join(str(part) for part in first["loc"])
        return f"{where}: {first['msg']}"[:300]
    text = str(error).strip().splitlines()
    return (text[0] if text else "")[:300]
