"""Attempts lost to a crash or an expired lease, counted apart from attempts that failed; and
the mark of a hot-path statement the background lane took over.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("episodes") as batch_op:
        batch_op.add_column(
            sa.Column("lost_attempts", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(
            sa.Column("deferred", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("episodes") as batch_op:
        batch_op.drop_column("deferred")
        batch_op.drop_column("lost_attempts")
