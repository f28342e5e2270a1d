"""Room for the pipeline's decision kinds (episodes, buffer decisions) in `events.kind`.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("events") as batch_op:
        batch_op.alter_column(
            "kind", existing_type=sa.String(length=16), type_=sa.String(length=40)
        )


def downgrade() -> None:
    with op.batch_alter_table("events") as batch_op:
        batch_op.alter_column(
            "kind", existing_type=sa.String(length=40), type_=sa.String(length=16)
        )
