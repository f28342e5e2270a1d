"""The database handle: engine, migrations, units of work with bounded retries, reads, and the
hooks run after a unit of work commits."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib.resources import files
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import sessionmaker
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from pipeline.catalog.loader import load_catalog
from pipeline.db.backends import Failure, backend_for
from pipeline.db.migrations import HEAD
from pipeline.db.unit import WRITTEN, Clock, Unit, Written
from pipeline.errors import SettingError, StoreBusy, StoreUnavailable
from pipeline.settings import Settings, load_settings
from schemas.catalog import Catalog

if TYPE_CHECKING:
    from alembic.config import Config

T = TypeVar("T")
# What runs once a unit of work committed, with the rows it wrote (`Written`).
AfterCommit = Callable[["Store", Written], None]

log = logging.getLogger("sgam.db")


def utc_now() -> datetime:
    return datetime.now(UTC)


def _alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(files("pipeline.db") / "migrations"))
    return config


# A writer that waited its whole lock timeout, at the file's lock or at this process's turn.
BUSY = "the database is busy (a lock is held); retry later"


class Store:
    """One database and the catalogue that governs it. Build it once at the edge (CLI, worker,
    test) and pass it to each stage.

    `after_commit`: what runs after each unit of work that committed, handed the fact versions
    it inserted and the episodes it finished (`Written`); never after a rollback, never for a
    failed attempt `run` retried. The composition root registers them (`pipeline.open_store`:
    the embedding arm's vectors, `pipeline.embedding.after_commit`), so no writer does: a hook
    that raises is logged and the committed work stands."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock = utc_now,
        catalog: Catalog | None = None,
        *,
        after_commit: Sequence[AfterCommit] = (),
    ) -> None:
        self.settings = settings
        self.after_commit = tuple(after_commit)
        self.clock = clock
        self.catalog = (
            catalog
            if catalog is not None
            else load_catalog(settings.catalog_path, settings.catalog)
        )
        self.backend = backend_for(settings.database_url)
        self.engine = self.backend.create_engine(settings.database_url, settings)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._writers = self.backend.writers(settings.database_url)
        # A read is one SELECT: on Postgres it needs no BEGIN/COMMIT round trips around it.
        autocommit = {"isolation_level": "AUTOCOMMIT"} if self.is_postgres else {}
        self._reader = self.engine.execution_options(sgam_read_only=True, **autocommit)

    @property
    def is_postgres(self) -> bool:
        return self.backend.name == "postgresql"

    # -- schema -------------------------------------------------------------------------------

    def upgrade(self) -> tuple[str | None, str]:
        """Apply every migration not yet applied (`sgam db upgrade`); returns the revision the
        database was at (None: empty) and the one it is at now."""
        from alembic import command  # only migrations need Alembic: keep it out of start-up

        before = self.revision()
        config = _alembic_config()
        with self._reachable(), self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
        return before, HEAD

    def revision(self) -> str | None:
        """The migration the database is at, or None for an empty database. Read without a
        write lock, so a busy SQLite writer never holds up a read."""
        with self.reading() as connection:
            try:
                return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
            except DBAPIError as error:
                if self.backend.failure(error) is not None:
                    raise
                return None  # no alembic_version table: nothing migrated yet

    def is_current(self) -> bool:
        return self.revision() == HEAD

    def ensure_schema(self) -> None:
        """SQLite migrates itself on first use; Postgres is migrated explicitly by an operator."""
        if self.is_current():
            return
        if self.is_postgres:
            raise SettingError(
                "SGAM_DATABASE_URL", "the database schema is not current: run `sgam db upgrade`"
            )
        self.upgrade()

    # -- units of work ------------------------------------------------------------------------

    @contextmanager
    def begin(self) -> Iterator[Unit]:
        """One transaction: committed when the block ends, rolled back when it raises; once it
        committed, the after-commit hooks run with what it wrote."""
        with self._reachable(), self._one_writer(), self._sessions() as session:
            unit = Unit(session, self.catalog, self.clock, self.settings, self.backend)
            session.info[WRITTEN] = unit.written
            with session.begin():
                yield unit
        self._committed(unit.written)

    @contextmanager
    def _one_writer(self) -> Iterator[None]:
        """This process's turn to write, where the backend has one writer at a time (SQLite,
        `Sqlite.writers`): waited for as long as the file's own lock is, then StoreBusy."""
        if self._writers is None:
            yield
            return
        turn = self._writers.lock()
        if not turn.acquire(timeout=self.settings.lock_timeout_ms / 1000):
            raise StoreBusy(BUSY)
        try:
            yield
        finally:
            turn.release()

    def _committed(self, written: Written) -> None:
        if not written:
            return
        for hook in self.after_commit:
            try:
                hook(self, written)
            except Exception:  # the unit committed: what a hook derives from it can wait
                log.warning("after-commit hook failed", exc_info=True)

    def run(self, work: Callable[[Unit], T]) -> T:
        """Run `work` in one unit of work, again from scratch after a transient failure."""
        attempts = self.settings.write_retries
        retrying = Retrying(
            stop=stop_after_attempt(attempts),
            wait=wait_random_exponential(multiplier=0.02, max=1.0),
            retry=retry_if_exception_type(StoreBusy),
        )
        try:
            for attempt in retrying:
                with attempt, self.begin() as unit:
                    return work(unit)
        except RetryError as exhausted:
            raise StoreBusy(
                f"the database stayed busy (locks held by others) through {attempts} attempts; "
                "retry later"
            ) from exhausted.last_attempt.exception()
        raise AssertionError("unreachable: tenacity either returns or raises")

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection for a single consistent SELECT."""
        with self._reachable(), self._reader.connect() as connection:
            yield connection

    def analyze(self) -> None:
        """Refresh the planner statistics of every table (what autovacuum does)."""
        from pipeline.db.models import Base

        with self._reachable(), self.engine.connect() as connection:
            self.backend.analyze(connection, [t.name for t in Base.metadata.sorted_tables])
            connection.commit()

    def scrub_after_purge(self) -> bool:
        """After a purge committed: drop erased content from the database files where that is
        cheap (SQLite). True when no erased content is left in them; otherwise `vacuum`."""
        with self._reachable():
            return self.backend.scrub_after_purge(self.engine)

    def vacuum(self, wait_s: float = 60.0) -> None:
        """Rewrite every table so that no erased or dead row version is left in the database
        files (`sgam purge-vacuum`). On PostgreSQL this first waits up to `wait_s` for the
        transactions open when it started (PurgeBlocked if some stay open), then locks each
        table while it is rewritten."""
        from pipeline.db.models import Base

        with self._reachable():
            tables = [t.name for t in Base.metadata.sorted_tables]
            self.backend.vacuum(self.engine, tables, wait_s)

    def dispose(self) -> None:
        self.engine.dispose()

    # -- failures -----------------------------------------------------------------------------

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        """Database errors as SGAM's typed errors. Messages never carry the driver's text
        beyond its first line for a connection problem (which names a host or file): a failed
        statement's text would include its SQL and bound values."""
        try:
            yield
        except DBAPIError as error:
            failure = self.backend.failure(error)
            if failure is Failure.UNAVAILABLE:
                raise StoreUnavailable(
                    f"the database is unavailable: {_first_line(error)}"
                ) from error
            if failure is Failure.MISCONFIGURED:
                raise SettingError("SGAM_DATABASE_URL", _first_line(error)) from error
            if failure is Failure.BUSY:
                raise StoreBusy(BUSY) from error
            raise


def _first_line(error: DBAPIError) -> str:
    text = str(error.orig).strip().splitlines()[0]
    return text.removeprefix("connection failed: ")


def open_store(
    settings: Settings | None = None,
    clock: Clock = utc_now,
    catalog: Catalog | None = None,
    *,
    after_commit: Sequence[AfterCommit] = (),
) -> Store:
    """A store on `settings` (default: the SGAM_* environment), its schema checked; no hook
    unless given (`pipeline.open_store` gives the embedding arm's)."""
    store = Store(settings or load_settings(), clock, catalog, after_commit=after_commit)
    store.ensure_schema()
    return store
