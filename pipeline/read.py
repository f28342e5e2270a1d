"""The read path: what holds now, what held at a valid time, what we believed at a known time.

Every read filters by scope (tenant, agent, purpose) and subject first, and never returns a
forgotten, expired or (unless a reviewer asks) quarantined fact.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Select, or_, select

from pipeline.models import FactRow
from pipeline.projection import row_values, to_fact
from pipeline.store import Store
from pipeline.validation import parse
from schemas.facts import Fact, FactStatus
from schemas.fields import Identifier, UtcDatetime


class SubjectQuery(BaseModel):
    """Whose memory a read may see: one subject within one tenant, agent and purpose."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant_id: Identifier
    agent_id: Identifier = "default"
    purpose: Identifier = "default"
    subject: Identifier


class FactQuery(SubjectQuery):
    attribute: Identifier | None = None
    at: UtcDatetime | None = None
    known_at: UtcDatetime | None = None
    include_quarantined: bool = False


def get(store: Store, query: FactQuery | Mapping[str, Any]) -> list[Fact]:
    """The subject's facts holding at valid time `at` (default: now), as the ledger believed
    them at transaction time `known_at` (default: now), ordered by attribute."""
    query = parse(FactQuery, query)
    now = store.clock()
    at = query.at or now
    statement = (
        _visible(query, now)
        .where(FactRow.valid_from <= at, or_(FactRow.valid_to.is_(None), FactRow.valid_to > at))
        .order_by(FactRow.attribute, FactRow.valid_from, FactRow.value_hash)
    )
    return _facts(store, statement)


def history(
    store: Store, query: FactQuery | Mapping[str, Any], *, versions: bool = False
) -> list[Fact]:
    """Every interval of the belief at `known_at` (default: now) in valid-time order. With
    `versions`, every row version ever recorded instead: the full transaction-time audit."""
    query = parse(FactQuery, query)
    now = store.clock()
    if versions:
        statement = _scoped(query).order_by(
            FactRow.valid_from,
            FactRow.attribute,
            FactRow.value_hash,
            FactRow.recorded_at,
            FactRow.version,
        )
        if not query.include_quarantined:
            statement = statement.where(FactRow.status != FactStatus.QUARANTINED.value)
    else:
        statement = _visible(query, now).order_by(
            FactRow.valid_from, FactRow.attribute, FactRow.value_hash
        )
    return _facts(store, statement)


def _scoped(query: FactQuery) -> Select[FactRow]:
    statement = select(FactRow).where(
        FactRow.tenant_id == query.tenant_id,
        FactRow.agent_id == query.agent_id,
        FactRow.purpose == query.purpose,
        FactRow.subject == query.subject,
        FactRow.forgotten_at.is_(None),
    )
    if query.attribute is not None:
        statement = statement.where(FactRow.attribute == query.attribute)
    return statement


def _visible(query: FactQuery, now: datetime) -> Select[FactRow]:
    statuses = [FactStatus.ACTIVE.value]
    if query.include_quarantined:
        statuses.append(FactStatus.QUARANTINED.value)
    statement = _scoped(query).where(
        FactRow.status.in_(statuses),
        or_(FactRow.expires_at.is_(None), FactRow.expires_at > now),
    )
    if query.known_at is None:
        return statement.where(FactRow.superseded_at.is_(None))
    known = query.known_at
    return statement.where(
        FactRow.recorded_at <= known,
        or_(FactRow.superseded_at.is_(None), FactRow.superseded_at > known),
    )


def _facts(store: Store, statement: Select[FactRow]) -> list[Fact]:
    with store.transaction() as session:
        return [to_fact(row_values(row)) for row in session.scalars(statement)]
