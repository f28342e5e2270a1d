"""Statements sent to PostgreSQL as one pipeline, in one round trip, the transaction's BEGIN
among them when they are its first.

psycopg opens a transaction by sending BEGIN before the first statement and waiting for its
answer, in pipeline mode too (it syncs after it): a round trip of its own, a quarter of a
put's. Here, when the pipeline is the transaction's first work, the driver is told for its
length that no transaction is wanted (autocommit, set while idle as psycopg requires) and the
BEGIN goes out as the pipeline's first statement; once the pipeline is done the driver is in a
transaction again as far as it knows (`_autocommit` restored: the public setter refuses
inside a transaction), so the COMMIT or ROLLBACK that ends it is the one the driver and
SQLAlchemy would send anyway. A pipeline that commits (`commit=True`) ends the transaction
itself: the driver finds it idle and sends nothing more.

Errors are raised as SQLAlchemy would raise them, so the store classifies them (a lock
timeout is BUSY, an exclusion violation a conflict) and never shows the bound values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, event
from sqlalchemy.exc import DBAPIError, StatementError

if TYPE_CHECKING:
    import psycopg


def driver_of(connection: Connection) -> psycopg.Connection[Any]:
    """The driver connection, owed nothing: an early pipeline left open on it is ended first
    (`settle`)."""
    settle(connection)
    return _driver(connection)


def _driver(connection: Connection) -> psycopg.Connection[Any]:
    driver = connection.connection.driver_connection
    assert driver is not None, "a connection in a transaction has its driver connection"
    return driver  # type: ignore[no-any-return]


_EARLY = "sgam_early_pipeline"


@contextmanager
def early(connection: Connection, what: str) -> Iterator[Callable[[], psycopg.Connection[Any]]]:
    """For the block, a `sender` that answers the driver connection in pipeline mode: what is
    queued on it goes to the server at once and is not waited for. The pipeline stays open
    between sends, until anything else uses the connection (a SQLAlchemy statement, or
    `driver_of`), which first reads every answer owed (`settle`), or the block ends. The
    connection's transaction must be open. Errors are raised as SQLAlchemy's (see above)."""

    def sender() -> psycopg.Connection[Any]:
        if _EARLY not in connection.info:
            opened = _driver(connection).pipeline()
            opened.__enter__()
            connection.info[_EARLY] = (opened, what)
        return _driver(connection)

    def before_statement(*_: Any) -> None:
        settle(connection)

    event.listen(connection, "before_cursor_execute", before_statement)
    try:
        yield sender
    except BaseException as problem:
        opened, _ = connection.info.pop(_EARLY, (None, ""))
        if opened is not None:  # psycopg logs what it cannot end, and `problem` goes on
            opened.__exit__(type(problem), problem, problem.__traceback__)
        raise
    else:
        settle(connection)
    finally:
        event.remove(connection, "before_cursor_execute", before_statement)


def settle(connection: Connection) -> None:
    """End the connection's early pipeline, if one is open, reading every answer it owes."""
    import psycopg

    opened, what = connection.info.pop(_EARLY, (None, ""))
    if opened is None:
        return
    try:
        opened.__exit__(None, None, None)
    except psycopg.Error as error:
        raise as_sqlalchemy(connection, what, error) from None


@contextmanager
def pipeline(
    connection: Connection, what: str, *, commit: bool = False
) -> Iterator[psycopg.Connection[Any]]:
    """The driver connection in pipeline mode; what the block queues on it is sent at its end,
    after a BEGIN if no transaction is open yet and before a COMMIT if `commit`. Results are
    read from the block's cursors after it."""
    import psycopg
    from psycopg import pq

    driver = driver_of(connection)
    opens = not driver.autocommit and driver.pgconn.transaction_status == pq.TransactionStatus.IDLE
    try:
        if opens:
            driver.autocommit = True
        try:
            with driver.pipeline():
                if opens:
                    driver.execute("BEGIN", prepare=False)
                yield driver
                if commit:
                    driver.execute("COMMIT", prepare=False)
        finally:
            if opens:
                driver._autocommit = False  # in a transaction again (see above)
    except psycopg.Error as error:
        raise as_sqlalchemy(connection, what, error) from None


def execute(
    connection: Connection, statement: str, params: Any, *, prepare: bool | None = None
) -> tuple[int, list[tuple[Any, ...]]]:
    """`statement` (psycopg's `%s` placeholders) by the driver itself, in the connection's
    transaction: the rows it affected and those it returned. `prepare`: psycopg's (None: after
    five uses). Errors raised as SQLAlchemy's (see above)."""
    import psycopg

    try:
        with driver_of(connection).cursor() as cursor:
            cursor.execute(statement, params, prepare=prepare)
            returned = cursor.fetchall() if cursor.description is not None else []
            return cursor.rowcount, [tuple(row) for row in returned]
    except psycopg.Error as error:
        raise as_sqlalchemy(connection, statement, error) from None


def as_sqlalchemy(connection: Connection, what: str, error: Exception) -> StatementError:
    """A psycopg error of `what` (a statement, or what the pipeline did) as SQLAlchemy would
    raise it (see above); also for the reads of `driver_reads.py`."""
    import psycopg

    return DBAPIError.instance(
        what,
        None,
        error,
        psycopg.Error,
        hide_parameters=True,
        connection_invalidated=driver_of(connection).closed,
        dialect=connection.dialect,
    )


_NAMED = re.compile(r"%\((\w+)\)s")


@cache
def _numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return _NAMED.sub(number, sql), tuple(names)


def numbered(sql: str, params: Mapping[str, Any]) -> tuple[str, list[Any]]:
    """`sql` in `%(name)s` placeholders as the server's own `$n` and its values in order, for
    psycopg's raw cursor, which converts no query: psycopg's own conversion of the named
    placeholders, each execution, was a tenth of a put's client CPU."""
    raw, names = _numbered(sql)
    return raw, [params[name] for name in names]
