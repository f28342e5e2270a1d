"""Fact imports (`sgam import`): each line checked as a `put` command against the catalogue
before any is written, and one receipt per line once `put_many` has answered.

Checking uses `check_put`, the rules the write path applies itself, so a file that passes is
refused at write time only for what depends on the ledger's state (conflicts, lower trust,
stale versions, a reused idempotency key) or on time passing (an expiry that fell due).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from pipeline.errors import (
    ConflictError,
    InvalidInput,
    NotFound,
    SgamError,
    TrustRejected,
    VersionConflict,
)
from pipeline.ledger.batch import PutOutcome
from pipeline.ledger.checks import check_put
from pipeline.settings import Settings
from pipeline.validation import parse
from schemas.catalog import Catalog
from schemas.commands import PutFact
from schemas.results import absent_when_none

WRITTEN = "written"
UNCHANGED = "unchanged"  # a restatement of what holds, or a repeated idempotency key
CONFLICT = "conflict"  # an equal-trust disagreement, or an idempotency key reused differently
FORGOTTEN = "forgotten"  # a repeated idempotency key whose fact was forgotten since
REJECTED = "rejected"  # a different value with higher trust holds
VERSION_CONFLICT = "version_conflict"
INVALID = "invalid"
OUTCOMES = (WRITTEN, UNCHANGED, CONFLICT, REJECTED, VERSION_CONFLICT, INVALID)


def checked_command(
    data: Mapping[str, Any], catalog: Catalog, settings: Settings, now: datetime
) -> PutFact:
    """`data` as a PutFact that the catalogue accepts at `now`, or InvalidInput naming the
    first field at fault."""
    command = parse(PutFact, data)
    check_put(command, catalog, settings, now)
    return command


class ImportReceipt(BaseModel):
    """What became of one line: its outcome, the fact that holds when there is one, else the
    error (`problem` is the error itself, for the exit code; it is not printed)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    line: int
    outcome: str
    fact_id: str | None = Field(default=None, exclude_if=absent_when_none)
    version: int | None = Field(default=None, exclude_if=absent_when_none)
    error: str | None = Field(default=None, exclude_if=absent_when_none)
    problem: SkipJsonSchema[SgamError | None] = Field(default=None, exclude=True)


def receipt(line: int, outcome: PutOutcome) -> ImportReceipt:
    """The receipt of a line from what `put_many` answered for it."""
    if isinstance(outcome, InvalidInput):
        return invalid_line(line, outcome)
    if isinstance(outcome, ConflictError):
        message = f"{type(outcome).__name__}: {outcome}"
        return ImportReceipt(
            line=line, outcome=_refusal_outcome(outcome), error=message, problem=outcome
        )
    if isinstance(outcome, NotFound):  # a repeated key whose fact was forgotten since
        return ImportReceipt(line=line, outcome=FORGOTTEN, error=str(outcome), problem=outcome)
    fact = outcome.fact
    outcome_name = WRITTEN if outcome.written else UNCHANGED
    return ImportReceipt(
        line=line, outcome=outcome_name, fact_id=fact.fact_id, version=fact.version
    )


def invalid_line(line: int, problem: InvalidInput) -> ImportReceipt:
    """The receipt of a line that is not a valid command; the error names the field, unless
    the whole line is at fault (not JSON, not an object)."""
    error = problem.problem if problem.field == "line" else str(problem)
    return ImportReceipt(line=line, outcome=INVALID, error=error, problem=problem)


def _refusal_outcome(refusal: ConflictError) -> str:
    if isinstance(refusal, TrustRejected):
        return REJECTED
    if isinstance(refusal, VersionConflict):
        return VERSION_CONFLICT
    return CONFLICT
