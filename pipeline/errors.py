"""Every error SGAM raises, in one tree. Callers decide by class, never by message text; the
command line maps classes to exit codes in one table (`pipeline.cli.errors`).

SgamError
├── PermanentError              retrying the same call cannot help
│   ├── InvalidInput            a field, setting or file is missing, malformed or out of range
│   │   ├── SettingError        an SGAM_* setting is missing or invalid (the operator's)
│   │   ├── CatalogError        the memory-schema catalogue itself is invalid
│   │   └── InvalidLines        lines of a JSON Lines input are invalid (each named)
│   ├── NotFound                nothing matches (another tenant's data is reported the same way)
│   ├── ConflictError           the ledger's state forbids the change
│   │   ├── FactConflict        same valid_from, different value, equal trust
│   │   ├── TrustRejected       same valid_from, different value, lower trust
│   │   ├── VersionConflict     expected_version does not match
│   │   ├── IdempotencyConflict an idempotency key reused with a different payload
│   │   ├── NotQuarantined      only a quarantined fact can be promoted
│   │   ├── NotBuffered         only a buffered candidate can be confirmed or rejected
│   │   └── NotFailed           only a failed episode can be retried
│   ├── LlmRequestRejected      the LLM endpoint refused the request (4xx: key, model, mode)
│   └── LlmAnswerInvalid        every answer failed validation through the bounded re-asks
└── RetryableError              transient; the same call may succeed later
    ├── StoreBusy               lock timeouts or deadlocks outlasted the bounded retries
    ├── StoreUnavailable        the database cannot be reached or opened
    ├── PurgeBlocked            old transactions outlasted purge-vacuum's wait: nothing rewritten
    ├── IdempotencyInProgress   the first request with this key is still being answered
    └── LlmUnavailable          the LLM endpoint failed (unreachable, timeout, 429, 5xx, an
                                answer cut short) through every retry or past the deadline

The three Llm* errors share `LlmFailure`: `attempts` (requests sent), `usage` (tokens and
latency spent, a `schemas.extraction.Usage`) and `last_error` (what the final attempt got) —
never a bare provider exception.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schemas.extraction import Usage


class SgamError(Exception):
    """The root of every error SGAM raises on purpose."""


class PermanentError(SgamError):
    """Retrying the same call cannot help."""


class InvalidInput(PermanentError):
    """`field` names the offending input (an API field, an `SGAM_*` setting or a file)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class SettingError(InvalidInput):
    """An `SGAM_*` setting (`field`) is missing or invalid: the operator's problem, never the
    caller's (HTTP answers 500, the CLI exit 2), whatever a caller's own fields are named."""


class CatalogError(InvalidInput):
    """`location` is `FILE:LINE` (or the file) of the catalogue entry at fault."""

    def __init__(self, location: str, problem: str) -> None:
        super().__init__(location, problem)
        self.location = location


class InvalidLines(InvalidInput):
    """Lines of a JSON Lines input (episodes, fact commands) that are invalid; `lines` holds
    (line number, field, problem) for every one of them."""

    def __init__(self, lines: list[tuple[int, str, str]]) -> None:
        first_line, field, problem = lines[0]
        super().__init__(f"line {first_line}: {field}", problem)
        self.lines = lines


class NotFound(PermanentError):
    """Nothing matches; another tenant's resource is reported exactly like a missing one."""


class ConflictError(PermanentError):
    """The ledger's state forbids the change; the refusal is in the decision log."""


class FactConflict(ConflictError):
    def __init__(self, message: str, *, existing_fact_id: str) -> None:
        super().__init__(message)
        self.existing_fact_id = existing_fact_id


class TrustRejected(ConflictError):
    def __init__(self, message: str, *, existing_fact_id: str) -> None:
        super().__init__(message)
        self.existing_fact_id = existing_fact_id


class VersionConflict(ConflictError):
    """`expected`/`actual`: fact versions, or a key's state tags (HTTP's If-Match/ETag)."""

    def __init__(self, message: str, *, expected: int | str, actual: int | str) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class IdempotencyConflict(ConflictError):
    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class NotQuarantined(ConflictError):
    """Only a quarantined fact can be promoted."""

    def __init__(self, message: str, *, fact_id: str) -> None:
        super().__init__(message)
        self.fact_id = fact_id


class LlmFailure(SgamError):
    """An extraction through the LLM endpoint gave up; what it spent is kept."""

    def __init__(self, message: str, *, attempts: int, usage: Usage, last_error: str) -> None:
        super().__init__(f"{message} after {attempts} attempt(s): {last_error}")
        self.attempts = attempts
        self.usage = usage
        self.last_error = last_error


class LlmRequestRejected(LlmFailure, PermanentError):
    """The endpoint refused the request itself (bad key, unknown model, unsupported mode)."""


class LlmAnswerInvalid(LlmFailure, PermanentError):
    """The model's answers failed validation on the first try and on every re-ask."""


class NotBuffered(ConflictError):
    """Only a candidate still in the recurrence buffer can be confirmed or rejected."""

    def __init__(self, message: str, *, candidate_id: str) -> None:
        super().__init__(message)
        self.candidate_id = candidate_id


class NotFailed(ConflictError):
    """Only a failed episode can be retried; a pending, processing or done one is left alone."""

    def __init__(self, message: str, *, episode_id: str) -> None:
        super().__init__(message)
        self.episode_id = episode_id


class RetryableError(SgamError):
    """Transient: the same call may succeed later."""


class StoreBusy(RetryableError):
    """Lock timeouts, deadlocks or serialisation failures persisted through every retry."""


class StoreUnavailable(RetryableError):
    """The database could not be reached or opened."""


class PurgeBlocked(RetryableError):
    """Transactions older than `sgam purge-vacuum` stayed open through its bounded wait: they
    may still see purged row versions, so the tables were not rewritten. `pids` names them."""

    def __init__(self, message: str, *, pids: list[int]) -> None:
        super().__init__(message)
        self.pids = pids


class LlmUnavailable(LlmFailure, RetryableError):
    """Unreachable, timed out, rate-limited, failing with 5xx, or cutting its answers short
    (a broken-off body, tool arguments stopped at max_tokens) through every retry."""


class IdempotencyInProgress(RetryableError):
    """The first request with this idempotency key has not answered yet (a remember waiting
    for the model, an intake processing its episodes): retry after `retry_after` seconds to
    get its answer. A reservation left by a request that died expires with its lease."""

    def __init__(self, message: str, *, key: str, retry_after: int) -> None:
        super().__init__(message)
        self.key = key
        self.retry_after = retry_after
