"""The inserts of one put, sent together.

A put inserts a claim, its fact versions and its decisions. Inside `batch` they are queued and
flushed once at its end: on Postgres, a few rows as a single statement (data-modifying CTEs),
which saves two round trips per put, and many as one multi-row INSERT per table; SQLite runs
them table by table. Outside a batch every insert runs at once.
A batch only queues inserts that nothing in it reads back, so the order of work is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from sqlalchemy import BindParameter, TextClause, bindparam, insert, text
from sqlalchemy.orm import Session

from pipeline.db.models import Base

_PENDING = "sgam_pending_inserts"
# Up to this many rows go out as one combined statement (a put's few rows); more would make
# a statement too large to compile once and cache, and past 65,535 parameters to send.
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
    if _PENDING in session.info:
        session.info[_PENDING].append((table, rows))
    else:
        session.connection().execute(insert(table), rows)


def _insert(session: Session, queued: list[tuple[type[Base], Rows]]) -> None:
    # One multi-row INSERT per table, rows in queue order: the order of the CTEs themselves is
    # up to Postgres, the order of rows within one INSERT (and so of event ids) is not.
    by_table: dict[type[Base], Rows] = {}
    for table, rows in queued:
        by_table.setdefault(table, []).extend(rows)
    pending = list(by_table.items())
    connection = session.connection()
    total = sum(len(rows) for _, rows in pending)
    if connection.dialect.name != "postgresql" or len(pending) <= 1 or total > _COMBINED_ROWS:
        # Many rows: SQLAlchemy sends each table's as multi-row INSERTs of bounded size.
        for table, rows in pending:
            connection.execute(insert(table), rows)
        return
    shape = tuple((table, len(rows), tuple(rows[0])) for table, rows in pending)
    params = {
        f"w{n}_{i}_{column}": value
        for n, (_, rows) in enumerate(pending)
        for i, row in enumerate(rows)
        for column, value in row.items()
    }
    connection.execute(_combined(shape), params)


@cache
def _combined(shape: tuple[tuple[type[Base], int, tuple[str, ...]], ...]) -> TextClause:
    """The INSERTs as data-modifying CTEs of the last one, as typed text: SQLAlchemy does not
    cache compiled CTE inserts, and compiling one costs more than the round trips it saves."""
    parts: list[str] = []
    params: list[BindParameter[Any]] = []
    for n, (table, count, columns) in enumerate(shape):
        rows = []
        for i in range(count):
            names = [f"w{n}_{i}_{column}" for column in columns]
            rows.append("(" + ", ".join(f":{name}" for name in names) + ")")
            params += [
                bindparam(name, type_=table.__table__.c[column].type)
                for name, column in zip(names, columns, strict=True)
            ]
        parts.append(
            f"INSERT INTO {table.__tablename__} ({', '.join(columns)}) VALUES {', '.join(rows)}"
        )
    *earlier, last = parts
    ctes = ", ".join(f"write_{n} AS ({part})" for n, part in enumerate(earlier))
    return text(f"WITH {ctes} {last}").bindparams(*params)
