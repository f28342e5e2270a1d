"""Reading the decision log."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from pipeline.db.models import EventRow
from pipeline.db.store import Store
from pipeline.validation import parse
from schemas.fields import Identifier, UtcDatetime
from schemas.results import LoggedDecision

EVENT_COLUMNS = [column.key for column in EventRow.__table__.columns]


class LogQuery(BaseModel):
    """A tenant's decisions, newest first unless `oldest_first`, within [since, until)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    subject: Identifier | None = None
    since: UtcDatetime | None = None
    until: UtcDatetime | None = None
    limit: int = Field(default=100, ge=1, le=100_000)
    oldest_first: bool = False


def decision_log(store: Store, query: LogQuery | Mapping[str, Any]) -> list[LoggedDecision]:
    """The matching decisions, oldest or newest first."""
    query = parse(LogQuery, query)
    statement = select(EventRow).where(EventRow.tenant_id == query.tenant_id)
    if query.subject is not None:
        statement = statement.where(EventRow.subject == query.subject)
    if query.since is not None:
        statement = statement.where(EventRow.occurred_at >= query.since)
    if query.until is not None:
        statement = statement.where(EventRow.occurred_at < query.until)
    order = EventRow.event_id if query.oldest_first else EventRow.event_id.desc()
    with store.begin() as unit:
        rows = unit.session.scalars(statement.order_by(order).limit(query.limit)).all()
        return [LoggedDecision.model_validate(row) for row in rows]
