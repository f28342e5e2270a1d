"""The database handle: engine, migrations, units of work with bounded retries, reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib.resources import files
from typing import TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import sessionmaker
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from pipeline.catalog.loader import load_catalog
from pipeline.db.backends import backend_for
from pipeline.db.unit import Clock, Unit
from pipeline.errors import InvalidInput, StoreBusy, StoreUnavailable
from pipeline.settings import Settings, load_settings
from schemas.catalog import Catalog

T = TypeVar("T")


def utc_now() -> datetime:
    return datetime.now(UTC)


def _alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(files("pipeline.db") / "migrations"))
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
        self.backend = backend_for(settings.database_url)
        self.engine = self.backend.create_engine(settings.database_url, settings)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # A read is one SELECT: on Postgres it needs no BEGIN/COMMIT round trips around it.
        autocommit = {"isolation_level": "AUTOCOMMIT"} if self.is_postgres else {}
        self._reader = self.engine.execution_options(sgam_read_only=True, **autocommit)

    @property
    def is_postgres(self) -> bool:
        return self.backend.name == "postgresql"

    # -- schema -------------------------------------------------------------------------------

    def upgrade(self) -> None:
        """Apply every migration not yet applied (`sgam db upgrade`)."""
        config = _alembic_config()
        with self._reachable(), self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def is_current(self) -> bool:
        head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
        with self._reachable(), self.engine.connect() as connection:
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

    # -- units of work ------------------------------------------------------------------------

    @contextmanager
    def begin(self) -> Iterator[Unit]:
        """One transaction: committed when the block ends, rolled back when it raises."""
        with self._reachable(), self._sessions() as session, session.begin():
            yield Unit(session, self.catalog, self.clock, self.settings, self.backend)

    def run(self, work: Callable[[Unit], T]) -> T:
        """Run `work` in one unit of work, again from scratch after a transient failure."""
        retrying = Retrying(
            stop=stop_after_attempt(self.settings.write_retries),
            wait=wait_random_exponential(multiplier=0.02, max=1.0),
            retry=retry_if_exception(self._is_transient),
        )
        try:
            for attempt in retrying:
                with attempt, self.begin() as unit:
                    return work(unit)
        except RetryError as exhausted:
            raise StoreBusy(
                f"gave up after {self.settings.write_retries} attempts: "
                f"{type(exhausted.last_attempt.exception()).__name__}"
            ) from exhausted
        raise AssertionError("unreachable: tenacity either returns or raises")

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A connection for a single consistent SELECT."""
        with self._reachable(), self._reader.connect() as connection:
            yield connection

    def dispose(self) -> None:
        self.engine.dispose()

    # -- failures -----------------------------------------------------------------------------

    def _is_transient(self, error: BaseException) -> bool:
        return isinstance(error, DBAPIError) and self.backend.is_transient(error)

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        try:
            yield
        except DBAPIError as error:
            if self.backend.is_unavailable(error):
                # The driver's first line names the host or file, never a stored value.
                first_line = str(error.orig).strip().splitlines()[0]
                raise StoreUnavailable(f"the database is unavailable: {first_line}") from error
            raise


def open_store(
    settings: Settings | None = None, clock: Clock = utc_now, catalog: Catalog | None = None
) -> Store:
    """A store on `settings` (default: the SGAM_* environment), its schema checked."""
    store = Store(settings or load_settings(), clock, catalog)
    store.ensure_schema()
    return store
