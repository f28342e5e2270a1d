"""Bring one slot's stored facts in line with the projection of its claims.

The stored state is the source of "before"; `intervals.project` gives "after". Every fact whose
interval or status changes gets its current version closed (superseded_at = now) and a new
version inserted, so earlier beliefs stay readable by transaction time. Closes run before
inserts: the database checks non-overlap at every statement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from pipeline import writes
from pipeline.intervals import Claim, Interval, holding_at, project
from pipeline.models import ClaimRow, FactRow, UtcDateTime
from schemas.commands import PutFact
from schemas.facts import ClaimRecord, Fact, FactStatus, Trust

AnyClaim = ClaimRow | ClaimRecord

FACT_COLUMNS = [column.key for column in FactRow.__table__.columns if column.key != "row_id"]
HOLDING = (FactStatus.ACTIVE.value, FactStatus.EXPIRED.value)


@dataclass(frozen=True)
class SlotKey:
    tenant_id: str
    agent_id: str
    purpose: str
    subject: str
    attribute: str
    slot: str

    @classmethod
    def of(cls, row: AnyClaim | FactRow | PutFact) -> SlotKey:
        slot = "" if isinstance(row, PutFact) else row.slot  # a command only locks its key
        return cls(row.tenant_id, row.agent_id, row.purpose, row.subject, row.attribute, slot)

    def lock_name(self) -> tuple[str, ...]:
        # Lock the whole attribute, not the slot: a multi-valued key is small and rarely hot.
        return ("key", self.tenant_id, self.agent_id, self.purpose, self.subject, self.attribute)

    def subject_lock_name(self) -> tuple[str, ...]:
        return subject_lock_name(self.tenant_id, self.subject)


SLOT_FIELDS = [field.name for field in fields(SlotKey)]


def subject_lock_name(tenant_id: str, subject: str) -> tuple[str, ...]:
    """Writers hold it shared, forget holds it exclusively: forgetting never interleaves."""
    return ("subject", tenant_id, subject)


@dataclass(frozen=True)
class Change:
    """One fact whose current version was replaced. `before` is None for a new fact."""

    fact_id: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any]


def row_values(row: FactRow) -> dict[str, Any]:
    return {key: getattr(row, key) for key in FACT_COLUMNS}


def to_fact(values: Mapping[str, Any]) -> Fact:
    return Fact.model_validate(dict(values))


def record_of(row: ClaimRow) -> ClaimRecord:
    return ClaimRecord.model_validate(row, from_attributes=True)


def current_fact(session: Session, fact_id: str) -> FactRow | None:
    query = select(FactRow).where(FactRow.fact_id == fact_id, FactRow.superseded_at.is_(None))
    return session.scalars(query).one_or_none()


def as_claim(row: AnyClaim) -> Claim:
    return Claim(
        claim_id=row.claim_id,
        value_key=row.value_hash,
        valid_from=row.valid_from,
        valid_to=row.valid_to,
        trust_rank=Trust(row.trust).rank,
        recorded_order=(row.recorded_at, row.claim_id),
    )


def in_slot(table: type[ClaimRow] | type[FactRow]) -> list[Any]:
    """Rows of one slot, not forgotten; bind the slot with `asdict(key)`."""
    return [getattr(table, name) == bindparam(name) for name in SLOT_FIELDS] + [
        table.forgotten_at.is_(None)
    ]


# Built once: the write path runs these on every put, and building them costs more than running.
_CLAIMS_OF_SLOT = select(ClaimRow).where(*in_slot(ClaimRow), ClaimRow.quarantined.is_(False))
_CURRENT_OF_SLOT = (
    select(FactRow)
    .where(*in_slot(FactRow), FactRow.superseded_at.is_(None))
    .execution_options(populate_existing=True)  # rows read earlier may have been closed since
)


_CLOSE_VERSIONS = (
    update(FactRow)
    .where(
        FactRow.fact_id.in_(bindparam("fact_ids", expanding=True)),
        FactRow.superseded_at.is_(None),
    )
    .values(superseded_at=bindparam("now", type_=UtcDateTime()))
)


def load_claims(session: Session, key: SlotKey) -> list[ClaimRow]:
    return list(session.scalars(_CLAIMS_OF_SLOT, asdict(key)))


def load_current(session: Session, key: SlotKey) -> dict[str, FactRow]:
    return {row.fact_id: row for row in session.scalars(_CURRENT_OF_SLOT, asdict(key))}


def stored_intervals(current: Mapping[str, FactRow]) -> list[Interval]:
    holding = [row for row in current.values() if row.status in HOLDING]
    return sorted(
        (Interval(r.fact_id, r.value_hash, r.valid_from, r.valid_to) for r in holding),
        key=lambda interval: interval.valid_from,
    )


def new_version(
    claim: AnyClaim,
    *,
    version: int,
    status: FactStatus,
    valid_to: datetime | None,
    supersedes: str | None,
    now: datetime,
) -> dict[str, Any]:
    return {
        "fact_id": claim.claim_id,
        "version": version,
        "tenant_id": claim.tenant_id,
        "agent_id": claim.agent_id,
        "purpose": claim.purpose,
        "subject": claim.subject,
        "attribute": claim.attribute,
        "slot": claim.slot,
        "cardinality": str(claim.cardinality),
        "value": claim.value,
        "value_hash": claim.value_hash,
        "kind": claim.kind,
        "schema_version": claim.schema_version,
        "valid_from": claim.valid_from,
        "valid_to": valid_to,
        "recorded_at": now,
        "superseded_at": None,
        "supersedes_fact_id": supersedes,
        "source_episode_id": claim.source_episode_id,
        "evidence": claim.evidence,
        "confidence": claim.confidence,
        "trust": str(claim.trust),
        "status": status.value,
        "expires_at": claim.expires_at,
        "forgotten_at": None,
    }


def write_versions(session: Session, changes: list[Change], now: datetime) -> None:
    """Close the replaced versions, then insert their successors."""
    closing = [change.fact_id for change in changes if change.before is not None]
    if closing:
        session.connection().execute(_CLOSE_VERSIONS, {"fact_ids": closing, "now": now})
    writes.insert_rows(session, FactRow, [dict(change.after) for change in changes])


@dataclass
class SlotState:
    """What a write needs to know about one slot, read once after its lock is held."""

    claims: dict[str, AnyClaim]
    current: dict[str, FactRow]

    def add(self, claim: AnyClaim) -> None:
        self.claims[claim.claim_id] = claim


def load_slot(session: Session, key: SlotKey) -> SlotState:
    claims: dict[str, AnyClaim] = {row.claim_id: row for row in load_claims(session, key)}
    return SlotState(claims, load_current(session, key))


def reproject(session: Session, key: SlotKey, now: datetime, state: SlotState) -> list[Change]:
    """Re-project the slot from its claims and write the difference. Caller holds the key lock
    and passes the slot as it stands, including any claim it just added."""
    claims, current = state.claims, state.current
    # Transaction time never runs backwards for a fact, even if this host's clock does.
    now = max([now, *(row.recorded_at for row in current.values())])
    before = stored_intervals(current)
    after = project(as_claim(row) for row in claims.values())
    changes: list[Change] = []
    for interval in after:
        row = current.get(interval.fact_id)
        if row is not None and row.status in HOLDING and row.valid_to == interval.valid_to:
            continue
        if row is not None and row.status in HOLDING:
            status = FactStatus(row.status)  # an expired fact stays expired when it is cut
            supersedes = row.supersedes_fact_id
        else:
            status = FactStatus.ACTIVE
            holder = holding_at(before, interval.valid_from)
            supersedes = holder.fact_id if holder and holder.fact_id != interval.fact_id else None
        changes.append(
            Change(
                interval.fact_id,
                row_values(row) if row is not None else None,
                new_version(
                    claims[interval.fact_id],
                    version=row.version + 1 if row is not None else 1,
                    status=status,
                    valid_to=interval.valid_to,
                    supersedes=supersedes,
                    now=now,
                ),
            )
        )
    kept = {interval.fact_id for interval in after}
    for fact_id, row in current.items():
        # A holding fact that lost its interval, or a just-promoted one that only restates.
        released = row.status == FactStatus.QUARANTINED.value and fact_id in claims
        if fact_id not in kept and (row.status in HOLDING or released):
            lost = new_version(
                claims[fact_id],
                version=row.version + 1,
                status=FactStatus.SUPERSEDED,
                valid_to=row.valid_to,
                supersedes=row.supersedes_fact_id,
                now=now,
            )
            changes.append(Change(fact_id, row_values(row), lost))
    write_versions(session, changes, now)
    return changes
