"""Replay is all or nothing: killed half-way, it leaves the target empty, never a partial
ledger that commands would accept as a normal one; it migrates an empty target itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, inspect, make_url, select, text

import pipeline
from pipeline.db.models import ClaimRow, EventRow, FactRow
from pipeline.db.store import open_store
from pipeline.settings import Settings
from tests.databases import POSTGRES_URL

SGAM = os.path.join(os.path.dirname(sys.executable), "sgam")
CITIES = ["Berlin", "Paris", "Rome", "Oslo", "Lima"]
EVENTS = 3000  # a replay of about 2 s on SQLite: time to kill it in the middle


@pytest.fixture(scope="module")
def source_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A ledger with thousands of events, big enough that its replay takes seconds."""
    url = f"sqlite:///{tmp_path_factory.mktemp('source') / 'source.sqlite3'}"
    store = open_store(Settings(database_url=url))
    try:
        outcomes = pipeline.put_many(
            store,
            (
                {
                    "tenant_id": "acme",
                    "subject": f"s{n % 300}",
                    "attribute": "home_city",
                    "value": CITIES[n % 5],
                    "valid_from": f"2026-{n % 12 + 1:02d}-01T00:00:00Z",
                    "source_episode_id": f"e{n}",
                }
                for n in range(EVENTS)
            ),
        )
        assert all(isinstance(outcome, pipeline.PutResult) for outcome in outcomes)
    finally:
        store.dispose()
    return url


def _counts(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {
                table.__tablename__: connection.scalar(select(func.count()).select_from(table)) or 0
                for table in (EventRow, FactRow, ClaimRow)
            }
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A target with no schema at all: replay must migrate it."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'target.sqlite3'}"
        return
    url = make_url(POSTGRES_URL)
    target = url.set(database=f"{url.database}_replay_kill_{os.getpid()}")
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{target.database}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{target.database}"'))
    yield target.render_as_string(hide_password=False)
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{target.database}" WITH (FORCE)'))
    admin.dispose()


def _wait_for_schema(url: str) -> None:
    """Until replay has migrated the target (at most 60 s)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        engine = create_engine(url)
        try:
            with engine.connect() as connection:
                if "alembic_version" in inspect(connection).get_table_names():
                    return
        finally:
            engine.dispose()
        time.sleep(0.05)
    pytest.fail("replay did not migrate the target within a minute")


def _replay(source_url: str, target_url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [SGAM, "replay", "--to", target_url],
        env={**os.environ, "SGAM_DATABASE_URL": source_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
def test_a_killed_replay_leaves_an_empty_target_and_a_second_one_completes(
    source_url: str, empty_target: str
) -> None:
    total = _counts(source_url)
    running = _replay(source_url, empty_target)
    _wait_for_schema(empty_target)  # migrated (and committed): the events come next
    time.sleep(0.5)  # well into the events, which take seconds
    still_running = running.poll() is None
    running.send_signal(signal.SIGKILL)
    running.communicate()
    assert still_running, "replay finished before the kill; make the source larger"

    assert _counts(empty_target) == {"events": 0, "facts": 0, "claims": 0}

    done = _replay(source_url, empty_target)
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert _counts(empty_target) == total


def test_replay_errors_name_the_target() -> None:
    missing = "postgresql://postgres@127.0.0.1:5432/no_such_replay_target"
    done = subprocess.run(
        [SGAM, "replay", "--to", missing],
        capture_output=True,
        text=True,
        env={**os.environ, "SGAM_DATABASE_URL": "sqlite:///:memory:"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("sgam: --to: "), done.stderr
    assert "SGAM_DATABASE_URL" not in done.stderr
