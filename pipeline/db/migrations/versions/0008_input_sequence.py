"""The position of each episode in the intake that brought it (its line), so that turns of a
conversation stated at the same instant — a bulk import often gives every turn of a session
one timestamp — still have an order, and a model sees the ones before.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("episodes") as batch_op:
        batch_op.add_column(sa.Column("input_seq", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("episodes") as batch_op:
        batch_op.drop_column("input_seq")
