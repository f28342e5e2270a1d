"""What waits for a reviewer: quarantined facts (untrusted sources, sensitive attributes) that
no read returns until `promote` releases them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import or_, select

from pipeline.db.models import FACT_COLUMNS, FactRow
from pipeline.db.store import Store
from pipeline.validation import parse
from schemas.facts import Fact, FactStatus
from schemas.fields import Identifier


class QuarantineQuery(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    agent_id: Identifier | None = None
    purpose: Identifier | None = None
    subject: Identifier | None = None
    limit: int = Field(default=1000, ge=1, le=100_000)
    offset: int = Field(default=0, ge=0, le=100_000, description="rows skipped first (paging)")


def list_quarantined(store: Store, query: QuarantineQuery | Mapping[str, Any]) -> list[Fact]:
    """The tenant's quarantined facts, oldest first; none forgotten or past its retention."""
    query = parse(QuarantineQuery, query)
    conditions: list[Any] = [
        FactRow.tenant_id == query.tenant_id,
        FactRow.status == FactStatus.QUARANTINED.value,
        FactRow.superseded_at.is_(None),
        FactRow.forgotten_at.is_(None),
        or_(FactRow.expires_at.is_(None), FactRow.expires_at > store.clock()),
    ]
    for column, wanted in (
        (FactRow.agent_id, query.agent_id),
        (FactRow.purpose, query.purpose),
        (FactRow.subject, query.subject),
    ):
        if wanted is not None:
            conditions.append(column == wanted)
    columns = [getattr(FactRow, name) for name in FACT_COLUMNS]
    statement = (
        select(*columns)
        .where(*conditions)
        .order_by(FactRow.recorded_at, FactRow.fact_id)
        .offset(query.offset)
        .limit(query.limit)
    )
    with store.reading() as connection:
        return [Fact.model_validate(row._mapping) for row in connection.execute(statement)]
