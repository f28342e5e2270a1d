"""Every error SGAM raises, in one tree. Callers decide by class, never by message text.

SgamError
├── PermanentError            retrying the same call cannot help
│   ├── InvalidInput          a field is missing, malformed or out of range   (CLI exit 2)
│   │   └── CatalogError      the memory-schema catalogue itself is invalid
│   ├── NotFound              nothing matches                                 (CLI exit 1)
│   └── ConflictError         the ledger's state forbids the write            (CLI exit 3)
│       ├── FactConflict      same valid_from, different value, equal trust
│       ├── TrustRejected     same valid_from, different value, lower trust
│       ├── VersionConflict   expected_version does not match
│       └── IdempotencyConflict  a key reused with a different payload
└── RetryableError            transient; the same call may succeed later
    └── StoreBusy             serialisation failure or lock timeout after bounded retries
"""

from __future__ import annotations


class SgamError(Exception):
    exit_code = 4


class PermanentError(SgamError):
    pass


class InvalidInput(PermanentError):
    exit_code = 2

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class CatalogError(InvalidInput):
    def __init__(self, location: str, problem: str) -> None:
        super().__init__(location, problem)
        self.location = location


class NotFound(PermanentError):
    exit_code = 1


class ConflictError(PermanentError):
    exit_code = 3


class FactConflict(ConflictError):
    def __init__(self, message: str, *, existing_fact_id: str) -> None:
        super().__init__(message)
        self.existing_fact_id = existing_fact_id


class TrustRejected(ConflictError):
    def __init__(self, message: str, *, existing_fact_id: str) -> None:
        super().__init__(message)
        self.existing_fact_id = existing_fact_id


class VersionConflict(ConflictError):
    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class IdempotencyConflict(ConflictError):
    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class RetryableError(SgamError):
    exit_code = 5


class StoreBusy(RetryableError):
    pass


class StoreUnavailable(RetryableError):
    pass
