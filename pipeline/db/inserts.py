"""The inserts of one put, sent together.

A put inserts a claim, its fact versions and its decisions. Inside `batch` they are queued and
flushed once at its end: on Postgres, a few rows as a single statement (data-modifying CTEs),
which saves two round trips per put, and many by one COPY per table; SQLite runs them table
by table. Outside a batch every insert runs at once.
A batch only queues inserts that nothing in it reads back, so the order of work is unchanged.

It is the one door every fact version goes in by: the versions are noted in the unit's
`Written` here (for the store's after-commit hooks), whichever writer inserts them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, partial
from typing import Any

from sqlalchemy import Connection, Dialect, FromClause, TypeDecorator, insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from pipeline.db.base import JsonColumn
from pipeline.db.models import Base, FactRow
from pipeline.db.unit import WRITTEN, Written

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


class JsonText:
    """A JSON value whose canonical text is made already (a decision's payload, hashed from
    that text): PostgreSQL is sent the text instead of a second encoding of the value."""

    __slots__ = ("text", "value")

    def __init__(self, value: Any, text: str) -> None:
        self.value = value
        self.text = text


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
        session.connection().execute(insert(table), _values(rows))


def _values(rows: Rows) -> Rows:
    """The rows as SQLAlchemy's INSERT takes them: a JsonText as its value."""
    return [
        {name: v.value if isinstance(v, JsonText) else v for name, v in row.items()} for row in rows
    ]


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
            connection.execute(insert(table), _values(rows))
        return
    shape = tuple((table, len(rows), tuple(rows[0])) for table, rows in pending)
    values = [
        value
        for table, rows in pending
        for row in rows
        for value in _bound(connection, table, row).values()
    ]
    _execute_raw(connection, _combined(shape), values)


def _execute_raw(connection: Connection, statement: str, values: list[Any]) -> None:
    """`statement` (in `$n` placeholders) by psycopg's raw cursor: psycopg parses a statement
    of more than 50 parameters for its `%s` again on every execution (about 0.1 ms of client
    CPU for a put's), a raw one not at all. Errors are raised as SQLAlchemy would raise them."""
    import psycopg

    driver = connection.connection.driver_connection
    assert driver is not None, "a connection in a transaction has its driver connection"
    try:
        with psycopg.RawCursor(driver) as cursor:
            cursor.execute(statement, values)
    except psycopg.Error as error:
        # As SQLAlchemy would raise it, so the store classifies it (a lock timeout is BUSY,
        # an exclusion violation a conflict) and never shows the bound values.
        raise DBAPIError.instance(
            statement,
            None,
            error,
            psycopg.Error,
            hide_parameters=True,
            connection_invalidated=driver.closed,
            dialect=connection.dialect,
        ) from None


def _bound(connection: Connection, table: type[Base], row: dict[str, Any]) -> dict[str, Any]:
    """`row` with each value as the driver must receive it (see `_binders`): only the columns
    that need a conversion are touched."""
    bound = dict(row)
    for column, binder in _binders(table, connection.dialect):
        if column in bound:
            bound[column] = binder(bound[column])
    return bound


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
    ctes = ", ".join(f"write_{n} AS ({part})" for n, part in enumerate(earlier))
    return f"WITH {ctes} {last}"
