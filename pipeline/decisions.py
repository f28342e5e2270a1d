"""The append-only decision log: one event per decision, in the same transaction as its effect."""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pipeline import writes
from pipeline.models import EventRow
from pipeline.projection import Change
from pipeline.store import Store
from schemas.facts import FactStatus, format_utc
from schemas.fields import canonical_json


class Decision(StrEnum):
    WRITE = "write"
    SUPERSEDE = "supersede"
    RESTATE = "restate"
    REJECT = "reject"
    CONFLICT = "conflict"
    QUARANTINE = "quarantine"
    PROMOTE = "promote"
    EXPIRE = "expire"
    FORGET = "forget"
    PURGE = "purge"


def content_hash(payload: Any) -> str:
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def record(
    session: Session,
    decision: Decision,
    *,
    occurred_at: datetime,
    actor: str,
    tenant_id: str | None,
    subject: str | None = None,
    fact_ids: list[str] | None = None,
    command: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
    reason: str | None = None,
) -> None:
    """Append one decision. `command` is set on the event that replay re-applies."""
    payload = {"decision": decision.value, "fact_ids": fact_ids or [], "command": command}
    event = {
        "kind": decision.value,
        "tenant_id": tenant_id,
        "subject": subject,
        "actor": actor,
        "occurred_at": occurred_at,
        "idempotency_key": idempotency_key,
        "fact_ids": fact_ids or [],
        "command": command,
        "content_hash": content_hash(payload),
        "reason": reason,
    }
    writes.insert_rows(session, EventRow, [event])


def change_reason(change: Change, by: str) -> str:
    """Why a fact other than the one written got a new version."""
    if change.after["status"] == FactStatus.SUPERSEDED.value:
        return f"lost its interval to fact {by}"
    before = change.before or {}
    return (
        f"valid_to moved from {format_utc(before.get('valid_to')) or 'open'} "
        f"to {format_utc(change.after['valid_to']) or 'open'} by fact {by}"
    )


def decision_log(
    store: Store, *, tenant_id: str, subject: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """A tenant's decisions, oldest first, as JSON-ready dicts."""
    query = select(EventRow).where(EventRow.tenant_id == tenant_id)
    if subject is not None:
        query = query.where(EventRow.subject == subject)
    with store.transaction() as session:
        rows = session.scalars(query.order_by(EventRow.event_id).limit(limit)).all()
        return [
            {column.key: getattr(row, column.key) for column in EventRow.__table__.columns}
            | {"occurred_at": format_utc(row.occurred_at)}
            for row in rows
        ]
