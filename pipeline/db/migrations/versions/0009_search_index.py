"""The search read's text index over facts and episodes (`pipeline/db/search_index.py`), and
the episodes' forget tombstone: a search never shows what a forgotten subject said before its
forget. Existing rows are indexed here: PostgreSQL fills the generated columns as it adds
them (a table rewrite), SQLite copies every row into its FTS5 tables.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from pipeline.db import search_index
from pipeline.db.base import UtcDateTime

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ADD COLUMN on both stores: SQLite's batch mode would copy the table.
    op.add_column("episodes", sa.Column("forgotten_at", UtcDateTime(), nullable=True))
    dialect = op.get_bind().dialect.name
    for statement in search_index.statements(dialect):
        op.execute(statement)
    if dialect == "sqlite":
        for statement in search_index.SQLITE_BACKFILL:
            op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        for table in ("facts", "episodes"):
            op.execute(f"ALTER TABLE {table} DROP COLUMN {search_index.SEARCH_VECTOR}")
    else:
        for trigger in search_index.SQLITE_TRIGGERS:
            op.execute(f"DROP TRIGGER {trigger}")
        for table in (
            search_index.FACTS_TERMS,
            search_index.EPISODES_TERMS,
            search_index.FACTS_FTS,
            search_index.EPISODES_FTS,
            search_index.EPISODE_KEYS,
        ):
            op.execute(f"DROP TABLE {table}")
    op.drop_column("episodes", "forgotten_at")
