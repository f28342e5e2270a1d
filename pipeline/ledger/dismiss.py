"""Dismissal: a reviewer's refusal of a quarantined fact. The fact and its claim are hidden for
good (tombstoned like a forgotten subject's, but one fact only), so no read returns it and it
can never be promoted; the decision log keeps who dismissed it and why, and replay re-applies
it (`pipeline/rebuild.py`)."""

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
from pipeline.ledger.results import PutResult, settled
from pipeline.ledger.versions import locked_fact, row_values, to_fact
from pipeline.validation import parse
from schemas.commands import DismissFact
from schemas.events import DismissPayload
from schemas.facts import FactStatus
from schemas.lifecycle import EventKind


def dismiss(store: Store, command: DismissFact | Mapping[str, Any]) -> PutResult:
    """`dismiss_fact` in a transaction of its own, raising its refusal."""
    command = parse(DismissFact, command)
    return settled(store, lambda unit: dismiss_fact(unit, command))


def dismiss_fact(unit: Unit, command: DismissFact | Mapping[str, Any]) -> PutResult | ConflictError:
    """Hide a quarantined fact for good. Returns the fact with status `dismissed`, or the
    refusal (NotQuarantined when it is not quarantined)."""
    command = parse(DismissFact, command)

    def apply() -> PutResult | ConflictError:
        return _dismiss(unit, command, now=unit.clock())

    return idempotency.put_step(command, dismissal=True).answer(unit, apply)


def _dismiss(unit: Unit, command: DismissFact, *, now: datetime) -> PutResult | ConflictError:
    _, row = locked_fact(unit, command.fact_id, command.tenant_id)
    shown = to_fact(row_values(row))
    problem: ConflictError | None = None
    if command.expected_version is not None and row.version != command.expected_version:
        problem = VersionConflict(
            f"expected_version {command.expected_version}, but fact {row.fact_id} is at "
            f"version {row.version}",
            expected=command.expected_version,
            actual=row.version,
        )
    elif row.status != FactStatus.QUARANTINED.value:
        problem = NotQuarantined(
            f"fact {row.fact_id} is {row.status}; only quarantined facts can be dismissed",
            fact_id=row.fact_id,
        )
    if problem is not None:
        _record(unit, command, row, now, EventKind.CONFLICT, None, str(problem))
        return problem
    payload = DismissPayload(fact_id=command.fact_id, now=now, reason=command.reason)
    apply_dismissal(unit, payload)
    _record(unit, command, row, now, EventKind.DISMISS, payload, command.reason)
    # The answer is the fact as the dismissal left it: no longer quarantined (never promoted,
    # never read), though its row keeps that status under the tombstone.
    dismissed = shown.model_copy(update={"status": FactStatus.DISMISSED})
    return PutResult(fact=dismissed, written=True)


def apply_dismissal(unit: Unit, payload: DismissPayload) -> None:
    """Tombstone the fact's rows and its claim (also what replay applies)."""
    for table, column in ((FactRow, FactRow.fact_id), (ClaimRow, ClaimRow.claim_id)):
        unit.session.execute(
            update(table)
            .where(column == payload.fact_id, table.forgotten_at.is_(None))
            .values(forgotten_at=payload.now)
            .execution_options(synchronize_session=False)
        )
    unit.session.expire_all()


def _record(
    unit: Unit,
    command: DismissFact,
    row: FactRow,
    now: datetime,
    kind: EventKind,
    payload: DismissPayload | None,
    reason: str | None,
) -> None:
    events.record(
        unit,
        kind,
        payload,
        occurred_at=now,
        actor=command.actor,
        tenant_id=row.tenant_id,
        subject=row.subject,
        fact_ids=[row.fact_id],
        idempotency_key=command.idempotency_key,
        reason=reason,
    )
