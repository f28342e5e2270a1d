"""What differs between PostgreSQL and SQLite, behind one small interface.

Postgres runs at READ COMMITTED and serialises writers of one key with transaction-scoped
advisory locks; SQLite serialises every writer with BEGIN IMMEDIATE. Either way a write reads
the key's rows only after it holds the lock, so concurrent writers behave as if sequential.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, Insert, Table, create_engine, event, make_url, text
from sqlalchemy.exc import DBAPIError

from pipeline.db import replan
from pipeline.db.search_index import SQLITE_STEMMER_TABLES
from pipeline.errors import PurgeBlocked, SettingError
from pipeline.settings import Settings

LockName = tuple[str, ...]

# An execution option: PostgreSQL sends the statement's rows in binary, not text. For the
# embedding arm's vectors: a scope's 600 bytea values in text (hex, twice their size) took
# about twice as long to arrive and decode.
BINARY_RESULTS = "sgam_binary_results"

# SQLSTATEs after which the whole transaction may simply be run again.
_TRANSIENT_SQLSTATES = {"40001", "40P01", "55P03"}
# libpq reports no SQLSTATE for a connection the server refused, only the server's message:
# these mean the URL names a role or database that is not there, which no retry can fix.
_MISCONFIGURED_CONNECTIONS = (
    "does not exist",
    "password authentication failed",
    "no pg_hba.conf entry",
)
# sqlite3's primary result codes (the low byte of an extended code).
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_CANTOPEN, _SQLITE_NOTADB = 5, 6, 14, 26


class Failure(Enum):
    """What a database error means for the caller."""

    BUSY = "busy"  # contention: run the transaction again
    UNAVAILABLE = "unavailable"  # the server or file cannot be reached: retry later
    MISCONFIGURED = "misconfigured"  # the URL names something that is not there: fix it


class Backend(Protocol):
    name: str

    def create_engine(self, url: str, settings: Settings) -> Engine: ...

    def lock(
        self, connection: Connection, names: Sequence[LockName], shared: Sequence[LockName]
    ) -> None:
        """Hold locks on logical names until the transaction ends."""

    def writers(self, url: str) -> Writers | None:
        """A lock this process's writers take before their transaction, or None."""

    def failure(self, error: DBAPIError) -> Failure | None:
        """What `error` means, or None for a failed statement (a bug or a violated rule)."""

    def analyze(self, connection: Connection, tables: Sequence[str]) -> None:
        """Refresh the planner's statistics of `tables`."""

    def scrub_after_purge(self, engine: Engine) -> bool:
        """Cheaply drop erased content from the database files after a purge committed; True
        when none is left there."""

    def insert_new(self, table: Table) -> Insert:
        """An INSERT that skips rows violating a unique key (ON CONFLICT DO NOTHING)."""

    def vacuum(self, engine: Engine, tables: Sequence[str], wait_s: float) -> None:
        """Rewrite `tables` so that no erased or dead row version is left in the files;
        PurgeBlocked when transactions that may still see them stay open past `wait_s`."""


# Shared locks first, then exclusive ones, each in the order given (unnest keeps it; the
# lateral join runs after the first), in one statement of the driver's own placeholders.
LOCK_ALL_SQL = (
    "SELECT first.held + second.held FROM "
    "(SELECT count(pg_advisory_xact_lock_shared(hashtextextended(name, 0))) AS held "
    " FROM unnest(%(shared)s::text[]) AS name) AS first, "
    "LATERAL (SELECT count(pg_advisory_xact_lock(hashtextextended(name, 0))) AS held "
    " FROM unnest(%(names)s::text[]) AS name WHERE first.held >= 0) AS second"
)


def lock_params(names: Sequence[LockName], shared: Sequence[LockName]) -> dict[str, list[str]]:
    return {
        "shared": ["\x1f".join(name) for name in shared],
        "names": ["\x1f".join(name) for name in names],
    }


class Postgres:
    name = "postgresql"

    def create_engine(self, url: str, settings: Settings) -> Engine:
        # A lock wait longer than this fails the transaction, which `Store.run` retries.
        options = f"-c lock_timeout={int(settings.lock_timeout_ms)}"
        # No pre-ping: it costs a round trip per transaction. A connection found dead is
        # invalidated by SQLAlchemy and the transaction retried by `Store.run` instead.
        engine = create_engine(
            url,
            pool_size=5,
            max_overflow=5,
            pool_recycle=1800,
            connect_args={"options": options},
            # A driver error's message then names the statement, not its data (episode text,
            # values): it may reach a log or a task's failure line.
            hide_parameters=True,
        )
        # Prepared statements are planned again when a table has outgrown their plans.
        event.listen(engine, "checkout", replan.on_checkout)
        event.listen(engine, "before_cursor_execute", _binary_results)
        return engine

    def lock(
        self, connection: Connection, names: Sequence[LockName], shared: Sequence[LockName]
    ) -> None:
        # One round trip for all of them.
        if names or shared:
            connection.exec_driver_sql(LOCK_ALL_SQL, lock_params(names, shared))

    def writers(self, url: str) -> Writers | None:
        """None: PostgreSQL's writers wait on the row and advisory locks they need only."""
        return None

    def failure(self, error: DBAPIError) -> Failure | None:
        import psycopg  # the driver is loaded already when a Postgres error exists

        cause = error.orig
        if not isinstance(cause, psycopg.Error):
            return None
        if cause.sqlstate in _TRANSIENT_SQLSTATES:
            return Failure.BUSY
        if error.connection_invalidated:  # the server went away; a fresh connection may work
            return Failure.BUSY
        if isinstance(cause, psycopg.OperationalError) and (
            cause.sqlstate is None or cause.sqlstate.startswith("08")
        ):
            message = str(cause)
            if any(marker in message for marker in _MISCONFIGURED_CONNECTIONS):
                return Failure.MISCONFIGURED
            return Failure.UNAVAILABLE
        return None

    def analyze(self, connection: Connection, tables: Sequence[str]) -> None:
        connection.execute(text(f"ANALYZE {', '.join(tables)}"))

    def insert_new(self, table: Table) -> Insert:
        from sqlalchemy.dialects.postgresql import insert

        return insert(table).on_conflict_do_nothing()

    def scrub_after_purge(self, engine: Engine) -> bool:
        """Old row versions stay in the table files until VACUUM FULL (`vacuum`), which locks
        the tables: too heavy to run after every purge."""
        return False

    def vacuum(self, engine: Engine, tables: Sequence[str], wait_s: float) -> None:
        # VACUUM FULL writes each table anew and unlinks the old files; CHECKPOINT lets the
        # WAL segments that still hold old row images be recycled.
        from pipeline.db.old_transactions import wait_for_old_transactions

        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            still_open = wait_for_old_transactions(connection, wait_s)
            if still_open:
                raise PurgeBlocked(
                    f"{len(still_open)} transaction(s) older than this vacuum may still see "
                    f"purged rows: {', '.join(t.describe() for t in still_open)}; waited "
                    f"{wait_s:g} s and rewrote nothing: run it again once they end",
                    pids=[t.pid for t in still_open if t.pid is not None],
                )
            connection.execute(text(f"VACUUM (FULL, ANALYZE) {', '.join(tables)}"))
            connection.execute(text("CHECKPOINT"))


class Writers:
    """The lock of one SQLite file's writers in this process (`Sqlite.writers`), looked up
    at each turn: a child forked while a thread of its parent wrote gets fresh locks, not a
    copy of one held forever."""

    def __init__(self, path: str) -> None:
        self.path = path

    def lock(self) -> threading.Lock:
        with _writers_lock:
            return _writers.setdefault(self.path, threading.Lock())


_writers: dict[str, threading.Lock] = {}
_writers_lock = threading.Lock()


def _fresh_writers() -> None:
    global _writers_lock
    _writers.clear()
    _writers_lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_writers)


class Sqlite:
    name = "sqlite"

    def create_engine(self, url: str, settings: Settings) -> Engine:
        database = make_url(url).database
        if database and database != ":memory:" and not Path(database).parent.is_dir():
            # A setting to fix, not a store that may come back (SQLite only says "cannot open").
            raise SettingError(
                "SGAM_DATABASE_URL",
                f"the directory of {database} does not exist; create it first"
                + _relative_hint(database),
            )
        # The wait for another writer's lock, like lock_timeout on Postgres; `Store.run` retries.
        engine = create_engine(
            url,
            connect_args={"timeout": settings.lock_timeout_ms / 1000},
            hide_parameters=True,  # as on PostgreSQL: an error's message never quotes the data
        )
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine

    def lock(
        self, connection: Connection, names: Sequence[LockName], shared: Sequence[LockName]
    ) -> None:
        """Nothing to do: a SQLite writer already holds the database-wide write lock."""

    def writers(self, url: str) -> Writers | None:
        """The lock this process's writers of the database file take before BEGIN IMMEDIATE
        (`Store.begin`): SQLite admits one writer at a time, and one that finds the file
        locked polls it, sleeping up to 100 ms a turn, so threads writing at once waited out
        each other's sleeps (24 puts at once took about three times as long as one after
        another, `bench/sqlite_writers.py`).
        Queued on this lock, the next writer starts as soon as the last one commits. Other
        processes still meet at the file lock."""
        database = make_url(url).database
        if not database or database == ":memory:":
            return None
        return Writers(str(Path(database).resolve()))

    def failure(self, error: DBAPIError) -> Failure | None:
        code = _sqlite_code(error)
        if code in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return Failure.BUSY
        if code == _SQLITE_CANTOPEN:
            return Failure.UNAVAILABLE
        if code == _SQLITE_NOTADB:
            return Failure.MISCONFIGURED
        return None

    def analyze(self, connection: Connection, tables: Sequence[str]) -> None:
        connection.execute(text("ANALYZE"))

    def insert_new(self, table: Table) -> Insert:
        from sqlalchemy.dialects.sqlite import insert

        return insert(table).on_conflict_do_nothing()

    def scrub_after_purge(self, engine: Engine) -> bool:
        # secure_delete (on every connection) zeroes what a statement frees; the checkpoint
        # copies those pages into the database file and truncates the WAL that held the old
        # ones. It cannot finish while another connection is inside a read transaction. The
        # text index's merge comes first: a deleted row's terms live on in its old segments.
        _optimize_search_index(engine)
        return _checkpoint(engine)

    def vacuum(self, engine: Engine, tables: Sequence[str], wait_s: float) -> None:
        _optimize_search_index(engine)
        raw = engine.raw_connection()  # outside any transaction: VACUUM cannot run in one
        try:
            raw.cursor().execute("VACUUM")
        finally:
            raw.close()
        _checkpoint(engine)


def _optimize_search_index(engine: Engine) -> None:
    from pipeline.db.search_index import optimize

    with engine.begin() as connection:
        optimize(connection)


def _checkpoint(engine: Engine) -> bool:
    """Copy the WAL into the database file and truncate it; False while a reader prevents it."""
    raw = engine.raw_connection()
    try:
        busy, _, _ = raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        raw.close()
    return not busy


def _binary_results(
    _connection: Any, cursor: Any, _statement: str, _params: Any, context: Any, _many: bool
) -> None:
    if context is not None and context.execution_options.get(BINARY_RESULTS):
        from psycopg import pq

        cursor.format = pq.Format.BINARY


def _relative_hint(database: str) -> str:
    """A relative path is read from the directory the command runs in: name the absolute one."""
    if Path(database).is_absolute():
        return ""
    return (
        f" (a relative path is read from the current directory; for one database wherever "
        f"sgam runs, give the absolute path: sqlite:///{Path(database).absolute()})"
    )


def _sqlite_code(error: DBAPIError) -> int | None:
    cause = error.orig
    if not isinstance(cause, sqlite3.Error):
        return None
    code = getattr(cause, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _sqlite_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    # Take transaction control away from the driver so that `begin` below is the only BEGIN.
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA journal_mode=WAL")
    # Overwrite freed content with zeros, so that what a purge erases is not left on disk.
    dbapi_connection.execute("PRAGMA secure_delete=ON")
    dbapi_connection.execute("PRAGMA foreign_keys=ON")
    for statement in SQLITE_STEMMER_TABLES:  # outside any transaction: kept for the connection
        dbapi_connection.execute(statement)


def _sqlite_begin(connection: Any) -> None:
    # IMMEDIATE takes the write lock before the first read: a writer never decides on stale rows.
    # A read-only connection (Store.reading) takes no lock and never blocks a writer.
    read_only = connection.get_execution_options().get("sgam_read_only", False)
    connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def backend_for(url: str) -> Backend:
    try:
        name = make_url(url).get_backend_name()
    except Exception:  # sqlalchemy raises ArgumentError or ValueError depending on the flaw
        raise SettingError("SGAM_DATABASE_URL", "is not a database URL") from None
    backends: dict[str, Backend] = {"sqlite": Sqlite(), "postgresql": Postgres()}
    if name not in backends:
        raise SettingError(
            "SGAM_DATABASE_URL", "only sqlite:/// and postgresql+psycopg:// are supported"
        )
    return backends[name]
