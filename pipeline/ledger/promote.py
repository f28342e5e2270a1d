"""Promotion: an authorised step that releases a quarantined fact into the ledger."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import update

from pipeline.db.models import ClaimRow, FactRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.errors import ConflictError, NotQuarantined, VersionConflict
from pipeline.ledger import events, idempotency
from pipeline.ledger.judging import trust_refusal
from pipeline.ledger.results import PutResult, settled
from pipeline.ledger.slots import SlotKey, load_slot, lock_key
from pipeline.ledger.versions import (
    Change,
    change_reason,
    current_fact,
    locked_fact,
    record_of,
    reproject,
    row_values,
    to_fact,
)
from pipeline.ledger.write import refusal_decision
from pipeline.validation import parse
from schemas.commands import PromoteFact
from schemas.events import PromotePayload
from schemas.facts import FactStatus, Trust
from schemas.fields import format_utc
from schemas.lifecycle import EventKind


def promote(store: Store, command: PromoteFact | Mapping[str, Any]) -> PutResult:
    """`promote_fact` in a transaction of its own, raising its refusal."""
    command = parse(PromoteFact, command)
    return settled(store, lambda unit: promote_fact(unit, command))


def promote_fact(unit: Unit, command: PromoteFact | Mapping[str, Any]) -> PutResult | ConflictError:
    """Release a quarantined fact: its trust becomes verified and the normal supersession rules
    apply at this moment. Returns the promoted fact's current version, or the refusal."""
    command = parse(PromoteFact, command)

    def apply() -> PutResult | ConflictError:
        return _promote(unit, command, now=unit.clock())

    return idempotency.put_step(command).answer(unit, apply)


def _promote(unit: Unit, command: PromoteFact, *, now: datetime) -> PutResult | ConflictError:
    session = unit.session
    key, row = locked_fact(unit, command.fact_id, command.tenant_id)
    log = _PromotionLog(unit, command, row, now)
    problem = _promotion_refusal(unit, key, row, command, now)
    if problem is not None:
        log.event(refusal_decision(problem), reason=str(problem))
        return problem
    changes = apply_promotion(unit, PromotePayload(fact_id=command.fact_id, now=now))
    log.event(EventKind.PROMOTE, payload=PromotePayload(fact_id=command.fact_id, now=now))
    for change in changes:
        if change.fact_id != command.fact_id:
            log.event(
                EventKind.SUPERSEDE,
                fact_id=change.fact_id,
                reason=change_reason(change, command.fact_id),
            )
    promoted = current_fact(session, command.fact_id)
    assert promoted is not None
    return PutResult(fact=to_fact(row_values(promoted)), written=True)


def _promotion_refusal(
    unit: Unit, key: SlotKey, row: FactRow, command: PromoteFact, now: datetime
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
            f"fact {row.fact_id} is {row.status}; only quarantined facts can be promoted",
            fact_id=row.fact_id,
        )
    if row.expires_at is not None and row.expires_at <= now:
        return NotQuarantined(
            f"fact {row.fact_id} expired at {format_utc(row.expires_at)}", fact_id=row.fact_id
        )
    claim = unit.session.get(ClaimRow, row.fact_id)
    assert claim is not None
    promoted = record_of(claim).model_copy(update={"trust": Trust.VERIFIED})
    return trust_refusal(load_slot(unit.session, key), promoted)


def apply_promotion(unit: Unit, payload: PromotePayload) -> list[Change]:
    """Make the claim verified and re-project its slot (also what replay applies)."""
    session = unit.session
    row = current_fact(session, payload.fact_id)
    if row is None:
        raise ValueError(f"promotion of unknown fact {payload.fact_id} in the decision log")
    key = SlotKey.of(row)
    lock_key(unit, key)
    session.execute(
        update(ClaimRow)
        .where(ClaimRow.claim_id == payload.fact_id)
        .values(quarantined=False, trust=Trust.VERIFIED.value)
        .execution_options(synchronize_session=False)
    )
    session.expire_all()
    return reproject(session, payload.now, load_slot(session, key))


class _PromotionLog:
    def __init__(self, unit: Unit, command: PromoteFact, row: FactRow, now: datetime) -> None:
        self.unit, self.command, self.row, self.now = unit, command, row, now

    def event(
        self,
        decision: EventKind,
        *,
        fact_id: str | None = None,
        reason: str | None = None,
        payload: PromotePayload | None = None,
    ) -> None:
        events.record(
            self.unit,
            decision,
            payload,
            occurred_at=self.now,
            actor=self.command.actor,
            tenant_id=self.row.tenant_id,
            subject=self.row.subject,
            fact_ids=[fact_id or self.row.fact_id],
            idempotency_key=self.command.idempotency_key,
            reason=reason,
        )
