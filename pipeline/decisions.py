"""The append-only decision log: one event per decision, in the same transaction as its effect."""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy.orm import Session

from pipeline.models import EventRow
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
    session.add(
        EventRow(
            kind=decision.value,
            tenant_id=tenant_id,
            subject=subject,
            actor=actor,
            occurred_at=occurred_at,
            idempotency_key=idempotency_key,
            fact_ids=fact_ids or [],
            command=command,
            content_hash=content_hash(payload),
            reason=reason,
        )
    )
