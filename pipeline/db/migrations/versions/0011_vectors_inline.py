"""The embedding arm's vectors stored in their rows on PostgreSQL, not in TOAST.

A 768-dimension vector is 3 KB of float32, past PostgreSQL's 2 KB threshold, so by default each
went out of line: a search read a scope's 600 vectors as 600 TOAST fetches (6.3 ms median for
the statement, 4.6 inline; bench/README.md, "`bench/search_latency.py`"). MAIN keeps a value in
its row while the row fits a page (about 8 KB: some 2,000 dimensions) and moves it out only
when it must. Existing vectors are stored again so that they move in too. SQLite keeps rows of
this size in its page already: nothing to do there.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("fact_vectors", "episode_vectors")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN vector SET STORAGE MAIN")
        # a value is stored by the policy in force when it is written: write each again
        op.execute(f"UPDATE {table} SET vector = vector || ''::bytea")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN vector SET STORAGE EXTENDED")
