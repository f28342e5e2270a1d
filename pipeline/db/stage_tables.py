"""The pipeline's tables: the episodes it received, and the recurrence buffer.

- episodes:   every raw episode, committed before anything is queued (the row is the truth,
              a broker message only a wake-up), with its processing state.
- candidates: the recurrence buffer: one row per (scope, subject, attribute, value) that waits
              for support from more sessions or for a user's confirmation.
- candidate_support: the episodes that support a candidate, with their evidence.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    false,
)
from sqlalchemy import text as sql
from sqlalchemy.orm import Mapped, mapped_column

from pipeline.db.base import ID, TRUST_LEVELS, Base, JsonColumn, UtcDateTime, sql_list
from schemas.episodes import Lane, SourceKind
from schemas.lifecycle import UNFINISHED, CandidateStatus, EpisodeStatus

EPISODE_STATUSES = sql_list(EpisodeStatus)
CANDIDATE_STATUSES = sql_list(CandidateStatus)
OPEN_CANDIDATE = f"status = '{CandidateStatus.BUFFERED.value}' AND forgotten_at IS NULL"


class EpisodeRow(Base):
    __tablename__ = "episodes"

    tenant_id: Mapped[str] = mapped_column(ID, primary_key=True)
    episode_id: Mapped[str] = mapped_column(ID, primary_key=True)
    agent_id: Mapped[str] = mapped_column(ID)
    purpose: Mapped[str] = mapped_column(ID)
    subject: Mapped[str] = mapped_column(ID)
    subject_names: Mapped[list[str]] = mapped_column(JsonColumn())
    session_id: Mapped[str | None] = mapped_column(ID)
    source: Mapped[str] = mapped_column(String(16))
    occurred_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # The offset the episode was stated in: relative dates resolve on the speaker's calendar.
    utc_offset_s: Mapped[int] = mapped_column(Integer)
    text: Mapped[str | None] = mapped_column(Text)  # erased by purge
    text_hash: Mapped[str] = mapped_column(String(64))
    trust: Mapped[str | None] = mapped_column(String(16))  # the caller's override, if any
    idempotency_key: Mapped[str | None] = mapped_column(ID)
    # Who sent it (an API key's id); the decisions taken for it name this actor.
    actor: Mapped[str | None] = mapped_column(ID)
    meta: Mapped[dict[str, Any] | None] = mapped_column("metadata", JsonColumn())
    lane: Mapped[str] = mapped_column(String(16))
    # A hot-path statement the background lane took over (the model was slow or down): still
    # decided as the user's own statement, with the hot path's trust.
    deferred: Mapped[bool] = mapped_column(Boolean, server_default=false())
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)  # claims so far: the claim's fencing token
    # Of those, the claims that never finished: the worker crashed or its lease ran out. They
    # have a budget of their own (SGAM_EPISODE_MAX_ATTEMPTS), apart from attempts that failed.
    lost_attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    last_error: Mapped[str | None] = mapped_column(Text)
    # An EpisodeError: whether consolidation may re-drive a failed episode.
    error_kind: Mapped[str | None] = mapped_column(String(16))
    redrives: Mapped[int] = mapped_column(Integer)  # consolidation's re-drives so far
    redriven_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    extractor: Mapped[str | None] = mapped_column(String(80))
    prompt_version: Mapped[str | None] = mapped_column(String(64))
    usage: Mapped[dict[str, Any] | None] = mapped_column(JsonColumn())
    received_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # Its line in the intake that brought it: orders turns of one instant received together.
    input_seq: Mapped[int | None] = mapped_column(Integer)
    enqueued_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    lease_until: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # The forget tombstone: a search never shows what a forgotten subject said before it.
    forgotten_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    __table_args__ = (
        # A repeated idempotency key is a duplicate, like a repeated episode id.
        Index(
            "uq_episodes_idempotency_key",
            "tenant_id",
            "idempotency_key",
            unique=True,
            postgresql_where=sql("idempotency_key IS NOT NULL"),
            sqlite_where=sql("idempotency_key IS NOT NULL"),
        ),
        # The sweeper's and the workers' queue: what is not finished, oldest first.
        Index(
            "ix_episodes_unfinished",
            "status",
            "enqueued_at",
            postgresql_where=sql(f"status IN {sql_list(UNFINISHED)}"),
            sqlite_where=sql(f"status IN {sql_list(UNFINISHED)}"),
        ),
        Index(None, "tenant_id", "subject"),
        Index(None, "tenant_id", "session_id"),
        CheckConstraint(f"status IN {EPISODE_STATUSES}", name="status"),
        CheckConstraint(f"lane IN {sql_list(Lane)}", name="lane"),
        CheckConstraint(f"source IN {sql_list(SourceKind)}", name="source"),
        CheckConstraint(f"trust IS NULL OR trust IN {TRUST_LEVELS}", name="trust"),
    )


# The table itself, for Core statements (inserts that skip duplicates, bulk copies).
EPISODES = cast(Table, EpisodeRow.__table__)


class CandidateRow(Base):
    __tablename__ = "candidates"

    candidate_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ID)
    agent_id: Mapped[str] = mapped_column(ID)
    purpose: Mapped[str] = mapped_column(ID)
    subject: Mapped[str] = mapped_column(ID)
    attribute: Mapped[str] = mapped_column(ID)
    value: Mapped[Any | None] = mapped_column(JsonColumn())  # erased by purge
    value_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    support: Mapped[int] = mapped_column(Integer)  # distinct sessions
    first_seen_at: Mapped[datetime] = mapped_column(UtcDateTime)
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime)
    valid_from: Mapped[datetime] = mapped_column(UtcDateTime)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    fact_id: Mapped[str | None] = mapped_column(String(36))
    reason: Mapped[str | None] = mapped_column(Text)
    forgotten_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    __table_args__ = (
        # One open candidate per value: two workers can never buffer or promote it twice.
        Index(
            "uq_candidates_open_value",
            "tenant_id",
            "agent_id",
            "purpose",
            "subject",
            "attribute",
            "value_hash",
            unique=True,
            postgresql_where=sql(OPEN_CANDIDATE),
            sqlite_where=sql(OPEN_CANDIDATE),
        ),
        Index(None, "tenant_id", "subject", "attribute"),
        CheckConstraint(f"status IN {CANDIDATE_STATUSES}", name="status"),
        CheckConstraint("support >= 0", name="support"),
    )


class SupportRow(Base):
    __tablename__ = "candidate_support"

    candidate_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("candidates.candidate_id"), primary_key=True
    )
    episode_id: Mapped[str] = mapped_column(ID, primary_key=True)
    session_id: Mapped[str | None] = mapped_column(ID)
    occurred_at: Mapped[datetime] = mapped_column(UtcDateTime)
    valid_from: Mapped[datetime] = mapped_column(UtcDateTime)
    evidence: Mapped[str | None] = mapped_column(Text)  # erased by purge
