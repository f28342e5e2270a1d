"""A SELECT run by psycopg itself, for the hottest read (`get` on PostgreSQL).

SQLAlchemy Core costs a `get` more client CPU than the driver and the server's answer together
(about a third of its time: the compiled cache's lookup, the parameters processed one by one,
the result's metadata and rows built per call). Here the statement is compiled once per shape
into the driver's SQL, the expanding `IN` lists rendered, and its rows come back as dicts: the
values are what SQLAlchemy would have loaded but the datetimes' zone, which the models
normalise to UTC themselves (`schemas.fields.to_utc`). Errors are raised as SQLAlchemy would
raise them, so the store classifies them and never shows the bound values.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from sqlalchemy import Connection, Dialect, Select

from pipeline.db.pipelined import as_sqlalchemy, driver_of


@cache
def _compiled(statement: Select[Any], dialect: Dialect) -> tuple[str, dict[str, Any]]:
    """The statement's SQL in the driver's placeholders and its bound defaults."""
    compiled = statement.compile(dialect=dialect)
    # The IN lists rendered with their values; the caller's parameters are bound at each call.
    named = [bind.key for bind in compiled.binds.values() if bind.required]
    state = compiled.construct_expanded_state(dict.fromkeys(named))
    return state.statement, dict(state.parameters)


def rows(
    connection: Connection, statement: Select[Any], params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The rows of `statement` with `params` (each named bound parameter), by the driver."""
    import psycopg
    from psycopg.rows import dict_row

    sql, defaults = _compiled(statement, connection.dialect)
    driver = driver_of(connection)
    try:
        with driver.cursor(row_factory=dict_row) as cursor:
            return cursor.execute(sql, defaults | dict(params)).fetchall()
    except psycopg.Error as error:
        raise as_sqlalchemy(connection, sql, error) from None
