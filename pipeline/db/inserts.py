"""The inserts of one put, sent together.

A put inserts a claim, its fact versions and its decisions. Inside `batch` they are queued and
flushed once at its end: on Postgres, a few rows as a single statement (data-modifying CTEs),
which saves two round trips per put, and many by one COPY per table; SQLite runs them table
by table. Outside a batch every insert runs at once.
A batch only queues inserts that nothing in it reads back, so the order of work is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, partial
from typing import Any

from sqlalchemy import Connection, Dialect, FromClause, TypeDecorator, insert
from sqlalchemy.orm import Session

from pipeline.db.base import JsonColumn
from pipeline.db.models import Base

_PENDING = "sgam_pending_inserts"
# Up to this many rows go out as one combined statement (a put's few rows); more would make a
# statement too large to compile once and cache (and past 65,535 parameters, too large to send).
_COMBINED_ROWS = 16
Rows = list[dict[str, Any]]


@contextmanager
def batch(session: Session) -> Iterator[None]:
    session.info[_PENDING] = []
    try:
        yield
        queued: list[tuple[type[Base], Rows]] = session.info.pop(_PENDING)
        _insert(session, queued)
    finally:
        session.info.pop(_PENDING, None)


def insert_rows(session: Session, table: type[Base], rows: Rows) -> None:
    if not rows:
        return
    check_columns(table.__table__, rows)
    if _PENDING in session.info:
        session.info[_PENDING].append((table, rows))
    else:
        session.connection().execute(insert(table), rows)


def check_columns(table: FromClause, rows: Rows) -> None:
    """Refuse a row with a key that is not a column: SQLAlchemy's INSERT drops such a key
    without a word, and with it the value (episode metadata was lost that way)."""
    unknown = set(rows[0]) - _columns(table)
    if unknown:
        raise TypeError(f"not columns of {table}: {', '.join(sorted(unknown))}")


@cache
def _columns(table: FromClause) -> frozenset[str]:
    return frozenset(column.name for column in table.columns)


def _insert(session: Session, queued: list[tuple[type[Base], Rows]]) -> None:
    # Each table's rows in queue order: the order of the CTEs themselves is up to Postgres,
    # the order of rows within one INSERT or COPY (and so of event ids) is not.
    by_table: dict[type[Base], Rows] = {}
    for table, rows in queued:
        by_table.setdefault(table, []).extend(rows)
    pending = list(by_table.items())
    connection = session.connection()
    total = sum(len(rows) for _, rows in pending)
    if connection.dialect.name == "postgresql" and total > _COMBINED_ROWS:
        for table, rows in pending:
            _copy(connection, table, rows)
        return
    if connection.dialect.name != "postgresql" or len(pending) <= 1:
        for table, rows in pending:
            connection.execute(insert(table), rows)
        return
    shape = tuple((table, len(rows), tuple(rows[0])) for table, rows in pending)
    values = [
        value
        for table, rows in pending
        for row in rows
        for value in _bound(connection, table, row).values()
    ]
    connection.exec_driver_sql(_combined(shape), tuple(values))


def _bound(connection: Connection, table: type[Base], row: dict[str, Any]) -> dict[str, Any]:
    """`row` with each value as the driver must receive it (see `_binders`)."""
    binders = _binders(table, connection.dialect)
    return {
        column: binder(value) if (binder := binders[column]) else value
        for column, value in row.items()
    }


def _copy(connection: Connection, table: type[Base], rows: Rows) -> None:
    """Many rows by COPY, in order: on PostgreSQL the cheapest way in for the server, which
    parses no statement per row."""
    columns = list(rows[0])
    driver = connection.connection.driver_connection
    assert driver is not None, "a connection in a transaction has its driver connection"
    statement = f"COPY {table.__tablename__} ({', '.join(columns)}) FROM STDIN"
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        for row in rows:
            bound = _bound(connection, table, row)
            copy.write_row([bound[column] for column in columns])


@cache
def _binders(table: type[Base], dialect: Dialect) -> dict[str, Callable[[Any], Any] | None]:
    """How each column's values reach the driver without SQLAlchemy's statement: JSON as JSON
    (None included, as JSON null, like SQLAlchemy's INSERT), decorated types through their
    own conversion, the rest as they are."""
    from psycopg.types.json import Jsonb

    binders: dict[str, Callable[[Any], Any] | None] = {}
    for column in table.__table__.columns:
        kind = column.type
        if isinstance(kind, JsonColumn):
            binders[column.name] = Jsonb
        elif isinstance(kind, TypeDecorator):
            binders[column.name] = partial(kind.process_bind_param, dialect=dialect)
        else:
            binders[column.name] = None
    return binders


@cache
def _combined(shape: tuple[tuple[type[Base], int, tuple[str, ...]], ...]) -> str:
    """The INSERTs as data-modifying CTEs of the last one, in the driver's own placeholders:
    short enough for psycopg to cache and prepare it (SQLAlchemy's typed form is not), and
    built once per shape."""
    parts: list[str] = []
    for table, count, columns in shape:
        row = "(" + ", ".join(["%s"] * len(columns)) + ")"
        parts.append(
            f"INSERT INTO {table.__tablename__} ({', '.join(columns)}) "
            f"VALUES {', '.join([row] * count)}"
        )
    *earlier, last = parts
    ctes = ", ".join(f"write_{n} AS ({part})" for n, part in enumerate(earlier))
    return f"WITH {ctes} {last}"
