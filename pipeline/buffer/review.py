"""The recurrence buffer from the outside: list candidates, and a user's (or a reviewer's)
confirmation or rejection of one — each in a transaction of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from pipeline.buffer.candidates import (
    Buffered,
    buffered_candidate,
    close,
    settle,
)
from pipeline.db.models import CandidateRow, SupportRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError
from pipeline.ledger.keyed_steps import DecidedOutcome, decision_step
from pipeline.validation import parse
from schemas.buffer import SupportRecord
from schemas.commands import CandidateCommand, RejectCommand
from schemas.facts import Trust
from schemas.fields import Identifier
from schemas.lifecycle import CandidateStatus
from schemas.results import Decided, StoredCandidate, SupportedCandidate

# A user vouches for what they said themselves; a reviewer vouches as a promotion does.
CONFIRMED_TRUST = {"user": Trust.USER_CONFIRMED, "reviewer": Trust.VERIFIED}


class CandidateQuery(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    agent_id: Identifier | None = None
    purpose: Identifier | None = None
    subject: Identifier | None = None
    status: CandidateStatus | None = Field(
        default=CandidateStatus.BUFFERED, description="None: every status"
    )
    limit: int = Field(default=1000, ge=1, le=100_000)
    offset: int = Field(default=0, ge=0, le=100_000, description="rows skipped first (paging)")


def list_candidates(
    store: Store, query: CandidateQuery | Mapping[str, Any]
) -> list[SupportedCandidate]:
    query = parse(CandidateQuery, query)
    statement = select(CandidateRow).where(
        CandidateRow.tenant_id == query.tenant_id, CandidateRow.forgotten_at.is_(None)
    )
    for column, wanted in (
        (CandidateRow.agent_id, query.agent_id),
        (CandidateRow.purpose, query.purpose),
        (CandidateRow.subject, query.subject),
    ):
        if wanted is not None:
            statement = statement.where(column == wanted)
    if query.status is not None:
        statement = statement.where(CandidateRow.status == query.status)
    # Oldest evidence first, with ties broken by the slot and value, so the listing does not
    # depend on which worker happened to buffer a candidate first.
    statement = (
        statement.order_by(
            CandidateRow.first_seen_at,
            CandidateRow.subject,
            CandidateRow.attribute,
            CandidateRow.value_hash,
            CandidateRow.candidate_id,
        )
        .offset(query.offset)
        .limit(query.limit)
    )
    with store.begin() as unit:
        rows = list(unit.session.scalars(statement))
        supports: dict[str, list[SupportRecord]] = {row.candidate_id: [] for row in rows}
        if rows:  # a reviewer decides on the statements themselves: each supporting episode
            supporting = select(SupportRow).where(SupportRow.candidate_id.in_(list(supports)))
            for support in unit.session.scalars(supporting.order_by(SupportRow.occurred_at)):
                supports[support.candidate_id].append(
                    SupportRecord.model_validate(support, from_attributes=True)
                )
        return [
            SupportedCandidate(
                **dict(StoredCandidate.model_validate(row)), supporting=supports[row.candidate_id]
            )
            for row in rows
        ]


def confirm(store: Store, command: CandidateCommand | Mapping[str, Any]) -> Decided:
    """The user (or a reviewer: `by`) confirms: the candidate becomes a fact with the user's
    trust (a reviewer's: verified), valid from its first support. Raises NotFound,
    NotBuffered, or the ledger's refusal; with an idempotency key, a repeat answers the first
    decision (or refusal) again and writes nothing."""
    command = parse(CandidateCommand, command)

    def work(unit: Unit) -> Buffered:
        row = buffered_candidate(unit, command.candidate_id, command.tenant_id)
        return settle(
            unit,
            row,
            CandidateStatus.CONFIRMED,
            trust=CONFIRMED_TRUST[command.by],
            confidence=1.0,
            actor=command.actor,
            reason=f"confirmed by {_whom(command)}",
        )

    return _answered(store, command, "confirm", work)


def reject(store: Store, command: RejectCommand | Mapping[str, Any]) -> Decided:
    """Drop a buffered candidate for good; its support stays for the audit, and the reason
    given, if any, in the log. A repeated idempotency key answers the first rejection."""
    command = parse(RejectCommand, command)
    why = f"rejected by {_whom(command)}" + (f": {command.reason}" if command.reason else "")

    def work(unit: Unit) -> Buffered:
        row = buffered_candidate(unit, command.candidate_id, command.tenant_id)
        close(
            unit,
            row,
            CandidateStatus.REJECTED,
            actor=command.actor,
            reason=why,
        )
        return Buffered(row.candidate_id, CandidateStatus.REJECTED, row.support)

    return _answered(store, command, "reject", work)


def _answered(
    store: Store, command: CandidateCommand, verb: str, work: Callable[[Unit], Buffered]
) -> Decided:
    """`work` through the decision's keyed step, in one transaction; its refusal raised."""
    step = decision_step(command, verb)

    def keyed(unit: Unit) -> DecidedOutcome:
        def apply() -> DecidedOutcome:
            result = work(unit)
            return result.refused if result.refused is not None else _decided(result)

        return step.answer(unit, apply)

    outcome = store.run(keyed)
    if isinstance(outcome, ConflictError):
        raise outcome
    return outcome


def _whom(command: CandidateCommand) -> str:
    return "the user" if command.by == "user" else "a reviewer"


def _decided(result: Buffered) -> Decided:
    fact = result.fact.fact if result.fact is not None else None
    return Decided(candidate_id=result.candidate_id, status=result.status, fact=fact)
