"""The pipeline: episodes (the intake and its processing state), the recurrence buffer
(candidates and the episodes that support them), and the episode and prompt version of each
decision in the log.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pipeline.db.base import JsonColumn, UtcDateTime

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(length=200)
TRUST_LEVELS = "('untrusted', 'inferred', 'verified', 'user_confirmed')"


def upgrade() -> None:
    """Create episodes, candidates and candidate_support; events learn episode and prompt."""
    op.create_table(
        "episodes",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("purpose", ID, nullable=False),
        sa.Column("subject", ID, nullable=False),
        sa.Column("subject_names", JsonColumn(), nullable=False),
        sa.Column("session_id", ID, nullable=True),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("occurred_at", UtcDateTime(), nullable=False),
        sa.Column("utc_offset_s", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("text_hash", sa.String(length=64), nullable=False),
        sa.Column("trust", sa.String(length=16), nullable=True),
        sa.Column("idempotency_key", ID, nullable=True),
        sa.Column("metadata", JsonColumn(), nullable=True),
        sa.Column("lane", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("error_kind", sa.String(length=16), nullable=True),
        sa.Column("redrives", sa.Integer(), nullable=False),
        sa.Column("redriven_at", UtcDateTime(), nullable=True),
        sa.Column("extractor", sa.String(length=80), nullable=True),
        sa.Column("prompt_version", sa.String(length=64), nullable=True),
        sa.Column("usage", JsonColumn(), nullable=True),
        sa.Column("received_at", UtcDateTime(), nullable=False),
        sa.Column("enqueued_at", UtcDateTime(), nullable=True),
        sa.Column("started_at", UtcDateTime(), nullable=True),
        sa.Column("finished_at", UtcDateTime(), nullable=True),
        sa.Column("lease_until", UtcDateTime(), nullable=True),
        sa.CheckConstraint("lane IN ('background', 'hot')", name=op.f("ck_episodes_lane")),
        sa.CheckConstraint(
            "source IN ('message', 'tool_result', 'business_event')",
            name=op.f("ck_episodes_source"),
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'processing', 'done', 'failed')",
            name=op.f("ck_episodes_status"),
        ),
        sa.CheckConstraint(
            f"trust IS NULL OR trust IN {TRUST_LEVELS}", name=op.f("ck_episodes_trust")
        ),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", name=op.f("pk_episodes")),
    )
    with op.batch_alter_table("episodes") as batch_op:
        batch_op.create_index(
            batch_op.f("ix_episodes_tenant_id_session_id"), ["tenant_id", "session_id"]
        )
        batch_op.create_index(batch_op.f("ix_episodes_tenant_id_subject"), ["tenant_id", "subject"])
        unfinished = sa.text("status IN ('pending', 'processing')")
        batch_op.create_index(
            "ix_episodes_unfinished",
            ["status", "enqueued_at"],
            postgresql_where=unfinished,
            sqlite_where=unfinished,
        )
        keyed = sa.text("idempotency_key IS NOT NULL")
        batch_op.create_index(
            "uq_episodes_idempotency_key",
            ["tenant_id", "idempotency_key"],
            unique=True,
            postgresql_where=keyed,
            sqlite_where=keyed,
        )

    op.create_table(
        "candidates",
        sa.Column("candidate_id", sa.String(length=36), nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("agent_id", ID, nullable=False),
        sa.Column("purpose", ID, nullable=False),
        sa.Column("subject", ID, nullable=False),
        sa.Column("attribute", ID, nullable=False),
        sa.Column("value", JsonColumn(), nullable=True),
        sa.Column("value_hash", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("support", sa.Integer(), nullable=False),
        sa.Column("first_seen_at", UtcDateTime(), nullable=False),
        sa.Column("last_seen_at", UtcDateTime(), nullable=False),
        sa.Column("valid_from", UtcDateTime(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("decided_at", UtcDateTime(), nullable=True),
        sa.Column("fact_id", sa.String(length=36), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("forgotten_at", UtcDateTime(), nullable=True),
        sa.CheckConstraint(
            "status IN ('buffered', 'promoted', 'confirmed', 'rejected', 'expired', 'reset')",
            name=op.f("ck_candidates_status"),
        ),
        sa.CheckConstraint("support >= 0", name=op.f("ck_candidates_support")),
        sa.PrimaryKeyConstraint("candidate_id", name=op.f("pk_candidates")),
    )
    with op.batch_alter_table("candidates") as batch_op:
        batch_op.create_index(
            batch_op.f("ix_candidates_tenant_id_subject_attribute"),
            ["tenant_id", "subject", "attribute"],
        )
        open_value = sa.text("status = 'buffered' AND forgotten_at IS NULL")
        batch_op.create_index(
            "uq_candidates_open_value",
            ["tenant_id", "agent_id", "purpose", "subject", "attribute", "value_hash"],
            unique=True,
            postgresql_where=open_value,
            sqlite_where=open_value,
        )

    op.create_table(
        "candidate_support",
        sa.Column("candidate_id", sa.String(length=36), nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("session_id", ID, nullable=True),
        sa.Column("occurred_at", UtcDateTime(), nullable=False),
        sa.Column("valid_from", UtcDateTime(), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["candidate_id"],
            ["candidates.candidate_id"],
            name=op.f("fk_candidate_support_candidate_id_candidates"),
        ),
        sa.PrimaryKeyConstraint("candidate_id", "episode_id", name=op.f("pk_candidate_support")),
    )

    with op.batch_alter_table("events") as batch_op:
        batch_op.add_column(sa.Column("episode_id", ID, nullable=True))
        batch_op.add_column(sa.Column("prompt_version", sa.String(length=64), nullable=True))
        batch_op.create_index(
            batch_op.f("ix_events_tenant_id_episode_id"), ["tenant_id", "episode_id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("events") as batch_op:
        batch_op.drop_index(batch_op.f("ix_events_tenant_id_episode_id"))
        batch_op.drop_column("prompt_version")
        batch_op.drop_column("episode_id")
    op.drop_table("candidate_support")
    op.drop_table("candidates")
    op.drop_table("episodes")
