"""How the HTTP service reports failures: one table from error class to status and problem
type, rendered as RFC 9457 `application/problem+json`.

The table mirrors the command line's exit codes (`pipeline.cli.errors`). A problem names what
was wrong — the field, the id, the version — and never a stored value, evidence or another
tenant's data: the pipeline's messages follow that rule, and an unexpected error is answered
without its message.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.responses import JSONResponse

from pipeline.errors import (
    CatalogError,
    ConflictError,
    FactConflict,
    IdempotencyConflict,
    IdempotencyInProgress,
    InvalidInput,
    InvalidLines,
    LlmAnswerInvalid,
    LlmRequestRejected,
    LlmUnavailable,
    NotBuffered,
    NotFailed,
    NotFound,
    NotQuarantined,
    PurgeBlocked,
    RetryableError,
    SettingError,
    SgamError,
    StoreBusy,
    StoreUnavailable,
    TrustRejected,
    VersionConflict,
)

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:sgam:problem:"
log = logging.getLogger("sgam.api")


class ApiError(Exception):
    """A refusal of the HTTP layer itself (credentials, scope, limits, the request's form)."""

    def __init__(self, detail: str, *, field: str | None = None, retry_after: int | None = None):
        super().__init__(detail)
        self.field = field
        self.retry_after = retry_after


class Unauthorized(ApiError):
    """No key, or a key that is malformed, unknown, revoked or expired."""


class Forbidden(ApiError):
    """The key's role does not allow the operation."""


class ScopeMismatch(Forbidden):
    """The request names a tenant, agent or purpose other than the key's."""


class MalformedRequest(ApiError):
    """The body is not JSON, or not UTF-8, or a header cannot be read."""


class PayloadTooLarge(ApiError):
    """The body is larger than SGAM_API_MAX_BODY_BYTES."""


class UnsupportedMediaType(ApiError):
    """A body that is not `application/json`."""


class NoRoute(ApiError):
    """No endpoint has this path."""


class MethodNotAllowed(ApiError):
    """The path exists, the method does not; `allow` lists the methods it has."""

    def __init__(self, detail: str, *, allow: list[str]) -> None:
        super().__init__(detail)
        self.allow = allow


class RateLimited(ApiError):
    """The key used up its token bucket; `retry_after` says when one token is back."""


# (error class, HTTP status, problem type, title). First match wins: subclasses first.
PROBLEMS: list[tuple[type[BaseException], int, str, str]] = [
    (Unauthorized, 401, "unauthorized", "Missing or invalid API key"),
    (ScopeMismatch, 403, "scope-mismatch", "The request names another tenant, agent or purpose"),
    (Forbidden, 403, "forbidden", "The key's role does not allow this"),
    (NoRoute, 404, "not-found", "Not found"),
    (NotFound, 404, "not-found", "Not found"),
    (MethodNotAllowed, 405, "method-not-allowed", "Method not allowed"),
    (MalformedRequest, 400, "malformed-request", "The request cannot be read"),
    (PayloadTooLarge, 413, "payload-too-large", "The request body is too large"),
    (UnsupportedMediaType, 415, "unsupported-media-type", "Send application/json"),
    (RateLimited, 429, "rate-limited", "Too many requests"),
    (CatalogError, 500, "catalog-error", "The server's memory-schema catalogue is invalid"),
    (InvalidLines, 422, "invalid-episodes", "Invalid episodes; nothing was stored"),
    # An SGAM_* setting at fault is the operator's problem, never the caller's input, whatever
    # the caller's own fields are named.
    (SettingError, 500, "setting-error", "The server's settings are invalid"),
    # Not "nothing was written": a read meets it too (a write that meets it writes nothing).
    (InvalidInput, 422, "invalid-input", "Invalid input"),
    (
        VersionConflict,
        412,
        "version-conflict",
        "The fact or key is not at the state the request expected",
    ),
    (IdempotencyConflict, 409, "idempotency-conflict", "Idempotency key reused"),
    # A repeat while the key's first request is still at work: 409 as RFC 9110 and the
    # Idempotency-Key draft say, with Retry-After (it is not the server that is unavailable).
    (
        IdempotencyInProgress,
        409,
        "idempotency-in-progress",
        "The first request with this idempotency key is still in progress",
    ),
    (FactConflict, 409, "fact-conflict", "An equal-trust fact disagrees"),
    (TrustRejected, 409, "trust-rejected", "A fact of higher trust disagrees"),
    (NotQuarantined, 409, "not-quarantined", "Only a quarantined fact can be promoted"),
    (NotBuffered, 409, "not-buffered", "Only a buffered candidate can be decided"),
    (NotFailed, 409, "not-failed", "Only a failed episode can be retried"),
    (ConflictError, 409, "conflict", "The ledger's state forbids the change"),
    (LlmRequestRejected, 502, "llm-request-rejected", "The LLM endpoint refused the request"),
    (LlmAnswerInvalid, 502, "llm-answer-invalid", "The model's answers failed validation"),
    (StoreBusy, 503, "store-busy", "The store is busy; retry later"),
    (StoreUnavailable, 503, "store-unavailable", "A store is unavailable; retry later"),
    (LlmUnavailable, 503, "llm-unavailable", "The LLM endpoint is unavailable; retry later"),
    (PurgeBlocked, 503, "purge-blocked", "Old transactions hold purged rows; retry later"),
    (RetryableError, 503, "unavailable", "Temporarily unavailable; retry later"),
    (SgamError, 500, "internal-error", "Internal error"),
]
INTERNAL = (500, "internal-error", "Internal error")
# Seconds a client should wait before retrying a retryable error.
RETRY_AFTER: list[tuple[type[BaseException], int]] = [(StoreBusy, 1), (RetryableError, 5)]


def classify(error: BaseException) -> tuple[int, str, str]:
    return next(
        ((status, kind, title) for cls, status, kind, title in PROBLEMS if isinstance(error, cls)),
        INTERNAL,
    )


def problem(error: BaseException, instance: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Status, body and headers of the problem that reports `error`."""
    status, kind, title = classify(error)
    body: dict[str, Any] = {"type": TYPE_PREFIX + kind, "title": title, "status": status}
    if status == 500:
        log.error("internal error on %s", instance, exc_info=error)
    else:
        body["detail"] = _detail(error)
    body["instance"] = instance
    body |= _extensions(error)
    headers: dict[str, str] = {}
    retry_after = getattr(error, "retry_after", None)
    if retry_after is None:
        retry_after = next((s for cls, s in RETRY_AFTER if isinstance(error, cls)), None)
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    if isinstance(error, Unauthorized):
        headers["WWW-Authenticate"] = 'Bearer realm="sgam"'
    if isinstance(error, MethodNotAllowed):
        headers["Allow"] = ", ".join(error.allow)
    return status, body, headers


def _detail(error: BaseException) -> str:
    if isinstance(error, InvalidLines):
        count = len(error.lines)
        line, field, problem = error.lines[0]
        first = f"the first at index {line - 1}: {field}: {problem}"
        return f"{count} invalid episode{'s' if count > 1 else ''}, {first}"
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _extensions(error: BaseException) -> dict[str, Any]:
    if isinstance(error, InvalidLines):
        return {
            "errors": [
                {"index": line - 1, "field": field, "problem": problem}
                for line, field, problem in error.lines
            ]
        }
    if isinstance(error, InvalidInput):
        return {"field": error.field}
    if isinstance(error, ApiError) and error.field is not None:
        return {"field": error.field}
    if isinstance(error, VersionConflict) and isinstance(error.expected, str):
        return {"expected_etag": f'"{error.expected}"', "current_etag": f'"{error.actual}"'}
    if isinstance(error, VersionConflict):
        return {"expected_version": error.expected, "actual_version": error.actual}
    if isinstance(error, FactConflict | TrustRejected):
        return {"existing_fact_id": error.existing_fact_id}
    return {}


def problem_response(error: BaseException, instance: str) -> JSONResponse:
    status, body, headers = problem(error, instance)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)
