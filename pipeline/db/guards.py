"""The invariants the database itself enforces beyond columns and indexes, described once.

The model attaches them to the `facts` table (so `create_all` builds them) and the initial
migration creates them; Alembic's autogenerate neither reflects nor drops them, and a test
compares a migrated database with these definitions.

- PostgreSQL: an exclusion constraint refuses two overlapping current-belief intervals in one
  slot (`btree_gist`).
- SQLite has no exclusion constraints: BEFORE INSERT/UPDATE triggers refuse the same rows.
"""

from __future__ import annotations

from pipeline.db.base import sql_list
from schemas.facts import FactStatus, Trust

# The rows that make up the current belief: no two may overlap within one slot. An untrusted
# row never does: it is quarantined, or expired while still quarantined.
HOLDING_STATUSES = sql_list((FactStatus.ACTIVE, FactStatus.EXPIRED))
NOT_UNTRUSTED = f"trust <> '{Trust.UNTRUSTED.value}'"
HOLDING = (
    f"superseded_at IS NULL AND status IN {HOLDING_STATUSES} AND {NOT_UNTRUSTED} "
    "AND forgotten_at IS NULL"
)
SLOT_COLUMNS = ("tenant_id", "agent_id", "purpose", "subject", "attribute", "slot")

POSTGRES_EXTENSION = "CREATE EXTENSION IF NOT EXISTS btree_gist"
EXCLUSION_NAME = "ex_facts_no_overlap"
POSTGRES_EXCLUSION = (
    f"ALTER TABLE facts ADD CONSTRAINT {EXCLUSION_NAME} EXCLUDE USING gist ("
    + ", ".join(f"{column} WITH =" for column in SLOT_COLUMNS)
    + f", tstzrange(valid_from, valid_to, '[)') WITH &&) WHERE ({HOLDING})"
)


def _sqlite_trigger(event: str) -> str:
    other = "AND f.row_id <> NEW.row_id " if event == "UPDATE" else ""
    same_slot = " ".join(f"AND f.{column} = NEW.{column}" for column in SLOT_COLUMNS)
    return (
        f"CREATE TRIGGER facts_no_overlap_{event.lower()} BEFORE {event} ON facts "
        f"WHEN NEW.superseded_at IS NULL AND NEW.status IN {HOLDING_STATUSES} "
        f"AND NEW.{NOT_UNTRUSTED} AND NEW.forgotten_at IS NULL "
        "BEGIN SELECT RAISE(ABORT, 'overlapping current-belief interval') "
        "WHERE EXISTS (SELECT 1 FROM facts f WHERE f.superseded_at IS NULL "
        f"AND f.status IN {HOLDING_STATUSES} AND f.{NOT_UNTRUSTED} "
        "AND f.forgotten_at IS NULL "
        f"{other}{same_slot} "
        "AND (f.valid_to IS NULL OR f.valid_to > NEW.valid_from) "
        "AND (NEW.valid_to IS NULL OR NEW.valid_to > f.valid_from)); END"
    )


SQLITE_TRIGGERS = {
    "facts_no_overlap_insert": _sqlite_trigger("INSERT"),
    "facts_no_overlap_update": _sqlite_trigger("UPDATE"),
}


ONE_OPEN_INDEX = "uq_facts_one_open"
ONE_OPEN = (
    f"CREATE UNIQUE INDEX {ONE_OPEN_INDEX} ON facts ({', '.join(SLOT_COLUMNS)}) "
    f"WHERE valid_to IS NULL AND {HOLDING}"
)


def statements(dialect: str) -> list[str]:
    """The DDL that creates the guards on a `facts` table of `dialect`."""
    if dialect == "postgresql":
        return [POSTGRES_EXTENSION, POSTGRES_EXCLUSION]
    return list(SQLITE_TRIGGERS.values())


def drop_statements(dialect: str) -> list[str]:
    """The DDL that removes what `statements` and ONE_OPEN create."""
    if dialect == "postgresql":
        drops = [f"ALTER TABLE facts DROP CONSTRAINT IF EXISTS {EXCLUSION_NAME}"]
    else:
        drops = [f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGERS]
    return [*drops, f"DROP INDEX IF EXISTS {ONE_OPEN_INDEX}"]
