"""Prepared statements planned again as the tables grow (PostgreSQL).

psycopg prepares a statement on its 5th execution on a connection; PostgreSQL plans the prepared
statement for its values 5 times, then settles on one generic plan and keeps it until the
table's statistics change. A plan made while a table was nearly empty (a sequential scan is the
cheapest way to read 3 pages) therefore stays with a long-lived connection while the table grows
to millions of rows, unless something runs ANALYZE; autovacuum may be off, and an ANALYZE of the
still-empty tables (an operator, `sgam replay`, autovacuum's first pass) is what makes the
planner trust the small size in the first place.

So every connection remembers the number of live rows of each table when its statements were
last planned and, at most once a second when it is checked out of the pool, compares it with the
current numbers (one round trip). When a table has doubled, the pool replaces the connection,
and its prepared statements go with it: the new one prepares and plans them again for the
current sizes. (Not `DEALLOCATE ALL` on the same connection: psycopg notices one only while it
has statements prepared and only the first time it sees the text, so a second one left it
executing statements the server had dropped.) The numbers come from the cumulative statistics
(`track_counts`, on by default and needed by autovacuum), which take no lock: `pg_relation_size`
would wait behind a VACUUM FULL or a migration's lock. No plan is used on a table more than
twice the size it was made for (plus the writes of the last second or two, which the statistics
may not count yet), whoever grew the table and whether or not anything analyses it (a
transaction's own writes count from its next one: `put_many` commits every chunk). The check
costs one round trip a second per busy connection and a new connection at each doubling only: no
measurable cost on a put, where planning every execution instead
(`plan_cache_mode=force_custom_plan`) costs 0.2 ms of server CPU, a third of what a put costs
the server (bench/README.md, `bench/fresh_database.py`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import DisconnectionError

# A table must have grown by this factor since the statements were planned to plan them again.
GROWTH = 2.0
# Below this many rows any plan reads a table cheaply: its growth alone re-plans nothing.
FLOOR_ROWS = 500
# The least time between two size checks on one connection.
CHECK_SECONDS = 1.0

_SIZES = (
    "SELECT c.relname, pg_stat_get_live_tuples(c.oid) FROM pg_class c "
    "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
)

Sizes = Mapping[str, int]  # live rows by table name


@dataclass
class _Planned:
    """What one connection knows about the plans of its prepared statements."""

    sizes: dict[str, int] | None = None  # None: nothing planned yet
    next_check: float = 0.0


def outgrown(planned: Sizes, now: Sizes) -> bool:
    """True when some table is at least GROWTH times as large as when the statements were
    planned (a table not seen then counts as empty), and past FLOOR_ROWS."""
    return any(
        size >= FLOOR_ROWS and size >= GROWTH * planned.get(name, 0) for name, size in now.items()
    )


def rebase(planned: Sizes, now: Sizes) -> dict[str, int]:
    """The sizes to compare with next, when no re-plan was needed: a table that shrank (emptied
    by TRUNCATE or by deletes) gets plans made for its smaller size, so its growth
    counts from there."""
    return {name: min(size, planned.get(name, size)) for name, size in now.items()}


def on_checkout(dbapi_connection: Any, record: Any, _proxy: object) -> None:
    """A pool `checkout` listener for psycopg connections (installed by the Postgres backend)."""
    import psycopg  # loaded already: this runs on psycopg connections only

    state = record.info.get("sgam_planned")
    if state is None:
        state = record.info["sgam_planned"] = _Planned()
    moment = time.monotonic()
    if moment < state.next_check:
        return
    state.next_check = moment + CHECK_SECONDS
    # The connection is idle here; in autocommit mode the check opens no transaction.
    autocommit = dbapi_connection.autocommit
    outgrown_plans = False
    try:
        dbapi_connection.autocommit = True
        now = {name: int(size) for name, size in dbapi_connection.execute(_SIZES)}
        if state.sizes is None:
            state.sizes = now
        elif outgrown(state.sizes, now):
            outgrown_plans = True
        else:
            state.sizes = rebase(state.sizes, now)
        dbapi_connection.autocommit = autocommit
    except psycopg.OperationalError as error:
        if not dbapi_connection.closed:
            raise
        # The server closed the connection: the pool replaces it and checks out again.
        raise DisconnectionError(str(error).strip().splitlines()[0]) from error
    if outgrown_plans:
        # The pool closes this connection and checks out a new one (whose check records the
        # current sizes): SQLAlchemy's way to refuse a connection at checkout.
        raise DisconnectionError("a table outgrew the plans of the prepared statements")
