"""The read path: what holds now, what held at a valid time, what we believed at a known time.

Every read filters by scope (tenant, agent, purpose) and subject first, and never returns a
forgotten, expired or (unless a reviewer asks) quarantined fact.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Select, bindparam, or_, select

from pipeline.catalog.names import unknown_attribute
from pipeline.db import driver_reads
from pipeline.db.models import FACT_COLUMNS, FactRow
from pipeline.db.store import Store
from pipeline.validation import parse
from schemas.facts import Fact, FactStatus, Trust
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
    return _facts(store, "get", query, now=now, at=query.at or now)


def history(
    store: Store, query: FactQuery | Mapping[str, Any], *, versions: bool = False
) -> list[Fact]:
    """Every interval of the belief at `known_at` (default: now) in valid-time order. With
    `versions`, every row version ever recorded instead: the full transaction-time audit."""
    query = parse(FactQuery, query)
    return _facts(store, "versions" if versions else "history", query, now=store.clock())


def _facts(store: Store, shape: str, query: FactQuery, **moments: datetime) -> list[Fact]:
    if query.attribute is not None and query.attribute not in store.catalog.attributes:
        _known_only_from_storage(store, query)
    statement = _statement(
        shape, query.attribute is not None, query.known_at is not None, query.include_quarantined
    )
    params = (
        query.model_dump(
            include={"tenant_id", "agent_id", "purpose", "subject", "attribute", "known_at"}
        )
        | moments
    )
    with store.reading() as connection:
        if store.is_postgres:  # by the driver itself: a third of a get's CPU was SQLAlchemy's
            return [
                Fact.model_validate(r) for r in driver_reads.rows(connection, statement, params)
            ]
        return [Fact.model_validate(row._mapping) for row in connection.execute(statement, params)]


@cache
def _statement(shape: str, by_attribute: bool, known: bool, quarantined: bool) -> Select[Any]:
    """One statement per shape of query, built once (building costs more than running it)."""
    conditions = visible(shape, known, quarantined)
    if by_attribute:
        conditions.append(FactRow.attribute == bindparam("attribute"))
    order: list[Any] = [FactRow.valid_from, FactRow.attribute, FactRow.value_hash]
    if shape == "versions":
        order += [FactRow.recorded_at, FactRow.version]
    if shape == "get":
        order = [FactRow.attribute, FactRow.valid_from, FactRow.value_hash]
    columns = [getattr(FactRow, name) for name in FACT_COLUMNS]
    return select(*columns).where(*conditions).order_by(*order)


def visible(shape: str, known: bool, quarantined: bool) -> list[Any]:
    """The rows a read of `shape` may return, as conditions on bound parameters (tenant_id,
    agent_id, purpose, subject, now, at, known_at): the search read filters by exactly these."""
    conditions: list[Any] = [
        FactRow.tenant_id == bindparam("tenant_id"),
        FactRow.agent_id == bindparam("agent_id"),
        FactRow.purpose == bindparam("purpose"),
        FactRow.subject == bindparam("subject"),
        FactRow.forgotten_at.is_(None),
    ]
    statuses = [FactStatus.ACTIVE.value] + ([FactStatus.QUARANTINED.value] if quarantined else [])
    if shape == "versions":
        conditions.append(
            FactRow.status.in_([*statuses, FactStatus.SUPERSEDED.value, FactStatus.EXPIRED.value])
        )
        if not quarantined:  # nor a quarantined fact's later versions (expired unreviewed)
            conditions.append(FactRow.trust != Trust.UNTRUSTED.value)
        return conditions
    conditions += [
        FactRow.status.in_(statuses),
        or_(FactRow.expires_at.is_(None), FactRow.expires_at > bindparam("now")),
    ]
    if known:
        conditions += [
            FactRow.recorded_at <= bindparam("known_at"),
            or_(FactRow.superseded_at.is_(None), FactRow.superseded_at > bindparam("known_at")),
        ]
    else:
        conditions.append(FactRow.superseded_at.is_(None))
    if shape == "get":
        conditions += [
            FactRow.valid_from <= bindparam("at"),
            or_(FactRow.valid_to.is_(None), FactRow.valid_to > bindparam("at")),
        ]
    return conditions


def _known_only_from_storage(store: Store, query: FactQuery) -> None:
    """An attribute the catalogue no longer declares stays readable while facts hold it;
    anything else is a typo, answered with the close matches rather than an empty result."""
    stored = (
        select(FactRow.row_id)
        .where(
            FactRow.tenant_id == query.tenant_id,
            FactRow.subject == query.subject,
            FactRow.attribute == query.attribute,
            FactRow.forgotten_at.is_(None),
        )
        .limit(1)
    )
    with store.reading() as connection:
        if connection.execute(stored).first() is None:
            raise unknown_attribute(store.catalog, query.attribute or "")
