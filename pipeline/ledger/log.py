"""Reading the decision log."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from pipeline.db.models import EventRow
from pipeline.db.store import Store
from schemas.fields import format_utc

EVENT_COLUMNS = [column.key for column in EventRow.__table__.columns]


def decision_log(
    store: Store, *, tenant_id: str, subject: str | None = None, limit: int = 100
) -> list[dict[str, Any]]:
    """A tenant's decisions, oldest first, as JSON-ready dicts."""
    query = select(EventRow).where(EventRow.tenant_id == tenant_id)
    if subject is not None:
        query = query.where(EventRow.subject == subject)
    with store.begin() as unit:
        rows = unit.session.scalars(query.order_by(EventRow.event_id).limit(limit)).all()
        return [
            {key: getattr(row, key) for key in EVENT_COLUMNS}
            | {"occurred_at": format_utc(row.occurred_at)}
            for row in rows
        ]
