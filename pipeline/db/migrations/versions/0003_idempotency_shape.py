"""Idempotency keys remember the hash of their command without its content, so that a key
still refuses a different command after a purge erased the content hash.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch_op:
        batch_op.add_column(sa.Column("shape_hash", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("idempotency_keys") as batch_op:
        batch_op.drop_column("shape_hash")
