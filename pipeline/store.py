"""The database handle: engine, migrations, transactions with bounded retries, and key locks.

Postgres runs at READ COMMITTED and serialises writers of one key with transaction-scoped
advisory locks; SQLite serialises every writer with BEGIN IMMEDIATE. Either way a write reads
the key's rows only after it holds the lock, so concurrent writers behave as if sequential.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any, TypeVar

import psycopg
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event, make_url, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from pipeline.catalog import load_catalog
from pipeline.errors import InvalidInput, StoreBusy, StoreUnavailable
from pipeline.settings import Settings
from schemas.catalog import Catalog

T = TypeVar("T")
Clock = Callable[[], datetime]

# SQLSTATEs after which the whole transaction may simply be run again.
_TRANSIENT_SQLSTATES = {"40001", "40P01", "55P03"}


def utc_now() -> datetime:
    return datetime.now(UTC)


def is_transient(error: BaseException) -> bool:
    if not isinstance(error, DBAPIError):
        return False
    if error.connection_invalidated:  # the server went away; a fresh connection may work
        return True
    cause = error.orig
    if isinstance(cause, psycopg.Error):
        return cause.sqlstate in _TRANSIENT_SQLSTATES
    if isinstance(cause, sqlite3.OperationalError):
        return "locked" in str(cause) or "busy" in str(cause)
    return False


def is_unavailable(error: BaseException) -> bool:
    """The database could not be reached or opened at all (as opposed to a failed statement)."""
    if not isinstance(error, DBAPIError):
        return False
    cause = error.orig
    if isinstance(cause, psycopg.OperationalError):
        return cause.sqlstate is None or cause.sqlstate.startswith("08")
    if isinstance(cause, sqlite3.OperationalError):
        return "unable to open" in str(cause)
    return False


@contextmanager
def _reachable() -> Iterator[None]:
    try:
        yield
    except DBAPIError as error:
        if is_unavailable(error):
            first_line = str(error.orig).strip().splitlines()[0]
            raise StoreUnavailable(f"the database is unavailable: {first_line}") from error
        raise


def _engine(url: str, lock_timeout_ms: int) -> Engine:
    try:
        parsed = make_url(url)
    except Exception:  # sqlalchemy raises ArgumentError or ValueError depending on the flaw
        raise InvalidInput("SGAM_DATABASE_URL", f"{url!r} is not a database URL") from None
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_connect)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    if parsed.get_backend_name() == "postgresql":
        # A lock wait longer than this fails the transaction, which `Store.run` retries.
        options = f"-c lock_timeout={int(lock_timeout_ms)}"
        # No pre-ping: it costs a round trip per transaction. A connection found dead is
        # invalidated by SQLAlchemy and the transaction retried by `Store.run` instead.
        return create_engine(
            url, pool_size=5, max_overflow=5, pool_recycle=1800, connect_args={"options": options}
        )
    raise InvalidInput(
        "SGAM_DATABASE_URL", "only sqlite:/// and postgresql+psycopg:// are supported"
    )


def _sqlite_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    # Take transaction control away from the driver so that `begin` below is the only BEGIN.
    dbapi_connection.isolation_level = None
    dbapi_connection.execute("PRAGMA journal_mode=WAL")
    dbapi_connection.execute("PRAGMA busy_timeout=30000")
    dbapi_connection.execute("PRAGMA foreign_keys=ON")


def _sqlite_begin(connection: Any) -> None:
    # IMMEDIATE takes the write lock before the first read: a writer never decides on stale rows.
    # A read-only connection (Store.reading) takes no lock and never blocks a writer.
    read_only = connection.get_execution_options().get("sgam_read_only", False)
    connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def _alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("pipeline") / "migrations"))
    return config


class Store:
    """One database and the catalogue that governs it. Build it once at the edge (CLI, worker,
    test) and pass it to each stage."""

    def __init__(
        self, settings: Settings, clock: Clock = utc_now, catalog: Catalog | None = None
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.catalog = catalog if catalog is not None else load_catalog(settings.catalog_path)
        self.engine = _engine(settings.database_url, settings.lock_timeout_ms)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # A read is one SELECT: on Postgres it needs no BEGIN/COMMIT round trips around it.
        autocommit = {"isolation_level": "AUTOCOMMIT"} if self.is_postgres else {}
        self._reader = self.engine.execution_options(sgam_read_only=True, **autocommit)

    @property
    def is_postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    # -- schema -------------------------------------------------------------------------------

    def upgrade(self) -> None:
        """Apply every migration not yet applied (`sgam db upgrade`)."""
        config = _alembic_config()
        with _reachable(), self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def is_current(self) -> bool:
        head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
        with _reachable(), self.engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision() == head

    def ensure_schema(self) -> None:
        """SQLite migrates itself on first use; Postgres is migrated explicitly by an operator."""
        if self.is_current():
            return
        if self.is_postgres:
            raise InvalidInput(
                "SGAM_DATABASE_URL", "the database schema is not current: run `sgam db upgrade`"
            )
        self.upgrade()

    # -- transactions -------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        with _reachable(), self._sessions() as session, session.begin():
            yield session

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection for a single consistent SELECT."""
        with _reachable(), self._reader.connect() as connection:
            yield connection

    def run(self, work: Callable[[Session], T]) -> T:
        """Run `work` in one transaction, again from scratch after a transient failure."""
        retrying = Retrying(
            stop=stop_after_attempt(self.settings.write_retries),
            wait=wait_random_exponential(multiplier=0.02, max=1.0),
            retry=retry_if_exception(is_transient),
        )
        try:
            for attempt in retrying:
                with attempt, self.transaction() as session:
                    return work(session)
        except RetryError as exhausted:
            raise StoreBusy(
                f"gave up after {self.settings.write_retries} attempts: "
                f"{exhausted.last_attempt.exception()}"
            ) from exhausted
        raise AssertionError("unreachable: tenacity either returns or raises")

    def lock(
        self,
        session: Session,
        *names: tuple[str, ...],
        shared: tuple[tuple[str, ...], ...] = (),
    ) -> None:
        """Hold locks on logical names until the transaction ends, in one round trip: first
        the `shared` ones, then `names` exclusively (Postgres only: SQLite already holds its
        database-wide write lock). Callers take locks in the order idempotency key, subject,
        attribute, so no two transactions wait on each other in a cycle."""
        if not self.is_postgres:
            return
        calls = [("pg_advisory_xact_lock_shared", name) for name in shared]
        calls += [("pg_advisory_xact_lock", name) for name in names]
        selects = ", ".join(
            f"{function}(hashtextextended(:n{index}, 0))"
            for index, (function, _) in enumerate(calls)
        )
        params = {f"n{index}": "\x1f".join(name) for index, (_, name) in enumerate(calls)}
        session.execute(text(f"SELECT {selects}"), params)

    def dispose(self) -> None:
        self.engine.dispose()


def open_store(
    settings: Settings | None = None, clock: Clock = utc_now, catalog: Catalog | None = None
) -> Store:
    store = Store(settings or Settings(), clock, catalog)
    store.ensure_schema()
    return store
