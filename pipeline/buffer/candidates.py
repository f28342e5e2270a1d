"""The recurrence buffer in the caller's unit of work: buffer a candidate, add support, promote,
confirm, reject, reset and expire — each decision logged, and each replayed from the log.

A buffer operation holds the same lock as a ledger write of its key (scope, subject,
attribute), so two workers never buffer, or promote, the same value twice.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update

from pipeline.buffer.rules import eligible, first_support, sessions
from pipeline.db.models import CandidateRow, SupportRow
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError, NotBuffered, NotFound
from pipeline.ledger import events
from pipeline.ledger.batch import write_fact
from pipeline.ledger.results import PutResult
from pipeline.ledger.slots import SlotKey, lock_key
from schemas.buffer import (
    BufferedPayload,
    CandidateRecord,
    DecidedPayload,
    SupportedPayload,
    SupportRecord,
)
from schemas.commands import PutFact
from schemas.facts import JsonValue, Trust
from schemas.lifecycle import CandidateStatus, EventKind, candidate_kind


@dataclass(frozen=True)
class Subject:
    """Where a candidate lives: one attribute of one subject in one scope."""

    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    attribute: str

    def lock(self, unit: Unit) -> None:
        lock_key(
            unit,
            SlotKey(self.tenant_id, self.agent_id, self.purpose, self.subject, self.attribute, ""),
        )


@dataclass(frozen=True)
class Buffered:
    """Where a candidate stands after an operation; `fact` when it was promoted or confirmed,
    `refused` when the ledger refused the promotion."""

    candidate_id: str
    status: CandidateStatus
    support: int
    fact: PutResult | None = None
    refused: ConflictError | None = None


def put_command(
    where: Subject,
    value: JsonValue,
    support: SupportRecord,
    *,
    trust: Trust,
    confidence: float,
    actor: str,
    idempotency_key: str,
) -> PutFact:
    """The ledger write of a value said by `support`'s episode — for a candidate written at
    once (the policy) and for one promoted or confirmed out of the buffer alike."""
    return PutFact(
        **asdict(where),
        value=value,
        valid_from=support.valid_from,
        source_episode_id=support.episode_id,
        evidence=support.evidence,
        trust=trust,
        confidence=confidence,
        actor=actor,
        idempotency_key=idempotency_key,
    )


def value_hash(value: object) -> str:
    return events.content_hash(value)


@dataclass
class Waiting:
    """The open candidates of one key, read once while the key's lock is held."""

    where: Subject
    rows: list[CandidateRow]

    def of_value(self, digest: str) -> CandidateRow | None:
        return next((row for row in self.rows if row.value_hash == digest), None)

    def rivals(self, digest: str, stated_at: datetime) -> list[CandidateRow]:
        """Other values last supported before `stated_at`."""
        return [r for r in self.rows if r.value_hash != digest and r.last_seen_at < stated_at]


def waiting(unit: Unit, where: Subject) -> Waiting:
    """Lock the key (the ledger's lock for it), then read its open candidates."""
    where.lock(unit)
    query = select(CandidateRow).where(
        CandidateRow.tenant_id == where.tenant_id,
        CandidateRow.agent_id == where.agent_id,
        CandidateRow.purpose == where.purpose,
        CandidateRow.subject == where.subject,
        CandidateRow.attribute == where.attribute,
        CandidateRow.status == CandidateStatus.BUFFERED,
        CandidateRow.forgotten_at.is_(None),
    )
    return Waiting(where, list(unit.session.scalars(query)))


def supports_of(unit: Unit, candidate_id: str) -> list[SupportRecord]:
    rows = unit.session.scalars(select(SupportRow).where(SupportRow.candidate_id == candidate_id))
    return [SupportRecord.model_validate(row, from_attributes=True) for row in rows]


def add_support(
    unit: Unit, key: Waiting, value: object, support: SupportRecord, *, actor: str
) -> CandidateRow:
    """Buffer the value (a new candidate) or add the episode's support to the open one; an
    episode that already supports it changes nothing."""
    where = key.where
    digest = value_hash(value)
    row = key.of_value(digest)
    if row is None:
        record = CandidateRecord(
            candidate_id=str(uuid.uuid4()),
            **asdict(where),
            value=value,
            value_hash=digest,
            created_at=unit.clock(),
        )
        buffered = BufferedPayload(candidate=record, support=support)
        apply_buffered(unit, buffered)
        reason = "a weak signal waits for support"
        _log(
            unit, EventKind.CANDIDATE_BUFFERED, buffered, where, record.candidate_id, actor, reason
        )
        found = unit.session.get(CandidateRow, record.candidate_id)
        assert found is not None
        key.rows.append(found)
        return found
    if unit.session.get(SupportRow, (row.candidate_id, support.episode_id)) is None:
        supported = SupportedPayload(candidate_id=row.candidate_id, support=support)
        apply_supported(unit, supported)
        _log(unit, EventKind.CANDIDATE_SUPPORTED, supported, where, row.candidate_id, actor, None)
    return row


def promote_if_eligible(
    unit: Unit,
    row: CandidateRow,
    *,
    times: int | None,
    window: timedelta,
    trust: Trust,
    confidence: float,
    actor: str,
) -> Buffered:
    supports = supports_of(unit, row.candidate_id)
    if not eligible(supports, times, window):
        return Buffered(row.candidate_id, CandidateStatus(row.status), row.support)
    return settle(
        unit, row, CandidateStatus.PROMOTED, trust=trust, confidence=confidence, actor=actor
    )


def settle(
    unit: Unit,
    row: CandidateRow,
    status: CandidateStatus,
    *,
    trust: Trust,
    confidence: float,
    actor: str,
    reason: str | None = None,
) -> Buffered:
    """Promote or confirm: write the fact (valid from the first support, recorded now), then
    close the candidate. A refusal by the ledger leaves the candidate buffered."""
    supports = supports_of(unit, row.candidate_id)
    first = first_support(supports)
    command = put_command(
        _where(row),
        row.value,
        first,
        trust=trust,
        confidence=confidence,
        actor=actor,
        idempotency_key=f"candidate:{row.candidate_id}",
    )
    outcome = write_fact(unit, command)
    if isinstance(outcome, ConflictError):
        return Buffered(row.candidate_id, CandidateStatus(row.status), row.support, refused=outcome)
    payload = DecidedPayload(
        candidate_id=row.candidate_id,
        status=status,
        now=unit.clock(),
        fact_id=outcome.fact.fact_id,
        reason=reason,
    )
    apply_decided(unit, payload)
    _log(
        unit,
        candidate_kind(status),
        payload,
        _where(row),
        row.candidate_id,
        actor,
        reason,
        [outcome.fact.fact_id],
    )
    return Buffered(row.candidate_id, status, row.support, fact=outcome)


def close(
    unit: Unit, row: CandidateRow, status: CandidateStatus, *, actor: str, reason: str
) -> None:
    """Reject, reset or expire a buffered candidate."""
    payload = DecidedPayload(
        candidate_id=row.candidate_id,
        status=status,
        now=unit.clock(),
        reason=reason,
    )
    apply_decided(unit, payload)
    kind = candidate_kind(status)
    _log(unit, kind, payload, _where(row), row.candidate_id, actor, reason)


def reset_contradicted(
    unit: Unit, key: Waiting, kept_digest: str, at: datetime, *, actor: str
) -> None:
    """A different value of a single-valued attribute, stated later: open candidates of the
    other values lose their support (closed as `reset`)."""
    for rival in key.rivals(kept_digest, at):
        close(
            unit,
            rival,
            CandidateStatus.RESET,
            actor=actor,
            reason="a later session stated another value",
        )
        key.rows.remove(rival)


def buffered_candidate(unit: Unit, candidate_id: str, tenant_id: str) -> CandidateRow:
    """The candidate to confirm or reject, locked; another tenant's is reported as missing."""
    row = unit.session.get(CandidateRow, candidate_id)
    if row is None or row.tenant_id != tenant_id or row.forgotten_at is not None:
        raise NotFound(f"no candidate {candidate_id} in tenant {tenant_id}")
    _where(row).lock(unit)
    unit.session.refresh(row)
    if row.forgotten_at is not None:  # a forget or purge of its subject won the race
        raise NotFound(f"no candidate {candidate_id} in tenant {tenant_id} (forgotten)")
    if row.status != CandidateStatus.BUFFERED:
        raise NotBuffered(
            f"candidate {candidate_id} is {row.status}; only a buffered one can be decided",
            candidate_id=candidate_id,
        )
    return row


def _where(row: CandidateRow) -> Subject:
    return Subject(row.tenant_id, row.agent_id, row.purpose, row.subject, row.attribute)


def _log(
    unit: Unit,
    kind: EventKind,
    payload: BufferedPayload | SupportedPayload | DecidedPayload,
    where: Subject,
    candidate_id: str,
    actor: str,
    reason: str | None,
    fact_ids: list[str] | None = None,
) -> None:
    events.record(
        unit,
        kind,
        payload,
        occurred_at=unit.clock(),
        actor=actor,
        tenant_id=where.tenant_id,
        subject=where.subject,
        fact_ids=fact_ids or [],
        reason=f"candidate {candidate_id}" + (f": {reason}" if reason else ""),
    )


# -- the effects, also what replay applies ---------------------------------------------------


def apply_buffered(unit: Unit, payload: BufferedPayload) -> None:
    record, support = payload.candidate, payload.support
    unit.session.add(
        CandidateRow(
            **record.model_dump(),
            status=CandidateStatus.BUFFERED,
            support=1,
            first_seen_at=support.occurred_at,
            last_seen_at=support.occurred_at,
            valid_from=support.valid_from,
        )
    )
    unit.session.add(SupportRow(candidate_id=record.candidate_id, **support.model_dump()))
    unit.session.flush()


def apply_supported(unit: Unit, payload: SupportedPayload) -> None:
    support = payload.support
    unit.session.add(SupportRow(candidate_id=payload.candidate_id, **support.model_dump()))
    unit.session.flush()
    row = unit.session.get(CandidateRow, payload.candidate_id)
    assert row is not None, f"support for unknown candidate {payload.candidate_id}"
    supports = supports_of(unit, payload.candidate_id)
    row.support = sessions(supports)
    row.first_seen_at = min(s.occurred_at for s in supports)
    row.last_seen_at = max(s.occurred_at for s in supports)
    row.valid_from = first_support(supports).valid_from


def apply_decided(unit: Unit, payload: DecidedPayload) -> None:
    unit.session.execute(
        update(CandidateRow)
        .where(CandidateRow.candidate_id == payload.candidate_id)
        .values(
            status=payload.status,
            decided_at=payload.now,
            fact_id=payload.fact_id,
            reason=payload.reason,
        )
        .execution_options(synchronize_session="fetch")
    )
