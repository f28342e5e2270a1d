"""The HTTP service: API keys (only their hashes), and the actor that sent each episode.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pipeline.db.base import UtcDateTime

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ID = sa.String(length=200)


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", ID, nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("agent_id", ID, nullable=True),
        sa.Column("purpose", ID, nullable=True),
        sa.Column("name", ID, nullable=True),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("expires_at", UtcDateTime(), nullable=True),
        sa.Column("revoked_at", UtcDateTime(), nullable=True),
        sa.CheckConstraint(
            "role IN ('reader', 'writer', 'reviewer', 'admin')", name=op.f("ck_api_keys_role")
        ),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_api_keys")),
    )
    with op.batch_alter_table("api_keys") as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_tenant_id"), ["tenant_id"])
    with op.batch_alter_table("episodes") as batch_op:
        batch_op.add_column(sa.Column("actor", ID, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("episodes") as batch_op:
        batch_op.drop_column("actor")
    op.drop_table("api_keys")
