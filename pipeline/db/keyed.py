"""Rows of a table for many keys at once, in one statement.

On PostgreSQL the keys go as one array per key column and are joined to the table one key at a
time (a long `IN` list of tuples makes the planner slow, and with absent statistics it reads
the table whole); SQLite, which has no arrays, gets the `IN` list.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Dialect,
    Select,
    SQLColumnExpression,
    String,
    any_,
    bindparam,
    func,
    literal,
    select,
    true,
    tuple_,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session, aliased

from pipeline.db.base import Base


@dataclass(frozen=True)
class KeyedQuery:
    """The rows of `table` whose `fields` equal one of the bound keys (and `where`): whole, as
    ORM rows (`rows`), or only some of their columns (`of(..., columns=)`, `tuples`)."""

    table: type[Base]
    fields: tuple[str, ...]
    where: tuple[Any, ...]
    per_key: Select[Any]
    listed: Select[Any]
    _driver_sql: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(
        cls, table: type[Base], fields: Sequence[str], *where: Any, columns: Sequence[str] = ()
    ) -> KeyedQuery:
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
        if columns:
            per_key = select(*(rows.c[name] for name in columns))
            listed = select(*(getattr(table, name) for name in columns))
        else:
            per_key, listed = select(aliased(table, rows)), select(table)
        per_key = per_key.select_from(keys).join(rows, true())
        matched = tuple_(*(getattr(table, name) for name in fields))
        listed = listed.where(matched.in_(bindparam("keys", expanding=True)), *where)
        return cls(table, tuple(fields), where, per_key, listed)

    def options(self, **options: Any) -> KeyedQuery:
        return replace(
            self,
            per_key=self.per_key.execution_options(**options),
            listed=self.listed.execution_options(**options),
            _driver_sql={},
        )

    def driver_sql(self, dialect: Dialect) -> str:
        """The per-key query as plain SQL in the driver's placeholders (one `%(field)s` array
        per field), for a caller that sends it itself: short enough for psycopg to prepare,
        where SQLAlchemy's rendering names every column twice."""
        cached = self._driver_sql.get(dialect.name)
        if cached is None:
            name = self.table.__tablename__
            arrays = ", ".join(f"%({field})s::text[]" for field in self.fields)
            match = " AND ".join(f"{name}.{field} = k.{field}" for field in self.fields)
            where = "".join(
                f" AND {condition.compile(dialect=dialect)}" for condition in self.where
            )
            cached = self._driver_sql[dialect.name] = (
                f"SELECT r.* FROM unnest({arrays}) AS k({', '.join(self.fields)}) CROSS JOIN "
                f"LATERAL (SELECT * FROM {name} WHERE {match}{where} OFFSET 0) AS r"
            )
        return cached

    def rows(self, session: Session, keys: Collection[tuple[Any, ...]]) -> Any:
        """The ORM rows for `keys` (tuples of the fields' values, in their order)."""
        return self._run(session.scalars, session, keys)

    def tuples(self, session: Session, keys: Collection[tuple[Any, ...]]) -> Any:
        """`rows` of a query of some columns: a tuple of their values per row."""
        return self._run(session.execute, session, keys)

    def _run(
        self, execute: Callable[..., Any], session: Session, keys: Collection[tuple[Any, ...]]
    ) -> Any:
        """The query for `keys` through `execute`: one array per field on PostgreSQL (the
        per-key index scans), the listed keys elsewhere."""
        if session.get_bind().dialect.name == "postgresql":
            arrays = {name: [key[i] for key in keys] for i, name in enumerate(self.fields)}
            return execute(self.per_key, arrays)
        return execute(self.listed, {"keys": list(keys)})


def one_of(
    dialect: str, column: SQLColumnExpression[str], values: Collection[str]
) -> ColumnElement[bool]:
    """`column IN values` bound as one parameter however many values there are (an `IN` list
    takes one each, and a driver refuses past its limit): an array on PostgreSQL, a JSON array
    SQLite reads with `json_each`."""
    if dialect == "postgresql":
        return column == any_(literal(list(values), ARRAY(String)))
    listed = func.json_each(literal(json.dumps(list(values)), String)).table_valued("value")
    return column.in_(select(listed.c.value))
