"""Fact versions: bring one slot's stored facts in line with the projection of its claims.

The stored state is the source of "before"; `intervals.project` gives "after". Every fact whose
interval or status changes gets its current version closed (superseded_at = now) and a new
version inserted, so earlier beliefs stay readable by transaction time. Closes run before
inserts: the database checks non-overlap at every statement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from pipeline.db import inserts
from pipeline.db.models import FACT_COLUMNS, ClaimRow, FactRow, UtcDateTime
from pipeline.db.unit import Unit
from pipeline.errors import NotFound
from pipeline.ledger.intervals import Claim, Interval, holding_at, project
from pipeline.ledger.slots import AnyClaim, AnyVersion, SlotKey, SlotState, lock_key
from schemas.facts import ClaimRecord, Fact, FactStatus, Trust
from schemas.fields import format_utc

# A fact version's columns: those it copies from its claim, and its own lifecycle.
_LIFECYCLE = {"valid_to", "recorded_at", "forgotten_at"}
_FROM_CLAIM = [
    key for key in FACT_COLUMNS if key in ClaimRow.__table__.columns and key not in _LIFECYCLE
]
HOLDING = (FactStatus.ACTIVE.value, FactStatus.EXPIRED.value)


def holds(status: str, trust: str) -> bool:
    """Whether a current version is part of the belief (as `guards.HOLDING` says in SQL): an
    untrusted one never is, whether quarantined or expired while quarantined."""
    return status in HOLDING and trust != Trust.UNTRUSTED.value


@dataclass(frozen=True)
class Change:
    """One fact whose current version was replaced. `before` is None for a new fact."""

    fact_id: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any]


def row_values(row: AnyVersion) -> dict[str, Any]:
    return {key: getattr(row, key) for key in FACT_COLUMNS}


def to_fact(values: Mapping[str, Any]) -> Fact:
    return Fact.model_validate(dict(values))


def record_of(row: ClaimRow) -> ClaimRecord:
    return ClaimRecord.model_validate(row, from_attributes=True)


def current_fact(session: Session, fact_id: str) -> FactRow | None:
    query = select(FactRow).where(FactRow.fact_id == fact_id, FactRow.superseded_at.is_(None))
    return session.scalars(query).one_or_none()


def locked_fact(unit: Unit, fact_id: str, tenant_id: str) -> tuple[SlotKey, FactRow]:
    """A fact's current version, read again once its key is locked (shared with its subject's
    forget): a forget, a purge or a dismissal that won the race is NotFound here, as is another
    tenant's fact. The first read only names the key to lock; the second decides."""
    found = current_fact(unit.session, fact_id)
    if found is None or found.tenant_id != tenant_id or found.forgotten_at is not None:
        raise NotFound(f"no fact {fact_id} in tenant {tenant_id}")
    key = SlotKey.of(found)
    lock_key(unit, key)
    # The identity map would hand back the row as first read: load what is committed now.
    query = select(FactRow).where(FactRow.fact_id == fact_id, FactRow.superseded_at.is_(None))
    row = unit.session.scalars(query.execution_options(populate_existing=True)).one_or_none()
    if row is None or row.forgotten_at is not None:
        raise NotFound(f"no fact {fact_id} in tenant {tenant_id} (forgotten or dismissed)")
    return key, row


def as_claim(row: AnyClaim, now: datetime) -> Claim:
    """The claim as interval arithmetic sees it at `now`: past its retention it is expired."""
    return Claim(
        claim_id=row.claim_id,
        value_key=row.value_hash,
        valid_from=row.valid_from,
        valid_to=row.valid_to,
        trust_rank=Trust(row.trust).rank,
        recorded_order=(row.recorded_at, row.claim_id),
        expired=row.expires_at is not None and row.expires_at <= now,
    )


def stored_intervals(current: Mapping[str, AnyVersion]) -> list[Interval]:
    holding = [row for row in current.values() if holds(row.status, row.trust)]
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
    """The row of one fact version: the claim's content and this version's lifecycle."""
    copied = {key: _column_value(getattr(claim, key)) for key in _FROM_CLAIM}
    return copied | {
        "fact_id": claim.claim_id,
        "version": version,
        "valid_to": valid_to,
        "recorded_at": now,
        "superseded_at": None,
        "supersedes_fact_id": supersedes,
        "status": status.value,
        "forgotten_at": None,
    }


def _column_value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


# Closes the current version of one fact: executed with one parameter set per fact.
CLOSE_VERSION = (
    update(FactRow)
    .where(FactRow.fact_id == bindparam("closed_id"), FactRow.superseded_at.is_(None))
    .values(superseded_at=bindparam("closed_at", type_=UtcDateTime()))
)


def write_versions(session: Session, changes: list[Change], now: datetime) -> None:
    """Close the replaced versions, then insert their successors."""
    closing = [
        {"closed_id": change.fact_id, "closed_at": now}
        for change in changes
        if change.before is not None
    ]
    if closing:
        session.connection().execute(CLOSE_VERSION, closing)
    inserts.insert_rows(session, FactRow, [dict(change.after) for change in changes])


def reproject(session: Session, now: datetime, state: SlotState) -> list[Change]:
    """Re-project the slot from its claims and write the difference. Caller holds the key lock
    and passes the slot as it stands, including any claim it just added."""
    changes = reprojection(now, state)
    if changes:
        write_versions(session, changes, changes[0].after["recorded_at"])
    return changes


def reprojection(now: datetime, state: SlotState) -> list[Change]:
    """The fact versions that re-projecting the slot from its claims replaces or adds; every
    new version is recorded at the same instant, `now` or later."""
    claims, current = state.claims, state.current
    # Transaction time never runs backwards for a fact, even if this host's clock does.
    now = max([now, *(row.recorded_at for row in current.values())])
    before = stored_intervals(current)
    after = project(as_claim(row, now) for row in claims.values())
    changes: list[Change] = []
    for interval in after:
        row = current.get(interval.fact_id)
        held = row is not None and holds(row.status, row.trust)
        if row is not None and held and row.valid_to == interval.valid_to:
            continue
        if row is not None and held:
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
        if fact_id not in kept and (holds(row.status, row.trust) or released):
            lost = new_version(
                claims[fact_id],
                version=row.version + 1,
                status=FactStatus.SUPERSEDED,
                valid_to=row.valid_to,
                supersedes=row.supersedes_fact_id,
                now=now,
            )
            changes.append(Change(fact_id, row_values(row), lost))
    return changes


def change_reason(change: Change, by: str) -> str:
    """Why a fact other than the one written got a new version."""
    after, before = change.after, change.before
    if after["status"] == FactStatus.SUPERSEDED.value:
        return f"lost its interval to fact {by}"
    if before is None:
        # A claim that had joined an equal value as a restatement, now separated from it.
        return (
            f"an earlier restatement now holds on its own from {format_utc(after['valid_from'])}:"
            f" fact {by} changed the value before it"
        )
    if before["valid_to"] == after["valid_to"]:
        return f"status {before['status']} became {after['status']} by fact {by}"
    return (
        f"valid_to moved from {format_utc(before['valid_to']) or 'open'} "
        f"to {format_utc(after['valid_to']) or 'open'} by fact {by}"
    )
