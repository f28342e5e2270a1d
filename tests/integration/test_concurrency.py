"""Several OS processes writing one key at the same moment behave like one sequential writer.

Each process opens its own store, waits at a barrier and then writes. Runs on Postgres (advisory
key locks) and on SQLite (BEGIN IMMEDIATE across processes).
"""

from __future__ import annotations

import multiprocessing
import queue as queue_module
import uuid
from collections import Counter
from multiprocessing.synchronize import Barrier
from typing import Any

import pytest

import pipeline
from pipeline.db.store import Store, open_store
from pipeline.errors import ConflictError
from pipeline.settings import Settings
from tests.integration.ledger_helpers import (
    assert_no_overlap,
    count_rows,
    stop_writers,
    writer_processes,
)

pytestmark = pytest.mark.slow

PROCESSES = 6
Outcome = tuple[str, str, bool | None, str | None]


def _writer(
    url: str,
    barrier: Barrier,
    results: multiprocessing.Queue[Outcome],
    commands: list[dict[str, Any]],
) -> None:
    """Child process: write `commands` in order right after every sibling is ready."""
    store = open_store(Settings(database_url=url))
    try:
        barrier.wait(timeout=120)
        for command in commands:
            source = command["source_episode_id"]
            try:
                result = pipeline.put(store, command)
            except ConflictError as error:
                results.put((type(error).__name__, source, None, error.existing_fact_id))
            except Exception as error:  # reported to the parent, which fails the test
                results.put(("error", source, None, f"{type(error).__name__}: {error}"))
            else:
                results.put(("ok", source, result.written, result.fact.fact_id))
    finally:
        store.dispose()


def run_concurrently(url: str, batches: list[list[dict[str, Any]]]) -> list[Outcome]:
    """Run one process per batch, all starting together; return every put's outcome."""
    context = writer_processes()
    barrier = context.Barrier(len(batches))
    results: multiprocessing.Queue[Outcome] = context.Queue()
    processes = [
        context.Process(target=_writer, args=(url, barrier, results, batch)) for batch in batches
    ]
    for process in processes:
        process.start()
    outcomes: list[Outcome] = []
    try:
        for _ in range(sum(len(batch) for batch in batches)):
            outcomes.append(results.get(timeout=120))
    except queue_module.Empty:
        pytest.fail(f"only {len(outcomes)} puts returned: a writer hung or died")
    finally:
        stop_writers(processes)
    assert [process.exitcode for process in processes] == [0] * len(processes)
    errors = [outcome for outcome in outcomes if outcome[0] == "error"]
    assert errors == [], "no put may fail with an unhandled database error"
    return outcomes


def key_of(tenant: str) -> dict[str, str]:
    return {"tenant_id": tenant, "subject": "mira", "attribute": "home_city"}


def ledger(store: Store, key: dict[str, str]) -> list[tuple[Any, ...]]:
    return [
        (fact.valid_from, fact.valid_to, fact.value, fact.trust, fact.source_episode_id)
        for fact in pipeline.history(store, key)
    ]


def test_concurrent_writers_of_different_valid_froms_match_a_sequential_run(
    database_url: str, store: Store
) -> None:
    concurrent, sequential = key_of(f"conc-{uuid.uuid4()}"), key_of(f"seq-{uuid.uuid4()}")
    values = ["Berlin", "Paris", "Paris", "Rome", "Oslo", "Berlin"]

    def batch(key: dict[str, str], writer: int) -> list[dict[str, Any]]:
        # Writer w owns days w, w+6 and w+12: every process cuts into its siblings' intervals.
        return [
            {
                **key,
                "value": values[(writer + round_) % len(values)],
                "valid_from": f"2026-01-{1 + writer + 6 * round_:02d}T00:00:00Z",
                "valid_to": "2026-03-01T00:00:00Z" if writer == 3 and round_ == 2 else None,
                "source_episode_id": f"w{writer}r{round_}",
            }
            for round_ in range(3)
        ]

    outcomes = run_concurrently(database_url, [batch(concurrent, w) for w in range(PROCESSES)])
    assert {outcome[0] for outcome in outcomes} == {"ok"}

    for writer in range(PROCESSES):
        for command in batch(sequential, writer):
            pipeline.put(store, command)

    assert ledger(store, concurrent) == ledger(store, sequential)
    assert_no_overlap(pipeline.history(store, concurrent))
    assert count_rows(store, "claims", tenant_id=concurrent["tenant_id"]) == 3 * PROCESSES
    for moment in ("2026-01-01T12:00:00Z", "2026-01-10T00:00:00Z", "2026-02-15T00:00:00Z"):
        at_concurrent = pipeline.get(store, {**concurrent, "at": moment})
        at_sequential = pipeline.get(store, {**sequential, "at": moment})
        assert [f.value for f in at_concurrent] == [f.value for f in at_sequential]


def test_concurrent_conflicting_writers_at_one_valid_from_have_exactly_one_winner(
    database_url: str, store: Store
) -> None:
    key = key_of(f"clash-{uuid.uuid4()}")
    batches = [
        [
            {
                **key,
                "value": f"city-{writer}",
                "valid_from": "2026-06-03T10:00:00Z",
                "source_episode_id": f"w{writer}",
            }
        ]
        for writer in range(PROCESSES)
    ]
    outcomes = run_concurrently(database_url, batches)
    kinds = Counter(outcome[0] for outcome in outcomes)
    assert kinds == Counter({"ok": 1, "FactConflict": PROCESSES - 1})
    (winner,) = [outcome for outcome in outcomes if outcome[0] == "ok"]
    assert winner[2] is True
    assert {outcome[3] for outcome in outcomes} == {winner[3]}, "conflicts name the winner"

    (current,) = pipeline.get(store, {**key, "at": "2026-06-04T00:00:00Z"})
    assert current.fact_id == winner[3]
    assert current.source_episode_id == winner[1]
    tenant = key["tenant_id"]
    assert count_rows(store, "facts", tenant_id=tenant) == 1, "nothing duplicated"
    assert count_rows(store, "claims", tenant_id=tenant) == 1
    assert count_rows(store, "events", tenant_id=tenant, kind="write") == 1
    assert count_rows(store, "events", tenant_id=tenant, kind="conflict") == PROCESSES - 1


def test_concurrent_writers_of_different_trust_leave_the_highest_trust_winning(
    database_url: str, store: Store
) -> None:
    key = key_of(f"trust-{uuid.uuid4()}")
    by_trust = {"inferred": "Rome", "verified": "Paris", "user_confirmed": "Berlin"}
    levels = ["inferred", "verified", "user_confirmed", "inferred", "verified", "user_confirmed"]
    batches = [
        [
            {
                **key,
                "value": by_trust[level],
                "valid_from": "2026-06-03T10:00:00Z",
                "trust": level,
                "source_episode_id": f"w{writer}",
            }
        ]
        for writer, level in enumerate(levels)
    ]
    outcomes = run_concurrently(database_url, batches)
    assert {outcome[0] for outcome in outcomes} <= {"ok", "TrustRejected"}
    (current,) = pipeline.get(store, {**key, "at": "2026-06-04T00:00:00Z"})
    assert (current.value, current.trust.value) == ("Berlin", "user_confirmed")
    assert [fact.value for fact in pipeline.history(store, key)] == ["Berlin"]
    # Both user_confirmed writes agree: one wrote, the other restated.
    confirmed = [o for o in outcomes if o[1] in ("w2", "w5")]
    assert sorted(o[2] for o in confirmed) == [False, True]


def test_concurrent_restatements_write_one_fact(database_url: str, store: Store) -> None:
    key = key_of(f"same-{uuid.uuid4()}")
    batches = [
        [
            {
                **key,
                "value": "Berlin",
                "valid_from": "2026-06-03T12:00:00+02:00",
                "source_episode_id": f"w{writer}",
            }
        ]
        for writer in range(PROCESSES)
    ]
    outcomes = run_concurrently(database_url, batches)
    assert Counter(outcome[2] for outcome in outcomes) == Counter({True: 1, False: PROCESSES - 1})
    assert len({outcome[3] for outcome in outcomes}) == 1, "every put returns the same fact"
    tenant = key["tenant_id"]
    assert count_rows(store, "facts", tenant_id=tenant) == 1
    assert count_rows(store, "claims", tenant_id=tenant) == PROCESSES
