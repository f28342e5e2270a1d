"""Rows of a table for many keys at once, in one statement.

On PostgreSQL the keys go as one array per key column and are joined to the table one key at a
time (a long `IN` list of tuples makes the planner slow, and with absent statistics it reads
the table whole); SQLite, which has no arrays, gets the `IN` list.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, String, bindparam, func, select, true, tuple_
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session, aliased

from pipeline.db.base import Base


@dataclass(frozen=True)
class KeyedQuery:
    """The rows of `table` whose `fields` equal one of the bound keys (and `where`)."""

    fields: tuple[str, ...]
    per_key: Select[Any]
    listed: Select[Any]

    @classmethod
    def of(cls, table: type[Base], fields: Sequence[str], *where: Any) -> KeyedQuery:
        arrays = [bindparam(name, type_=ARRAY(String)) for name in fields]
        keys = func.unnest(*arrays).table_valued(*fields).render_derived(name="keys")
        # OFFSET 0 keeps the subquery whole, so it stays an index scan per key even while the
        # table's statistics are stale or absent (a new database, autovacuum behind).
        rows = (
            select(table)
            .where(*(getattr(table, name) == keys.c[name] for name in fields), *where)
            .offset(0)
            .lateral("keyed_rows")
        )
        per_key = select(aliased(table, rows)).select_from(keys).join(rows, true())
        columns = tuple_(*(getattr(table, name) for name in fields))
        listed = select(table).where(columns.in_(bindparam("keys", expanding=True)), *where)
        return cls(tuple(fields), per_key, listed)

    def options(self, **options: Any) -> KeyedQuery:
        return KeyedQuery(
            self.fields,
            self.per_key.execution_options(**options),
            self.listed.execution_options(**options),
        )

    def rows(self, session: Session, keys: Collection[tuple[Any, ...]]) -> Any:
        """The ORM rows for `keys` (tuples of the fields' values, in their order)."""
        if session.get_bind().dialect.name == "postgresql":
            arrays = {name: [key[i] for key in keys] for i, name in enumerate(self.fields)}
            return session.scalars(self.per_key, arrays)
        return session.scalars(self.listed, {"keys": list(keys)})
