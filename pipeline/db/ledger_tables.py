"""The ledger's tables. Postgres is the production store; SQLite runs the same code embedded.

- claims:   every accepted statement (the provenance of facts); the ledger is projected from them.
- facts:    the bi-temporal ledger. One row per *version* of a fact: closing an interval or
            changing a status closes the old version (superseded_at) and inserts a new one.
- events:   the append-only decision log; replaying its commands rebuilds claims and facts.
- idempotency_keys: the first result of every keyed command.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Float,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    event,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from pipeline.db import guards
from pipeline.db.base import ID, TRUST_LEVELS, Base, JsonColumn, UtcDateTime, sql_list
from schemas.facts import STORED_FACT_STATUSES, Cardinality

FACT_STATUSES = sql_list(STORED_FACT_STATUSES)


class ScopedKey:
    """The scope and key columns shared by claims and facts."""

    tenant_id: Mapped[str] = mapped_column(ID)
    agent_id: Mapped[str] = mapped_column(ID)
    purpose: Mapped[str] = mapped_column(ID)
    subject: Mapped[str] = mapped_column(ID)
    attribute: Mapped[str] = mapped_column(ID)
    # '' for a single-valued attribute, the value hash for a multi-valued one: the unit
    # within which intervals must not overlap.
    slot: Mapped[str] = mapped_column(String(64))
    cardinality: Mapped[str] = mapped_column(String(8))


class Content:
    """What a fact says and who said it. Purge erases value, evidence and source text."""

    value: Mapped[Any | None] = mapped_column(JsonColumn())
    value_hash: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(64))
    schema_version: Mapped[str] = mapped_column(String(64))
    valid_from: Mapped[datetime] = mapped_column(UtcDateTime)
    valid_to: Mapped[datetime | None] = mapped_column(UtcDateTime)
    source_episode_id: Mapped[str] = mapped_column(ID)
    evidence: Mapped[str | None] = mapped_column(Text)
    confidence: Mapped[float] = mapped_column(Float)
    trust: Mapped[str] = mapped_column(String(16))
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    forgotten_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class ClaimRow(ScopedKey, Content, Base):
    __tablename__ = "claims"

    claim_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime)
    quarantined: Mapped[bool] = mapped_column(default=False)

    __table_args__ = (
        Index(None, "tenant_id", "agent_id", "purpose", "subject", "attribute", "slot"),
        CheckConstraint(f"trust IN {TRUST_LEVELS}", name="trust"),
    )


class FactRow(ScopedKey, Content, Base):
    __tablename__ = "facts"

    row_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    fact_id: Mapped[str] = mapped_column(String(36))
    version: Mapped[int] = mapped_column(Integer)
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime)
    superseded_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    supersedes_fact_id: Mapped[str | None] = mapped_column(String(36))
    status: Mapped[str] = mapped_column(String(16))

    __table_args__ = (
        UniqueConstraint("fact_id", "version"),
        # One current version per fact.
        Index(
            "uq_facts_current_version",
            "fact_id",
            unique=True,
            postgresql_where=text("superseded_at IS NULL"),
            sqlite_where=text("superseded_at IS NULL"),
        ),
        # Current-state and point-in-time reads: key, then valid time.
        Index(
            "ix_facts_current_key",
            "tenant_id",
            "subject",
            "attribute",
            "agent_id",
            "purpose",
            "valid_from",
            postgresql_where=text("superseded_at IS NULL"),
            sqlite_where=text("superseded_at IS NULL"),
        ),
        # Transaction-time reads ("what did we believe at K") and history.
        Index(None, "tenant_id", "subject", "attribute", "recorded_at"),
        Index(
            None,
            "expires_at",
            postgresql_where=text("superseded_at IS NULL"),
            sqlite_where=text("superseded_at IS NULL"),
        ),
        # At most one open-ended current row per slot, on both stores.
        Index(
            "uq_facts_one_open",
            *guards.SLOT_COLUMNS,
            unique=True,
            postgresql_where=text(f"valid_to IS NULL AND {guards.HOLDING}"),
            sqlite_where=text(f"valid_to IS NULL AND {guards.HOLDING}"),
        ),
        CheckConstraint("valid_to IS NULL OR valid_from < valid_to", name="valid_interval"),
        CheckConstraint(
            "superseded_at IS NULL OR recorded_at <= superseded_at", name="recorded_interval"
        ),
        CheckConstraint(f"trust IN {TRUST_LEVELS}", name="trust"),
        CheckConstraint(f"status IN {FACT_STATUSES}", name="status"),
        CheckConstraint("confidence >= 0 AND confidence <= 1", name="confidence"),
        CheckConstraint(f"cardinality IN {sql_list(Cardinality)}", name="cardinality"),
        CheckConstraint("version >= 1", name="version"),
    )


# The columns of a fact version as reads return them: everything but the storage row id.
FACT_COLUMNS = [column.key for column in FactRow.__table__.columns if column.key != "row_id"]


class EventRow(Base):
    __tablename__ = "events"

    event_id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    kind: Mapped[str] = mapped_column(String(40))
    tenant_id: Mapped[str | None] = mapped_column(ID)
    subject: Mapped[str | None] = mapped_column(ID)
    actor: Mapped[str] = mapped_column(ID)
    occurred_at: Mapped[datetime] = mapped_column(UtcDateTime)
    idempotency_key: Mapped[str | None] = mapped_column(ID)
    fact_ids: Mapped[list[str]] = mapped_column(JsonColumn())
    # The command that caused this decision, with the ids and clock it was applied with.
    # Only the first event of a command carries it; replay re-applies exactly these.
    command: Mapped[dict[str, Any] | None] = mapped_column(JsonColumn())
    content_hash: Mapped[str] = mapped_column(String(64))
    reason: Mapped[str | None] = mapped_column(Text)
    # The episode a pipeline decision was taken for, and the prompt that extracted it.
    episode_id: Mapped[str | None] = mapped_column(ID)
    prompt_version: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (Index(None, "tenant_id", "subject"), Index(None, "tenant_id", "episode_id"))


class IdempotencyRow(Base):
    __tablename__ = "idempotency_keys"

    tenant_id: Mapped[str] = mapped_column(ID, primary_key=True)
    key: Mapped[str] = mapped_column(ID, primary_key=True)
    subject: Mapped[str | None] = mapped_column(ID)
    command_hash: Mapped[str] = mapped_column(String(64))
    # The command's hash without its content (value, evidence): what is left to compare a
    # repeated key against once a purge has replaced command_hash.
    shape_hash: Mapped[str | None] = mapped_column(String(64))
    result: Mapped[Any] = mapped_column(JsonColumn())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)


def _create_guards(target: Any, connection: Any, **_: Any) -> None:
    for statement in guards.statements(connection.dialect.name):
        connection.exec_driver_sql(statement)


# `create_all` builds the guards too; migrations create them explicitly (see `guards`).
event.listen(FactRow.__table__, "after_create", _create_guards)
