"""Shared fixtures: a migrated store on SQLite (a fresh file per test) and on the real Postgres.

The Postgres database named by SGAM_TEST_POSTGRES_URL is created and migrated once per session
and emptied before each test that uses it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, make_url, select, text

from pipeline.db.models import Base, EventRow
from pipeline.db.store import Store, open_store
from pipeline.settings import Settings

POSTGRES_URL = os.environ.get(
    "SGAM_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/sgam_test"
)
TABLES = tuple(table.name for table in Base.metadata.sorted_tables)


def _create_database(url: str) -> None:
    parsed = make_url(url)
    admin = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        exists = connection.execute(
            text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": parsed.database}
        ).first()
        if not exists:
            connection.execute(text(f'CREATE DATABASE "{parsed.database}"'))
    admin.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    _create_database(POSTGRES_URL)
    store = Store(Settings(database_url=POSTGRES_URL))
    store.upgrade()
    store.dispose()
    return POSTGRES_URL


def empty_database(url: str) -> None:
    """Delete every row of every table (and restart Postgres's id sequences)."""
    engine = create_engine(url)
    with engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            connection.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY"))
        else:
            for table in reversed(Base.metadata.sorted_tables):
                connection.execute(table.delete())  # rowids restart: no AUTOINCREMENT
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database on each backend. Afterwards, every event the test wrote
    must be of a registered kind whose payload round-trips through its model."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'sgam.sqlite3'}"
    else:
        url = request.getfixturevalue("postgres_url")
        empty_database(url)
    yield url
    check_logged_events(url)


def check_logged_events(url: str) -> None:
    from schemas.event_kinds import parse_payload

    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            if not inspect(connection).has_table("events"):
                return
            rows = connection.execute(select(EventRow.kind, EventRow.command)).all()
    finally:
        engine.dispose()
    for kind_name, stored in rows:
        payload = parse_payload(kind_name, stored)
        if payload is not None:
            assert payload.model_dump(mode="json") == stored, f"{kind_name} does not round-trip"


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url)


class FrozenClock:
    """A clock the test moves by hand; each reading advances a microsecond so that
    transaction times stay distinct, as they are in real time."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        from datetime import timedelta

        self.now += timedelta(microseconds=1)
        return self.now

    def set(self, moment: datetime) -> None:
        self.now = moment


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime(2026, 11, 29, 12, 0, tzinfo=UTC))


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    """A store on the real clock."""
    opened = open_store(settings)
    yield opened
    opened.dispose()


@pytest.fixture
def clocked_store(settings: Settings, clock: FrozenClock) -> Iterator[Store]:
    """A store whose clock the test controls."""
    opened = open_store(settings, clock=clock)
    yield opened
    opened.dispose()


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Callable[[], None]:
    """Point the in-process CLI at the test database."""
    monkeypatch.setenv("SGAM_DATABASE_URL", database_url)
    return lambda: None
