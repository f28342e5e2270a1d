"""A long-lived connection on a new database re-plans its prepared statements as the ledger
grows, so the slot reads and the idempotency lookup move to their indexes
(`pipeline.db.replan`).

The tables are analysed while empty, then one Store writes facts one at a time (psycopg
prepares the statements, PostgreSQL settles on generic plans for empty tables), then grows the
ledger to 630 facts. The generic plan each hot statement now has on that connection must read
an index. The write path's reads are fenced per key (`OFFSET 0`) and keep their index scans
even without the re-planning check; the plain slot read of another stage is the statement the
check exists for. The check's rule itself is tested in tests/unit/test_replan.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from sqlalchemy import create_engine, make_url, select, text

import pipeline
from pipeline.db import replan
from pipeline.db.models import FactRow
from pipeline.db.store import Store
from pipeline.ledger.slots import in_slot
from pipeline.settings import Settings
from tests.databases import empty_database

pytestmark = pytest.mark.postgres

# A marker of each hot statement's SQL text in pg_prepared_statements.
HOT_STATEMENTS = {
    "claims of a slot": "FROM claims WHERE claims.tenant_id = k.tenant_id",
    "current facts of a slot": "FROM facts WHERE facts.tenant_id = k.tenant_id",
    "idempotency lookup": "FROM idempotency_keys WHERE idempotency_keys.tenant_id = k.tenant_id",
    # The write path's reads are fenced per key and keep their index scans whatever the
    # statistics say; a plain statement of another stage is what the check re-plans.
    "slot read of another stage": "SELECT facts.fact_id FROM facts WHERE",
}
_SLOT_VERSIONS = select(FactRow.fact_id).where(*in_slot(FactRow), FactRow.superseded_at.is_(None))


def command(number: int) -> dict[str, str]:
    return {
        "tenant_id": f"t{number % 7}",
        "subject": f"person-{number}",
        "attribute": "home_city",
        "value": f"City {number}",
        "valid_from": "2026-01-01T00:00:00Z",
        "source_episode_id": f"ep-{number}",
        "idempotency_key": f"key-{number}",
    }


@pytest.fixture
def fresh_url(postgres_url: str) -> Iterator[str]:
    """A new database next to the test database, migrated: no statistics from earlier tests
    (TRUNCATE and an ANALYZE of empty tables keep the column statistics of earlier rows)."""
    url = make_url(postgres_url)
    fresh = url.set(database=f"{url.database}_fresh_plans")
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{fresh.database}"'))
        connection.execute(text(f'CREATE DATABASE "{fresh.database}"'))
    rendered = fresh.render_as_string(hide_password=False)
    store = Store(Settings(database_url=rendered))
    store.upgrade()
    store.dispose()
    yield rendered
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{fresh.database}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def grown_store(fresh_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setattr(replan, "CHECK_SECONDS", 0.0)  # check at every checkout
    store = Store(Settings(database_url=fresh_url))
    store.analyze()  # empty tables, analysed: the planner trusts that they are empty
    for number in range(30):  # prepared, planned 5 times, then one generic plan each
        pipeline.put(store, command(number))
        _read_slot(store, command(number))
    outcomes = pipeline.put_many(store, (command(n) for n in range(30, 600)), chunk=200)
    assert all(isinstance(outcome, pipeline.PutResult) for outcome in outcomes)
    counted(store, "claims", 600)
    for number in range(600, 630):  # prepared and planned again, if they were dropped
        pipeline.put(store, command(number))
        _read_slot(store, command(number))
    yield store
    store.dispose()


def _read_slot(store: Store, written: dict[str, str]) -> None:
    key = {name: written[name] for name in ("tenant_id", "subject", "attribute")}
    with store.begin() as unit:
        unit.session.execute(
            _SLOT_VERSIONS, key | {"agent_id": "default", "purpose": "default", "slot": ""}
        )


def counted(store: Store, table: str, rows: int) -> None:
    """Wait (at most 10 s) until the statistics count `rows` live rows in `table`: a backend
    reports its writes within a second or two."""
    deadline = time.monotonic() + 10
    with store.reading() as connection:
        while True:
            live = connection.execute(
                text("SELECT pg_stat_get_live_tuples(CAST(:table AS regclass))"), {"table": table}
            ).scalar_one()
            if live >= rows or time.monotonic() > deadline:
                break
            time.sleep(0.1)


def generic_plans(store: Store) -> dict[str, str]:
    """The generic plan of each hot prepared statement on the store's pooled connections
    (taken out of the pool all at once, so that each is inspected)."""
    plans = {}
    with ExitStack() as stack:
        pooled = [
            stack.enter_context(store.engine.connect())
            for _ in range(store.engine.pool.checkedin())
        ]
        for connection in pooled:
            raw = connection.connection.dbapi_connection
            assert raw is not None
            prepared = raw.execute(
                "SELECT name, statement, cardinality(parameter_types) FROM pg_prepared_statements"
            ).fetchall()
            raw.execute("SET plan_cache_mode = force_generic_plan")  # the cached plan if any
            for label, marker in HOT_STATEMENTS.items():
                for name, sql, count in prepared:
                    if marker in " ".join(sql.split()):
                        nulls = ", ".join(["NULL"] * count)
                        rows = raw.execute(f"EXPLAIN EXECUTE {name}({nulls})").fetchall()
                        plans[f"{label} ({name})"] = "\n".join(row[0] for row in rows)
            raw.execute("RESET plan_cache_mode")
            connection.rollback()
    for label in HOT_STATEMENTS:
        assert any(key.startswith(label) for key in plans), f"the {label} was not prepared"
    return plans


def test_the_hot_statements_read_indexes_once_the_ledger_has_grown(grown_store: Store) -> None:
    with grown_store.reading() as connection:
        count = connection.execute(text("SELECT count(*) FROM claims")).scalar_one()
    assert count == 630
    plans = generic_plans(grown_store)
    scans = {label: plan for label, plan in plans.items() if "Seq Scan" in plan}
    assert not scans, f"statements still planned for empty tables: {scans}"
    assert all("Index" in plan for plan in plans.values()), plans


def test_a_connection_the_server_closed_is_replaced_at_the_size_check(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty_database(postgres_url)
    monkeypatch.setattr(replan, "CHECK_SECONDS", 0.0)
    store = Store(Settings(database_url=postgres_url))
    try:
        with store.reading() as connection:
            backend = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
        outside = create_engine(postgres_url)  # not the store's pool: it would hand back `backend`
        with outside.begin() as other:
            other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": backend})
        outside.dispose()
        assert pipeline.put(store, command(1)).fact.value == "City 1"
    finally:
        store.dispose()


def _flush_statistics(store: Store) -> None:
    """Have the store's connection report its writes to the statistics at its next commit
    (an idle backend reports them only after 10 s otherwise)."""
    with store.begin() as unit:
        unit.session.execute(text("SELECT pg_stat_force_next_flush()"))


def _wait_for_live_rows(url: str, table: str, rows: int) -> None:
    """Wait (at most 10 s) until the statistics, read on a connection of its own, count
    `rows` live rows in `table`."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    deadline = time.monotonic() + 10
    try:
        with engine.connect() as connection:
            while time.monotonic() < deadline:
                live = connection.execute(
                    text("SELECT pg_stat_get_live_tuples(CAST(:table AS regclass))"),
                    {"table": table},
                ).scalar_one()
                if live >= rows:
                    return
                time.sleep(0.1)
    finally:
        engine.dispose()
    raise AssertionError(f"the statistics never counted {rows} rows in {table}")


def test_statements_prepared_between_two_replans_are_not_lost(
    fresh_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection re-planned while it had nothing prepared, then prepared statements, then
    re-planned again: its statements must be prepared anew, not executed by names the server
    has dropped. (psycopg notices a `DEALLOCATE ALL` only when it runs with statements
    prepared, and later only if it never ran before on the connection; a large inline ingest
    on a new database failed with `prepared statement "_pg3_14" does not exist`.)"""
    monkeypatch.setattr(replan, "CHECK_SECONDS", 0.0)
    store = Store(Settings(database_url=fresh_url))
    writer = Store(Settings(database_url=fresh_url))  # grows the tables on its own connection
    try:
        _read_slot(store, command(0))  # the first check: the sizes of the empty tables
        pipeline.put_many(writer, (command(n) for n in range(600)), chunk=200)
        _flush_statistics(writer)
        _wait_for_live_rows(fresh_url, "claims", 600)
        for number in range(8):  # re-planned with nothing prepared, then prepared
            _read_slot(store, command(number))
        pipeline.put_many(writer, (command(n) for n in range(600, 1300)), chunk=200)
        _flush_statistics(writer)
        _wait_for_live_rows(fresh_url, "claims", 1300)
        for number in range(8):  # re-planned again: the same statements run once more
            _read_slot(store, command(number))
    finally:
        store.dispose()
        writer.dispose()
