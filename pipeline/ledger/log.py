"""Reading the decision log.

A forgotten subject's values leave every read: an event about it logged before its forget is
shown without its `command` (the payload holding values and evidence). The row itself keeps the
payload, so replay still rebuilds the ledger, until a purge erases it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pipeline.db.models import EventRow
from pipeline.db.store import Store
from pipeline.validation import parse
from schemas.fields import Identifier, UtcDatetime
from schemas.lifecycle import EventKind
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
    offset: int = Field(default=0, ge=0, le=100_000, description="rows skipped first (paging)")
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
        rows = unit.session.scalars(
            statement.order_by(order).offset(query.offset).limit(query.limit)
        ).all()
        forgotten = last_forget(unit.session, query.tenant_id, {row.subject for row in rows})
        return [hidden_if_forgotten(LoggedDecision.model_validate(row), forgotten) for row in rows]


def last_forget(session: Session, tenant_id: str, subjects: set[str | None]) -> dict[str, int]:
    """The event id of each subject's latest forget or purge, for those that have one."""
    named = [subject for subject in subjects if subject is not None]
    if not named:
        return {}
    found = session.execute(
        select(EventRow.subject, func.max(EventRow.event_id))
        .where(
            EventRow.tenant_id == tenant_id,
            EventRow.subject.in_(named),
            EventRow.kind.in_([EventKind.FORGET, EventKind.PURGE]),
        )
        .group_by(EventRow.subject)
    )
    return {str(subject): int(event_id) for subject, event_id in found}


def hidden_if_forgotten(shown: LoggedDecision, forgotten: Mapping[str, int]) -> LoggedDecision:
    """An event logged before its subject's forget, without the values its payload holds."""
    last = forgotten.get(shown.subject) if shown.subject is not None else None
    if last is None or shown.event_id >= last or shown.command is None:
        return shown
    return shown.model_copy(update={"command": None})
