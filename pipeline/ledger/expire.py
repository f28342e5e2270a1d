"""Expiry: explicit `expired` versions and events for facts whose retention has passed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import select

from pipeline.db.models import ClaimRow, FactRow
from pipeline.db.store import Store
from pipeline.db.unit import Unit
from pipeline.errors import InvalidInput
from pipeline.ledger import events
from pipeline.ledger.slots import SLOT_FIELDS, SlotKey, in_slot, lock_key
from pipeline.ledger.versions import Change, new_version, row_values, write_versions
from pipeline.validation import parse
from schemas.commands import ExpireFacts
from schemas.events import ExpirePayload, SlotRef
from schemas.facts import FactStatus
from schemas.fields import format_utc
from schemas.lifecycle import EventKind


@dataclass(frozen=True)
class ExpireResult:
    expired_fact_ids: list[str]


def expire(store: Store, command: ExpireFacts | Mapping[str, Any]) -> ExpireResult:
    """Give every active or quarantined fact whose retention has passed at `now` an explicit
    expired version
    and an `expire` event, one key per transaction so a large run never holds many locks."""
    command = parse(ExpireFacts, command)
    clock = store.clock()
    if command.now is not None and command.now > clock and not command.force:
        raise InvalidInput(
            "now",
            f"is after the current time ({format_utc(clock)}): facts whose retention has not "
            "passed would expire for good; pass force=True (--force) to do that on purpose",
        )
    now = command.now or clock
    with store.begin() as unit:
        keys = due_keys(unit, now, command.tenant_id)
    expired: list[str] = []
    for key in keys:
        expired += store.run(partial(expire_key, key=key, now=now, actor=command.actor))
    return ExpireResult(expired)


def due_keys(unit: Unit, now: datetime, tenant_id: str | None = None) -> list[SlotKey]:
    """The slots holding at least one fact whose retention has passed at `now`."""
    due = select(*(getattr(FactRow, name) for name in SLOT_FIELDS)).where(*_due(now)).distinct()
    if tenant_id is not None:
        due = due.where(FactRow.tenant_id == tenant_id)
    return [SlotKey(*row) for row in unit.session.execute(due)]


def _due(now: datetime) -> list[Any]:
    return [
        FactRow.superseded_at.is_(None),
        FactRow.forgotten_at.is_(None),
        # Retention applies to every fact, reviewed or not.
        FactRow.status.in_([FactStatus.ACTIVE.value, FactStatus.QUARANTINED.value]),
        FactRow.expires_at <= now,
    ]


def expire_key(unit: Unit, key: SlotKey, now: datetime, actor: str) -> list[str]:
    """Expire the due facts of one slot in the caller's unit of work; returns their ids."""
    payload = ExpirePayload(key=SlotRef(**asdict(key)), now=now)
    fact_ids = apply_expiry(unit, payload)
    if fact_ids:
        events.record(
            unit,
            EventKind.EXPIRE,
            payload,
            occurred_at=now,
            actor=actor,
            tenant_id=key.tenant_id,
            subject=key.subject,
            fact_ids=fact_ids,
            reason="retention passed",
        )
    return fact_ids


def apply_expiry(unit: Unit, payload: ExpirePayload) -> list[str]:
    """Write an expired version of every due fact of the slot (also what replay applies)."""
    key = SlotKey(**payload.key.model_dump())
    lock_key(unit, key)
    session = unit.session
    due = select(FactRow).where(*in_slot(FactRow), *_due(payload.now))
    rows = session.scalars(due, asdict(key)).all()
    # Transaction time never runs back.
    stamp = max([payload.now, *(row.recorded_at for row in rows)])
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
