"""The inserts of one put, sent together.

A put inserts a claim, its fact versions and its decisions. Inside `batch` they are queued and
flushed once at its end: on Postgres, a few rows as a single statement (data-modifying CTEs),
which saves two round trips per put, and many by one COPY per table; SQLite runs them table
by table. Outside a batch every insert runs at once. A large batch may also send what it
queued so far while it decides the rest (`sending_early`).
A batch only queues inserts that nothing in it reads back, so the order of work is unchanged.

On Postgres a batch may also queue statements to run before its inserts (`first`: the closes
of the versions its inserts replace), and a caller that commits as soon as the batch ends may
say so (`Flush.commit`): the few-rows case then sends the statements first, the INSERT and the
COMMIT in one pipeline, one round trip where there were three.

It is the one door every fact version goes in by: the versions are noted in the unit's
`Written` here (for the store's after-commit hooks), whichever writer inserts them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

from sqlalchemy import Connection, Dialect, FromClause, String, TypeDecorator, insert
from sqlalchemy.orm import Session

from pipeline.db import pipelined
from pipeline.db.base import JsonColumn, JsonText
from pipeline.db.models import Base, FactRow
from pipeline.db.unit import WRITTEN, Written

_PENDING = "sgam_pending_inserts"
_FIRST = "sgam_pending_flush"
# Up to this many rows go out as one combined statement (a put's few rows); more would make a
# statement too large to compile once and cache (and past 65,535 parameters, too large to send).
_COMBINED_ROWS = 16
Rows = list[dict[str, Any]]
# The values one statement binds at most: PostgreSQL takes 65,535.
_MAX_VALUES = 60_000


@dataclass
class Flush:
    """What a batch sends at its end besides its inserts."""

    # Raw statements (`$n` placeholders) and their values, run before the inserts (Postgres).
    first: list[tuple[str, list[Any]]] = field(default_factory=list)
    # The caller commits once the batch ends: the COMMIT may go with the inserts.
    commit: bool = False


@contextmanager
def batch(session: Session) -> Iterator[Flush]:
    flush = Flush()
    session.info[_PENDING] = []
    session.info[_FIRST] = flush
    try:
        yield flush
        queued: list[tuple[type[Base], Rows]] = session.info.pop(_PENDING)
        _insert(session, queued, flush)
    finally:
        session.info.pop(_PENDING, None)
        session.info.pop(_FIRST, None)


@contextmanager
def sending_early(session: Session) -> Iterator[Callable[[], None] | None]:
    """Inside a large batch on PostgreSQL, a `send` that puts what the batch queued so far
    (its statements to run first, then its inserts, in queue order) on the wire at once,
    without waiting for the server (`pipelined.early`): it inserts one part while the batch
    decides the next, where a batch that sends everything at its end leaves the server idle
    while it decides and itself idle while the server inserts. What is left queued goes at
    the batch's end. A caller must no longer change a row once sent (`PendingWrites.sent`).
    Elsewhere there is no `send` (None): SQLite writes the whole batch at its end."""
    connection = session.connection()
    if connection.dialect.name != "postgresql" or _PENDING not in session.info:
        yield None
        return
    flush: Flush = session.info[_FIRST]
    with pipelined.early(connection, "the inserts sent early") as sender:

        def send() -> None:
            queued: list[tuple[type[Base], Rows]] = session.info[_PENDING]
            if not queued and not flush.first:
                return
            driver = sender()
            for statement, values in flush.first:
                _raw(driver, statement, values)
            for statement, values in _statements(connection, _by_table(queued)):
                _raw(driver, statement, values)
            flush.first.clear()
            queued.clear()

        yield send


def first(session: Session, statement: str, values: list[Any]) -> None:
    """Run a raw Postgres statement (`$n` placeholders) before the batch's inserts, in their
    round trip; outside a batch, at once."""
    flush: Flush | None = session.info.get(_FIRST)
    if flush is not None:
        flush.first.append((statement, values))
        return
    with pipelined.pipeline(session.connection(), statement) as driver:
        _raw(driver, statement, values)


def _raw(driver: Any, statement: str, values: list[Any]) -> None:
    """`statement` (in `$n` placeholders) by psycopg's raw cursor: psycopg parses a statement
    of more than 50 parameters for its `%s` again on every execution (about 0.1 ms of client
    CPU for a put's), a raw one not at all."""
    import psycopg

    psycopg.RawCursor(driver).execute(statement, values)


def insert_rows(session: Session, table: type[Base], rows: Rows) -> None:
    if not rows:
        return
    check_columns(table.__table__, rows)
    written: Written | None = session.info.get(WRITTEN)
    if written is not None and table is FactRow:
        written.inserted(rows)
    if _PENDING in session.info:
        session.info[_PENDING].append((table, rows))
    else:
        session.connection().execute(insert(table), rows)


def insert_new(
    session: Session, table: type[Base], rows: Rows, returning: Sequence[str]
) -> list[tuple[Any, ...]]:
    """Insert the rows that violate no unique key (ON CONFLICT DO NOTHING), in order, and
    answer the `returning` columns of those inserted. On PostgreSQL it is one statement with
    one array per column (`unnest`): its text does not grow with the rows, where a multi-row
    VALUES names every row's parameters and psycopg parses all of them again for each chunk
    (1.75 of the 3.3 s an intake of 5,682 episodes took, bench/README.md)."""
    if not rows:
        return []
    check_columns(table.__table__, rows)
    columns = tuple(rows[0])
    if any(tuple(row) != columns for row in rows):
        raise ValueError(f"rows for {table.__tablename__} must name the same columns")
    session.flush()  # what the session holds goes first, as SQLAlchemy's own INSERT would
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        insert_new_rows = sqlite_insert(table).on_conflict_do_nothing()
        returned = insert_new_rows.returning(*(table.__table__.c[name] for name in returning))
        return [tuple(row) for row in connection.execute(returned, rows)]
    arrays = arrays_of(connection, table, columns, rows)
    statement = _unnest_insert(table, columns, tuple(returning), connection.dialect)
    return pipelined.execute(connection, statement, arrays)[1]


@cache
def _unnest_insert(
    table: type[Base], columns: tuple[str, ...], returning: tuple[str, ...], dialect: Dialect
) -> str:
    """INSERT ... SELECT FROM unnest of one array per column (`array_types`)."""
    listed = ", ".join(columns)
    return (
        f"INSERT INTO {table.__tablename__} ({listed}) "
        f"SELECT * FROM unnest({array_parameters(table, columns, dialect)}) "
        f"ON CONFLICT DO NOTHING RETURNING {', '.join(returning)}"
    )


def array_parameters(table: type[Base], columns: Sequence[str], dialect: Dialect) -> str:
    """The placeholders of one array per column (`array_types`), for psycopg's `%s` cursor,
    in binary: psycopg writes a list in text format element by element in Python, quoting
    each, about six times the CPU of its binary form (0.44 ms against 0.08 for ten arrays of
    32 values)."""
    return ", ".join(f"%b::{kind}[]" for kind in array_types(table, columns, dialect))


def array_types(table: type[Base], columns: Sequence[str], dialect: Dialect) -> list[str]:
    """The element type of each column's array as PostgreSQL names it: the column's own,
    strings as text (so a value too long for its column is refused, not cut by the cast)."""
    types = []
    for name in columns:
        kind = table.__table__.c[name].type
        impl = kind.impl_instance if isinstance(kind, TypeDecorator) else kind
        types.append("text" if isinstance(impl, String) else impl.compile(dialect=dialect))
    return types


def arrays_of(
    connection: Connection, table: type[Base], columns: Sequence[str], rows: Rows
) -> list[list[Any]]:
    """One list per column of the rows' values, each as the driver must receive it."""
    arrays: list[list[Any]] = [[] for _ in columns]
    row_values = _row_values(table, tuple(columns), connection.dialect)
    for row in rows:
        for values, value in zip(arrays, row_values(row), strict=True):
            values.append(value)
    return arrays


def check_columns(table: FromClause, rows: Rows) -> None:
    """Refuse a row with a key that is not a column: SQLAlchemy's INSERT drops such a key
    without a word, and with it the value (episode metadata was lost that way)."""
    unknown = set(rows[0]) - _columns(table)
    if unknown:
        raise TypeError(f"not columns of {table}: {', '.join(sorted(unknown))}")


@cache
def _columns(table: FromClause) -> frozenset[str]:
    return frozenset(column.name for column in table.columns)


def _insert(session: Session, queued: list[tuple[type[Base], Rows]], flush: Flush) -> None:
    pending = _by_table(queued)
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        assert not flush.first, "statements run first are Postgres statements"
        for table, rows in pending:
            connection.execute(insert(table), rows)  # a JsonText binds as its value
        return
    total = sum(len(rows) for _, rows in pending)
    if total > _COMBINED_ROWS:
        if flush.first:
            with pipelined.pipeline(connection, "the statements before a COPY") as driver:
                for statement, values in flush.first:
                    _raw(driver, statement, values)
        for table, rows in pending:
            _copy(connection, table, rows)
        return
    if not pending and not flush.first:
        return
    statement, values = _values_of(connection, pending) if pending else ("", [])
    with pipelined.pipeline(connection, statement, commit=flush.commit) as driver:
        for before, before_values in flush.first:
            _raw(driver, before, before_values)
        if pending:
            _raw(driver, statement, values)


def _by_table(queued: list[tuple[type[Base], Rows]]) -> list[tuple[type[Base], Rows]]:
    # Each table's rows in queue order: the order of the CTEs themselves is up to Postgres,
    # the order of rows within one INSERT or COPY (and so of event ids) is not.
    by_table: dict[type[Base], Rows] = {}
    for table, rows in queued:
        by_table.setdefault(table, []).extend(rows)
    return list(by_table.items())


def _row_values(
    table: type[Base], columns: tuple[str, ...], dialect: Dialect
) -> Callable[[dict[str, Any]], list[Any]]:
    """A row's values in the order of `columns`, each as the driver must receive it (see
    `_binders`): only the columns that need a conversion are touched."""
    where = {name: index for index, name in enumerate(columns)}
    binders = [(where[name], bind) for name, bind in _binders(table, dialect) if name in where]

    def values(row: dict[str, Any]) -> list[Any]:
        picked = [row[column] for column in columns]
        for index, bind in binders:
            picked[index] = bind(picked[index])
        return picked

    return values


def _copy(connection: Connection, table: type[Base], rows: Rows) -> None:
    """Many rows by COPY, in order: on PostgreSQL the cheapest way in for the server, which
    parses no statement per row."""
    columns = tuple(rows[0])
    driver = connection.connection.driver_connection
    assert driver is not None, "a connection in a transaction has its driver connection"
    statement = f"COPY {table.__tablename__} ({', '.join(columns)}) FROM STDIN"
    row_values = _row_values(table, columns, connection.dialect)
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row_values(row))


@cache
def _binders(table: type[Base], dialect: Dialect) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """How the values of the columns that need it reach the driver without SQLAlchemy's
    statement: JSON as JSON (None included, as JSON null, like SQLAlchemy's INSERT), decorated
    types through their own conversion; the other columns go as they are."""
    binders: list[tuple[str, Callable[[Any], Any]]] = []
    for column in table.__table__.columns:
        kind = column.type
        if isinstance(kind, JsonColumn):
            binders.append((column.name, _jsonb))
        elif isinstance(kind, TypeDecorator):
            binders.append((column.name, partial(kind.process_bind_param, dialect=dialect)))
    return tuple(binders)


def _jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    if isinstance(value, JsonText):
        return Jsonb(value.text, dumps=_as_is)
    return Jsonb(value)


def _as_is(text: str) -> str:
    return text


def _statements(
    connection: Connection, pending: list[tuple[type[Base], Rows]]
) -> Iterator[tuple[str, list[Any]]]:
    """The rows as statements of multi-row VALUES (`_values_of`): one, or one a slice of a
    table's rows where one would bind more values than PostgreSQL takes."""
    if sum(len(rows) * len(rows[0]) for _, rows in pending) <= _MAX_VALUES:
        yield _values_of(connection, pending)
        return
    for table, rows in pending:
        step = max(1, _MAX_VALUES // len(rows[0]))
        for start in range(0, len(rows), step):
            yield _values_of(connection, [(table, rows[start : start + step])])


def _values_of(
    connection: Connection, pending: list[tuple[type[Base], Rows]]
) -> tuple[str, list[Any]]:
    """The rows as one statement of multi-row VALUES (`_combined`) and its flat values: psycopg
    dumps a flat list of values in C, where an array of them it dumps element by element in
    Python (28 % of put_many's client CPU when its parts went as arrays)."""
    shape = tuple((table, len(rows), tuple(rows[0])) for table, rows in pending)
    values: list[Any] = []
    for (table, rows), (_, _, columns) in zip(pending, shape, strict=True):
        row_values = _row_values(table, columns, connection.dialect)
        for row in rows:
            values.extend(row_values(row))
    return _combined(shape), values


@cache
def _combined(shape: tuple[tuple[type[Base], int, tuple[str, ...]], ...]) -> str:
    """The INSERTs as data-modifying CTEs of the last one, in the server's own placeholders
    (`$n`, for the raw cursor): psycopg prepares it (SQLAlchemy's typed form it would not),
    and it is built once per shape."""
    parts: list[str] = []
    number = 0
    for table, count, columns in shape:
        rows = []
        for _ in range(count):
            rows.append("(" + ", ".join(f"${number + i + 1}" for i in range(len(columns))) + ")")
            number += len(columns)
        parts.append(
            f"INSERT INTO {table.__tablename__} ({', '.join(columns)}) VALUES {', '.join(rows)}"
        )
    *earlier, last = parts
    if not earlier:
        return last
    ctes = ", ".join(f"write_{n} AS ({part})" for n, part in enumerate(earlier))
    return f"WITH {ctes} {last}"
