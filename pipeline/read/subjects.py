"""The subjects a tenant holds facts about, for the review pages' Subjects list: by prefix,
a page at a time, read in SQL (never every subject to show twenty)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select

from pipeline.db.models import FactRow
from pipeline.db.store import Store
from pipeline.validation import parse
from schemas.facts import FactStatus
from schemas.fields import Identifier


class SubjectQuery(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    agent_id: Identifier | None = None
    purpose: Identifier | None = None
    prefix: str | None = Field(default=None, max_length=200, description="subjects starting so")
    limit: int = Field(default=20, ge=1, le=1000)
    offset: int = Field(default=0, ge=0, le=100_000)


class SubjectSummary(BaseModel):
    """A subject with the number of facts ever recorded about it (that a reader may see) and
    when the last was recorded."""

    model_config = ConfigDict(frozen=True)

    subject: str
    facts: int
    last_recorded_at: datetime


def list_subjects(store: Store, query: SubjectQuery | Mapping[str, Any]) -> list[SubjectSummary]:
    """In name order. Quarantined, dismissed and forgotten facts do not count (nor list a
    subject that has no other)."""
    query = parse(SubjectQuery, query)
    statement = select(
        FactRow.subject,
        func.count(func.distinct(FactRow.fact_id)),
        func.max(FactRow.recorded_at),
    ).where(
        FactRow.tenant_id == query.tenant_id,
        FactRow.status == FactStatus.ACTIVE.value,
        FactRow.forgotten_at.is_(None),
    )
    if query.agent_id is not None:
        statement = statement.where(FactRow.agent_id == query.agent_id)
    if query.purpose is not None:
        statement = statement.where(FactRow.purpose == query.purpose)
    if query.prefix:
        escaped = query.prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        statement = statement.where(FactRow.subject.like(escaped + "%", escape="\\"))
    statement = (
        statement.group_by(FactRow.subject)
        .order_by(FactRow.subject)
        .offset(query.offset)
        .limit(query.limit)
    )
    with store.reading() as connection:
        return [
            SubjectSummary(subject=subject, facts=count, last_recorded_at=last)
            for subject, count, last in connection.execute(statement)
        ]
