"""The search read's optional embedding arm (`pipeline/db/vector_tables.py`): a vector per
fact version and per episode, and the spend of the embedding endpoint. Nothing to backfill:
`sgam embed` (or the nightly consolidation) fills the vectors once SGAM_EMBEDDING_MODEL is set.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pipeline.db.base import UtcDateTime

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(length=200)
KEY = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "fact_vectors",
        sa.Column("row_id", KEY, autoincrement=False, nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("subject", ID, nullable=False),
        sa.Column("model", ID, nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("embedded_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("row_id", name=op.f("pk_fact_vectors")),
    )
    op.create_index(
        op.f("ix_fact_vectors_tenant_id_subject"), "fact_vectors", ["tenant_id", "subject"]
    )
    op.create_table(
        "episode_vectors",
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("episode_id", ID, nullable=False),
        sa.Column("subject", ID, nullable=False),
        sa.Column("model", ID, nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("embedded_at", UtcDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "episode_id", name=op.f("pk_episode_vectors")),
    )
    op.create_index(
        op.f("ix_episode_vectors_tenant_id_subject"), "episode_vectors", ["tenant_id", "subject"]
    )
    op.create_table(
        "embedding_spend",
        sa.Column("spend_id", KEY, autoincrement=True, nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("model", ID, nullable=False),
        sa.Column("at", UtcDateTime(), nullable=False),
        sa.Column("use", sa.String(length=8), nullable=False),
        sa.Column("texts", sa.Integer(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("spend_id", name=op.f("pk_embedding_spend")),
    )
    op.create_index(op.f("ix_embedding_spend_tenant_id_at"), "embedding_spend", ["tenant_id", "at"])


def downgrade() -> None:
    op.drop_table("embedding_spend")
    op.drop_table("episode_vectors")
    op.drop_table("fact_vectors")
