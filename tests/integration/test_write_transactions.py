"""A write's transaction on PostgreSQL opens in the pipeline of its locks and reads, and `put`
and `put_many` send their COMMIT with their inserts (`pipeline/db/pipelined.py`,
`inserts.Flush`): a write in a caller's unit still commits or rolls back with that unit, a put
that raises leaves nothing, and the connection goes back to the pool as the driver had it."""

from __future__ import annotations

import pytest

import pipeline
from pipeline.db.store import Store
from pipeline.errors import IdempotencyConflict
from pipeline.ledger.batch import write_fact, write_many
from tests.factories import fact_command
from tests.integration.ledger_helpers import LEDGER_TABLES, ledger_counts


class _Abort(Exception):
    pass


def test_writes_in_a_callers_unit_roll_back_with_it(store: Store, tenant: str) -> None:
    def aborted() -> None:
        with store.begin() as unit:
            write_fact(unit, fact_command(tenant_id=tenant, subject="one"))
            write_many(unit, [fact_command(tenant_id=tenant, subject=f"s{n}") for n in range(20)])
            raise _Abort

    with pytest.raises(_Abort):
        aborted()
    assert ledger_counts(store, tenant_id=tenant) == dict.fromkeys(LEDGER_TABLES, 0)


def test_writes_in_a_callers_unit_commit_with_it(store: Store, tenant: str) -> None:
    with store.begin() as unit:
        write_fact(unit, fact_command(tenant_id=tenant, subject="one"))
        write_many(unit, [fact_command(tenant_id=tenant, subject=f"s{n}") for n in range(20)])
    assert ledger_counts(store, tenant_id=tenant) == {"facts": 21, "claims": 21, "events": 21}


def test_a_put_that_raises_leaves_nothing(store: Store, tenant: str) -> None:
    pipeline.put(store, fact_command(tenant_id=tenant, subject="one", idempotency_key="k"))
    before = ledger_counts(store, tenant_id=tenant)
    with pytest.raises(IdempotencyConflict):
        pipeline.put(
            store,
            fact_command(tenant_id=tenant, subject="one", value="other", idempotency_key="k"),
        )
    assert (
        ledger_counts(store, tenant_id=tenant)
        == before
        == {
            "facts": 1,
            "claims": 1,
            "events": 1,
        }
    )


def test_the_connection_goes_back_idle_and_out_of_autocommit(store: Store, tenant: str) -> None:
    pipeline.put(store, fact_command(tenant_id=tenant, subject="one"))
    later = {"value": "Paris", "valid_from": "2026-02-01T00:00:00Z"}
    assert pipeline.put(store, fact_command(tenant_id=tenant, subject="one", **later)).written
    pipeline.put_many(store, [fact_command(tenant_id=tenant, subject=f"s{n}") for n in range(20)])
    if not store.is_postgres:
        return  # SQLite's driver runs its own BEGIN (`backends._sqlite_begin`)
    from psycopg import pq

    stored = ledger_counts(store, tenant_id=tenant)["facts"]
    with store.engine.connect() as connection:
        driver = connection.connection.driver_connection
        assert driver is not None
        assert driver.autocommit is False
        assert driver.pgconn.transaction_status == pq.TransactionStatus.IDLE
        ordinary = connection.begin()  # a transaction of the ordinary kind still rolls back
        connection.exec_driver_sql("DELETE FROM facts WHERE tenant_id = %s", (tenant,))
        ordinary.rollback()
    assert ledger_counts(store, tenant_id=tenant)["facts"] == stored >= 22
