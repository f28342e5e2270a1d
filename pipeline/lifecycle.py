"""Lifecycle steps after a write: promotion out of quarantine and expiry of retained facts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from pipeline import decisions, idempotency
from pipeline.decisions import Decision
from pipeline.errors import ConflictError, NotFound, VersionConflict
from pipeline.ledger import PutResult, lock_key, refusal_decision, trust_refusal
from pipeline.models import ClaimRow, FactRow
from pipeline.projection import (
    SLOT_FIELDS,
    Change,
    SlotKey,
    current_fact,
    in_slot,
    load_slot,
    new_version,
    record_of,
    reproject,
    row_values,
    to_fact,
    write_versions,
)
from pipeline.store import Store
from pipeline.validation import parse
from schemas.commands import ExpireFacts, PromoteFact
from schemas.facts import FactStatus, Trust, format_utc


class NotQuarantined(ConflictError):
    """Only a quarantined fact can be promoted."""


def promote(store: Store, command: PromoteFact | Mapping[str, Any]) -> PutResult:
    """Release a quarantined fact: its trust becomes verified and the normal supersession rules
    apply at this moment. Returns the promoted fact's current version."""
    command = parse(PromoteFact, command)

    def work(session: Session) -> PutResult | ConflictError:
        def apply() -> PutResult | ConflictError:
            return _promote(store, session, command, now=store.clock())

        return idempotency.once(store, session, command, apply, PutResult.from_json)

    outcome = store.run(work)
    if isinstance(outcome, ConflictError):
        raise outcome
    return outcome


def _promote(
    store: Store, session: Session, command: PromoteFact, *, now: datetime
) -> PutResult | ConflictError:
    found = current_fact(session, command.fact_id)
    if found is None or found.tenant_id != command.tenant_id or found.forgotten_at is not None:
        # Another tenant's fact is reported exactly like a missing one.
        raise NotFound(f"no fact {command.fact_id} in tenant {command.tenant_id}")
    key = SlotKey.of(found)
    lock_key(store, session, key)
    row = current_fact(session, command.fact_id)  # again, now that the key is locked
    assert row is not None

    problem = _promotion_refusal(session, key, row, command, now)
    if problem is not None:
        _log(session, command, refusal_decision(problem), row, now, reason=str(problem))
        return problem
    changes = apply_promotion(session, key, command.fact_id, now)
    _log(
        session,
        command,
        Decision.PROMOTE,
        row,
        now,
        replay={"op": "promote", "fact_id": command.fact_id, "now": format_utc(now)},
    )
    for change in changes:
        if change.fact_id != command.fact_id:
            _log(
                session,
                command,
                Decision.SUPERSEDE,
                row,
                now,
                fact_id=change.fact_id,
                reason=decisions.change_reason(change, command.fact_id),
            )
    promoted = current_fact(session, command.fact_id)
    assert promoted is not None
    return PutResult(to_fact(row_values(promoted)), written=True)


def _promotion_refusal(
    session: Session, key: SlotKey, row: FactRow, command: PromoteFact, now: datetime
) -> ConflictError | None:
    if command.expected_version is not None and row.version != command.expected_version:
        return VersionConflict(
            f"expected_version {command.expected_version}, but fact {row.fact_id} is at "
            f"version {row.version}",
            expected=command.expected_version,
            actual=row.version,
        )
    if row.status != FactStatus.QUARANTINED.value:
        return NotQuarantined(
            f"fact {row.fact_id} is {row.status}; only quarantined facts can be promoted"
        )
    if row.expires_at is not None and row.expires_at <= now:
        return NotQuarantined(f"fact {row.fact_id} expired at {format_utc(row.expires_at)}")
    claim = session.get(ClaimRow, row.fact_id)
    assert claim is not None
    promoted = record_of(claim).model_copy(update={"trust": Trust.VERIFIED})
    return trust_refusal(load_slot(session, key), promoted)


def apply_promotion(session: Session, key: SlotKey, fact_id: str, now: datetime) -> list[Change]:
    """Make the claim verified and re-project its slot (also used by replay)."""
    session.execute(
        update(ClaimRow)
        .where(ClaimRow.claim_id == fact_id)
        .values(quarantined=False, trust=Trust.VERIFIED.value)
        .execution_options(synchronize_session=False)
    )
    session.expire_all()
    return reproject(session, key, now, load_slot(session, key))


def _log(
    session: Session,
    command: PromoteFact,
    decision: Decision,
    row: FactRow,
    now: datetime,
    *,
    fact_id: str | None = None,
    reason: str | None = None,
    replay: dict[str, Any] | None = None,
) -> None:
    decisions.record(
        session,
        decision,
        occurred_at=now,
        actor=command.actor,
        tenant_id=row.tenant_id,
        subject=row.subject,
        fact_ids=[fact_id or row.fact_id],
        command=replay,
        idempotency_key=command.idempotency_key,
        reason=reason,
    )


@dataclass(frozen=True)
class ExpireResult:
    expired_fact_ids: list[str]


def expire(store: Store, command: ExpireFacts | Mapping[str, Any]) -> ExpireResult:
    """Give every active fact whose retention has passed at `now` an explicit expired version
    and an `expire` event, one key per transaction so a large run never holds many locks."""
    command = parse(ExpireFacts, command)
    now = command.now or store.clock()
    due = select(*(getattr(FactRow, name) for name in SLOT_FIELDS)).where(*_due(now)).distinct()
    if command.tenant_id is not None:
        due = due.where(FactRow.tenant_id == command.tenant_id)
    with store.transaction() as session:
        keys = [SlotKey(*row) for row in session.execute(due)]
    expired: list[str] = []
    for key in keys:
        expired += store.run(partial(_expire_key, store, key=key, now=now, actor=command.actor))
    return ExpireResult(expired)


def _due(now: datetime) -> list[Any]:
    return [
        FactRow.superseded_at.is_(None),
        FactRow.forgotten_at.is_(None),
        FactRow.status == FactStatus.ACTIVE.value,
        FactRow.expires_at <= now,
    ]


def _expire_key(
    store: Store, session: Session, key: SlotKey, now: datetime, actor: str
) -> list[str]:
    lock_key(store, session, key)
    fact_ids = apply_expiry(session, key, now)
    if fact_ids:
        decisions.record(
            session,
            Decision.EXPIRE,
            occurred_at=now,
            actor=actor,
            tenant_id=key.tenant_id,
            subject=key.subject,
            fact_ids=fact_ids,
            command={"op": "expire", "key": asdict(key), "now": format_utc(now)},
            reason="retention passed",
        )
    return fact_ids


def apply_expiry(session: Session, key: SlotKey, now: datetime) -> list[str]:
    """Write an expired version of every due fact of the slot (also used by replay)."""
    due = select(FactRow).where(*in_slot(FactRow), *_due(now))
    rows = session.scalars(due, asdict(key)).all()
    stamp = max([now, *(row.recorded_at for row in rows)])  # transaction time never runs back
    changes = []
    for row in rows:
        claim = session.get(ClaimRow, row.fact_id)
        assert claim is not None
        after = new_version(
            claim,
            version=row.version + 1,
            status=FactStatus.EXPIRED,
            valid_to=row.valid_to,
            supersedes=row.supersedes_fact_id,
            now=stamp,
        )
        changes.append(Change(row.fact_id, row_values(row), after))
    write_versions(session, changes, stamp)
    return [change.fact_id for change in changes]
