"""A quarantined fact can expire: its expired version is untrusted and must not count as
current belief, so the overlap guards and the one-open-row index skip untrusted rows.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

import re
from collections.abc import Sequence

from alembic import op

from pipeline.db import guards

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _without_trust(statement: str) -> str:
    """The guard as it was before this revision."""
    return re.sub(r"AND (NEW\.|f\.)?trust <> 'untrusted' ", "", statement)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in guards.drop_statements(dialect):
        op.execute(statement)
    for statement in guards.statements(dialect):
        op.execute(statement)
    op.execute(guards.ONE_OPEN)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in guards.drop_statements(dialect):
        op.execute(statement)
    for statement in [*guards.statements(dialect), guards.ONE_OPEN]:
        op.execute(_without_trust(statement))
