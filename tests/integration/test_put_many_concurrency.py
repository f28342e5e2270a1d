"""Several OS processes calling put_many at once, with batches over the same keys in different
orders, finish without deadlock and leave the ledger's invariants intact.

The same set-up as test_concurrency: each process opens its own store, waits at a barrier and
then writes. The lock timeout is short, so a lock cycle that Postgres did not break would
surface as an error (and a hung process as a join timeout), not as a hang of the suite.
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import random
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from multiprocessing.synchronize import Barrier
from typing import Any

import pytest
from sqlalchemy import text

import pipeline
from pipeline.db import guards
from pipeline.db.store import Store, open_store
from pipeline.errors import ConflictError
from pipeline.settings import Settings
from tests.integration.ledger_helpers import stop_writers, writer_processes

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

PROCESSES = 4
ROUNDS = 12
BATCH = 12  # commands per put_many: every key of the tenant twice
# Below Postgres's deadlock_timeout (1 s): a lock cycle fails fast as lock_not_available.
LOCK_TIMEOUT_MS = 500
SUBJECTS = ["mira", "olaf"]
VALUES = {
    "home_city": ["Berlin", "Paris", "Rome"],
    "account_plan": ["free", "pro", "enterprise"],
    "languages": ["de", "en", "fr"],
}
STARTS = [f"2026-0{month}-01T00:00:00Z" for month in range(1, 6)]
TRUST = ["verified", "verified", "inferred", "user_confirmed", "untrusted"]

# (kind of outcome, process, round, position in batch)
Report = tuple[str, int, int, int]


def batches_for(tenant: str, writer: int) -> list[list[dict[str, Any]]]:
    """ROUNDS batches that each touch every key of the tenant, shuffled per round and writer,
    so that two processes lock the same keys in different orders."""
    rng = random.Random(f"{writer}")
    keys = [(subject, attribute) for subject in SUBJECTS for attribute in VALUES]
    rounds = []
    for round_ in range(ROUNDS):
        batch = []
        for subject, attribute in keys * (BATCH // len(keys)):
            start = rng.randrange(len(STARTS))
            closed = start + 1 < len(STARTS) and rng.random() < 0.2
            batch.append(
                {
                    "tenant_id": tenant,
                    "subject": subject,
                    "attribute": attribute,
                    "value": rng.choice(VALUES[attribute]),
                    "valid_from": STARTS[start],
                    "valid_to": STARTS[start + 1] if closed else None,
                    "trust": rng.choice(TRUST),
                    "source_episode_id": f"w{writer}r{round_}",
                }
            )
        rng.shuffle(batch)
        rounds.append(batch)
    return rounds


def _batch_writer(
    url: str,
    barrier: Barrier,
    results: multiprocessing.Queue[list[Report]],
    writer: int,
    rounds: list[list[dict[str, Any]]],
    chunk: int,
) -> None:
    """Child process: put_many each round's batch, `chunk` commands per transaction, right
    after every sibling is ready; report the kind of each outcome. Stops at an exception."""
    store = open_store(Settings(database_url=url, lock_timeout_ms=LOCK_TIMEOUT_MS))
    try:
        barrier.wait(timeout=120)
        for round_, batch in enumerate(rounds):
            try:
                outcomes = pipeline.put_many(store, batch, chunk=chunk)
            except Exception as error:  # reported to the parent, which fails the test
                results.put([(f"error {type(error).__name__}: {error}", writer, round_, -1)])
                for _ in rounds[round_ + 1 :]:
                    results.put([])  # one message per round; the rest are not written
                return
            report: list[Report] = []
            for position, outcome in enumerate(outcomes):
                if isinstance(outcome, pipeline.PutResult):
                    kind = "written" if outcome.written else "restated"
                elif isinstance(outcome, ConflictError):
                    kind = type(outcome).__name__
                else:
                    kind = f"error {type(outcome).__name__}: {outcome}"
                report.append((kind, writer, round_, position))
            if len(outcomes) != len(batch):
                report.append((f"error {len(outcomes)} outcomes", writer, round_, -1))
            results.put(report)
    finally:
        store.dispose()


def run_batches(url: str, work: list[list[list[dict[str, Any]]]], chunk: int) -> list[Report]:
    context = writer_processes()
    barrier = context.Barrier(len(work))
    results: multiprocessing.Queue[list[Report]] = context.Queue()
    processes = [
        context.Process(target=_batch_writer, args=(url, barrier, results, writer, rounds, chunk))
        for writer, rounds in enumerate(work)
    ]
    for process in processes:
        process.start()
    reports: list[Report] = []
    try:
        for _ in range(sum(len(rounds) for rounds in work)):
            reports += results.get(timeout=120)
    except queue_module.Empty:
        pytest.fail("a put_many did not return within two minutes: a writer hung or died")
    finally:
        stop_writers(processes)
    assert [process.exitcode for process in processes] == [0] * len(processes)
    return reports


def holding_rows(store: Store, tenant: str) -> list[dict[str, Any]]:
    slot = ", ".join(guards.SLOT_COLUMNS)
    with store.reading() as connection:
        rows = connection.execute(
            text(
                f"SELECT {slot}, fact_id, valid_from, valid_to FROM facts "
                f"WHERE tenant_id = :tenant AND {guards.HOLDING}"
            ),
            {"tenant": tenant},
        )
        return [dict(row._mapping) for row in rows]


def assert_slot_invariants(store: Store, tenant: str) -> None:
    """Per slot: at most one open current version, and no two holding intervals overlap; per
    fact: one current version."""
    by_slot: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in holding_rows(store, tenant):
        by_slot[tuple(row[column] for column in guards.SLOT_COLUMNS)].append(row)
    assert by_slot, "something holds"
    for slot, rows in by_slot.items():
        assert sum(row["valid_to"] is None for row in rows) <= 1, f"two open facts in {slot}"
        ordered = sorted(rows, key=lambda row: row["valid_from"])
        for before, after in zip(ordered, ordered[1:], strict=False):
            assert before["valid_to"] is not None
            assert before["valid_to"] <= after["valid_from"], f"overlap in {slot}"
    with store.reading() as connection:
        doubled = connection.execute(
            text(
                "SELECT fact_id FROM facts WHERE tenant_id = :tenant AND superseded_at IS NULL "
                "GROUP BY fact_id HAVING count(*) > 1"
            ),
            {"tenant": tenant},
        ).all()
    assert doubled == []


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[Store]:
    opened = open_store(Settings(database_url=postgres_url))
    yield opened
    opened.dispose()


@pytest.mark.parametrize(
    "chunk",
    [
        pytest.param(1, id="one-command-transactions"),
        pytest.param(BATCH // 2, id="many-keys-per-transaction"),
    ],
)
def test_concurrent_put_many_over_overlapping_keys_in_different_orders(
    postgres_url: str, postgres_store: Store, chunk: int
) -> None:
    store = postgres_store
    tenant = f"batch-{uuid.uuid4()}"
    work = [batches_for(tenant, writer) for writer in range(PROCESSES)]
    reports = run_batches(postgres_url, work, chunk)

    errors = [report for report in reports if report[0].startswith("error")]
    assert errors == [], "every outcome is a PutResult or a typed refusal"
    commands = sum(len(batch) for rounds in work for batch in rounds)
    assert len(reports) == commands, "one outcome per command"
    kinds = Counter(report[0] for report in reports)
    assert set(kinds) <= {"written", "restated", "FactConflict", "TrustRejected"}
    assert kinds["written"] > 0, kinds
    assert kinds["FactConflict"] + kinds["TrustRejected"] > 0, kinds

    assert_slot_invariants(store, tenant)
    with store.reading() as connection:
        claims, accepted_events, refusals = (
            connection.execute(text(query), {"tenant": tenant}).scalar_one()
            for query in (
                "SELECT count(*) FROM claims WHERE tenant_id = :tenant",
                "SELECT count(*) FROM events WHERE tenant_id = :tenant "
                "AND kind IN ('write', 'restate', 'quarantine')",
                "SELECT count(*) FROM events WHERE tenant_id = :tenant "
                "AND kind IN ('conflict', 'reject')",
            )
        )
    # No idempotency keys here: every accepted command stored exactly one claim and logged
    # exactly one primary event, and every refusal one refusal event; nothing was doubled by
    # a retried transaction.
    assert claims == kinds["written"] + kinds["restated"]
    assert accepted_events == claims
    assert refusals == kinds["FactConflict"] + kinds["TrustRejected"]
