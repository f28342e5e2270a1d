"""The initial ledger: claims, facts (row versions), the decision log and idempotency keys.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from pipeline.db import guards
from pipeline.db.models import UtcDateTime

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
CURRENT = sa.text("superseded_at IS NULL")


def upgrade() -> None:
    """Create the ledger, its claims, the decision log and the idempotency keys."""
    op.create_table(
        "claims",
        sa.Column("claim_id", sa.String(length=36), nullable=False),
        sa.Column("recorded_at", UtcDateTime(), nullable=False),
        sa.Column("quarantined", sa.Boolean(), nullable=False),
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("purpose", sa.String(length=200), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("attribute", sa.String(length=200), nullable=False),
        sa.Column("slot", sa.String(length=64), nullable=False),
        sa.Column("cardinality", sa.String(length=8), nullable=False),
        sa.Column("value", JSON, nullable=True),
        sa.Column("value_hash", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("schema_version", sa.String(length=64), nullable=False),
        sa.Column("valid_from", UtcDateTime(), nullable=False),
        sa.Column("valid_to", UtcDateTime(), nullable=True),
        sa.Column("source_episode_id", sa.String(length=200), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("trust", sa.String(length=16), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=True),
        sa.Column("forgotten_at", UtcDateTime(), nullable=True),
        sa.CheckConstraint(
            "trust IN ('untrusted', 'inferred', 'verified', 'user_confirmed')",
            name=op.f("ck_claims_trust"),
        ),
        sa.PrimaryKeyConstraint("claim_id", name=op.f("pk_claims")),
    )
    with op.batch_alter_table("claims", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_claims_tenant_id_agent_id_purpose_subject_attribute_slot"),
            ["tenant_id", "agent_id", "purpose", "subject", "attribute", "slot"],
            unique=False,
        )

    op.create_table(
        "events",
        sa.Column(
            "event_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("tenant_id", sa.String(length=200), nullable=True),
        sa.Column("subject", sa.String(length=200), nullable=True),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("occurred_at", UtcDateTime(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=200), nullable=True),
        sa.Column("fact_ids", JSON, nullable=False),
        sa.Column("command", JSON, nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_events")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_events_tenant_id_subject"), ["tenant_id", "subject"], unique=False
        )

    op.create_table(
        "facts",
        sa.Column(
            "row_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("fact_id", sa.String(length=36), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("recorded_at", UtcDateTime(), nullable=False),
        sa.Column("superseded_at", UtcDateTime(), nullable=True),
        sa.Column("supersedes_fact_id", sa.String(length=36), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("agent_id", sa.String(length=200), nullable=False),
        sa.Column("purpose", sa.String(length=200), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("attribute", sa.String(length=200), nullable=False),
        sa.Column("slot", sa.String(length=64), nullable=False),
        sa.Column("cardinality", sa.String(length=8), nullable=False),
        sa.Column("value", JSON, nullable=True),
        sa.Column("value_hash", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("schema_version", sa.String(length=64), nullable=False),
        sa.Column("valid_from", UtcDateTime(), nullable=False),
        sa.Column("valid_to", UtcDateTime(), nullable=True),
        sa.Column("source_episode_id", sa.String(length=200), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("trust", sa.String(length=16), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=True),
        sa.Column("forgotten_at", UtcDateTime(), nullable=True),
        sa.CheckConstraint("cardinality IN ('one', 'many')", name=op.f("ck_facts_cardinality")),
        sa.CheckConstraint(
            "status IN ('active', 'quarantined', 'superseded', 'expired')",
            name=op.f("ck_facts_status"),
        ),
        sa.CheckConstraint(
            "trust IN ('untrusted', 'inferred', 'verified', 'user_confirmed')",
            name=op.f("ck_facts_trust"),
        ),
        sa.CheckConstraint("confidence >= 0 AND confidence <= 1", name=op.f("ck_facts_confidence")),
        sa.CheckConstraint(
            "superseded_at IS NULL OR recorded_at <= superseded_at",
            name=op.f("ck_facts_recorded_interval"),
        ),
        sa.CheckConstraint(
            "valid_to IS NULL OR valid_from < valid_to", name=op.f("ck_facts_valid_interval")
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_facts_version")),
        sa.PrimaryKeyConstraint("row_id", name=op.f("pk_facts")),
        sa.UniqueConstraint("fact_id", "version", name=op.f("uq_facts_fact_id_version")),
    )
    with op.batch_alter_table("facts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_facts_current_key",
            ["tenant_id", "subject", "attribute", "agent_id", "purpose", "valid_from"],
            unique=False,
            postgresql_where=CURRENT,
            sqlite_where=CURRENT,
        )
        batch_op.create_index(
            batch_op.f("ix_facts_expires_at"),
            ["expires_at"],
            unique=False,
            postgresql_where=CURRENT,
            sqlite_where=CURRENT,
        )
        batch_op.create_index(
            batch_op.f("ix_facts_tenant_id_subject_attribute_recorded_at"),
            ["tenant_id", "subject", "attribute", "recorded_at"],
            unique=False,
        )
        batch_op.create_index(
            "uq_facts_current_version",
            ["fact_id"],
            unique=True,
            postgresql_where=CURRENT,
            sqlite_where=CURRENT,
        )

    op.create_table(
        "idempotency_keys",
        sa.Column("tenant_id", sa.String(length=200), nullable=False),
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=True),
        sa.Column("command_hash", sa.String(length=64), nullable=False),
        sa.Column("result", JSON, nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "key", name=op.f("pk_idempotency_keys")),
    )
    _guard_overlaps()


def _guard_overlaps() -> None:
    """Make the database itself refuse overlapping current-belief intervals in a slot."""
    for statement in guards.statements(op.get_bind().dialect.name):
        op.execute(statement)
    # At most one open-ended current row per slot, on both stores.
    op.execute(guards.ONE_OPEN)


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    op.drop_table("facts")
    op.drop_table("events")
    op.drop_table("claims")
