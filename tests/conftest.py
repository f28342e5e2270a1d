"""Shared fixtures: a migrated store on SQLite (a fresh file per test) and on the real Postgres.

The Postgres database named by SGAM_TEST_POSTGRES_URL is created and migrated once per session
and emptied before each test that uses it. Each test's SQLite file is a copy of one migrated
once per session: migrating a file costs ten times the copy's CPU, in some 800 tests.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, select

from pipeline.db.models import EventRow
from pipeline.db.store import Store, open_store
from pipeline.embedding import settle
from pipeline.settings import Settings
from tests.databases import POSTGRES_URL, create_database, empty_database
from tests.factories import FrozenClock, isolated_settings

# The suite was written against the support catalogue (passport_deadline, answer_style, ...):
# every store, CLI run and subprocess of the tests selects it (and so does
# `factories.isolated_settings`), unless a test picks another. Tests of the default personal
# catalogue load it by name (`bundled_catalog("personal")`).
os.environ["SGAM_CATALOG"] = "support"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    create_database(POSTGRES_URL)
    store = Store(isolated_settings(database_url=POSTGRES_URL))
    store.upgrade()
    store.dispose()
    return POSTGRES_URL


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to the head revision, for `database_url` to copy."""
    path = tmp_path_factory.mktemp("template") / "sgam.sqlite3"
    store = Store(isolated_settings(database_url=f"sqlite:///{path}"))
    store.upgrade()
    store.dispose()
    with sqlite3.connect(path) as connection:  # all in the file itself, none left in its WAL
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database on each backend. Afterwards, every event the test wrote
    must be of a registered kind whose payload round-trips through its model."""
    if request.param == "sqlite":
        copy = tmp_path / "sgam.sqlite3"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), copy)
        url = f"sqlite:///{copy}"
    else:
        url = request.getfixturevalue("postgres_url")
        empty_database(url)
    yield url
    settle()  # what a write queued for the embedding arm lands here, not in the next test's
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
    """The test database's settings, every other field at its default whatever the
    developer's environment or `.env` says."""
    return isolated_settings(database_url=database_url)


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


# A test marked slow takes seconds where most take milliseconds: about this many of them.
SLOW_WEIGHT = 20


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files with the most work first (a slow test counts SLOW_WEIGHT times), each file's
    tests in their own order: xdist hands files out in this order (`--no-loadscope-reorder`
    in the Makefile), so a long file never starts last and holds one worker alone at the end."""
    weight: dict[Path, int] = {}
    for item in items:
        weight[item.path] = weight.get(item.path, 0) + (
            SLOW_WEIGHT if item.get_closest_marker("slow") else 1
        )
    first = {path: rank for rank, path in enumerate(sorted(weight, key=lambda p: -weight[p]))}
    items.sort(key=lambda item: first[item.path])
