"""Idempotency keys on put, promote and forget, also from several processes at once."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

import pipeline
from pipeline.db.models import ClaimRow, EventRow, FactRow, IdempotencyRow
from pipeline.db.store import Store
from pipeline.errors import IdempotencyConflict, NotFound, TrustRejected
from pipeline.ledger.forget import forget
from pipeline.ledger.promote import promote
from pipeline.settings import Settings
from tests.integration.ledger_helpers import writer_processes

FACT = {
    "tenant_id": "acme",
    "subject": "mira",
    "attribute": "home_city",
    "value": "Utrecht",
    "valid_from": "2026-03-01T00:00:00Z",
    "source_episode_id": "ep-1",
    "idempotency_key": "req-1",
}


def _counts(store: Store) -> tuple[int, ...]:
    with store.begin() as unit:
        session = unit.session
        return tuple(
            session.scalar(select(func.count()).select_from(table)) or 0
            for table in (ClaimRow, FactRow, EventRow, IdempotencyRow)
        )


def test_repeated_put_returns_the_first_result_and_writes_nothing(store: Store) -> None:
    first = pipeline.put(store, FACT)
    counts = _counts(store)

    again = pipeline.put(store, FACT | {"valid_from": "2026-03-01T01:00:00+01:00"})  # same instant

    assert again.fact == first.fact
    assert (again.written, again.replayed) == (False, True)  # nothing written now
    assert again.as_first_answered().model_dump() == first.model_dump()  # HTTP's answer
    assert first.replayed is False
    assert _counts(store) == counts


def test_a_refused_put_is_refused_again_without_a_second_refusal_logged(store: Store) -> None:
    pipeline.put(store, FACT | {"trust": "user_confirmed", "idempotency_key": None})
    lower = FACT | {"value": "Leiden", "idempotency_key": "low-1"}
    with pytest.raises(TrustRejected) as first:
        pipeline.put(store, lower)
    counts = _counts(store)

    with pytest.raises(TrustRejected) as again:
        pipeline.put(store, lower)

    assert str(again.value) == str(first.value)
    assert again.value.existing_fact_id == first.value.existing_fact_id
    assert _counts(store) == counts  # no second reject event


def test_a_repeat_after_a_forget_never_answers_the_forgotten_value(store: Store) -> None:
    pipeline.put(store, FACT)
    forget(store, {"tenant_id": "acme", "subject": "mira"})

    with pytest.raises(NotFound, match="forgotten since"):
        pipeline.put(store, FACT)


def test_a_put_key_used_on_the_hot_path_or_intake_is_a_conflict(store: Store) -> None:
    pipeline.put(store, FACT)
    said = {"tenant_id": "acme", "subject": "mira", "text": "My home city is Utrecht."}
    episode = said | {"session_id": "s1", "occurred_at": "2026-03-01T00:00:00Z"}
    counts = _counts(store)

    with pytest.raises(IdempotencyConflict):
        pipeline.remember(store, said | {"idempotency_key": "req-1"})
    with pytest.raises(IdempotencyConflict):
        pipeline.ingest(store, episode | {"idempotency_key": "req-1"})

    assert _counts(store) == counts
    pipeline.remember(store, said | {"idempotency_key": "rem-1"})
    with pytest.raises(IdempotencyConflict):
        pipeline.put(store, FACT | {"idempotency_key": "rem-1"})


def test_a_new_key_does_not_make_a_taken_episode_id_another_episodes(store: Store) -> None:
    episode = {"tenant_id": "acme", "subject": "mira", "session_id": "s1", "episode_id": "ep-9"}
    episode |= {"occurred_at": "2026-03-01T00:00:00Z", "text": "My home city is Utrecht."}
    pipeline.ingest(store, episode)
    counts = _counts(store)

    with pytest.raises(IdempotencyConflict):
        pipeline.ingest(store, episode | {"text": "My home city is Delft.", "idempotency_key": "k"})

    assert _counts(store) == counts
    again = pipeline.ingest(store, episode | {"idempotency_key": "k2"})
    assert [receipt.status for receipt in again.receipts] == ["duplicate"]


def test_key_reused_with_another_payload_is_refused(store: Store) -> None:
    pipeline.put(store, FACT)
    counts = _counts(store)

    with pytest.raises(IdempotencyConflict):
        pipeline.put(store, FACT | {"value": "Leiden"})

    assert _counts(store) == counts
    assert [
        fact.value for fact in pipeline.get(store, {"tenant_id": "acme", "subject": "mira"})
    ] == ["Utrecht"]


def test_keys_are_per_tenant(store: Store) -> None:
    acme = pipeline.put(store, FACT)
    globex = pipeline.put(store, FACT | {"tenant_id": "globex"})

    assert globex.fact.fact_id != acme.fact.fact_id
    assert globex.fact.tenant_id == "globex"


def test_repeated_promote_and_forget(store: Store) -> None:
    quarantined = pipeline.put(store, FACT | {"trust": "untrusted", "idempotency_key": None})
    command = {"tenant_id": "acme", "fact_id": quarantined.fact.fact_id, "idempotency_key": "p"}
    promoted = promote(store, command)
    counts = _counts(store)

    assert promote(store, command).fact == promoted.fact  # not NotQuarantined: the first result
    assert _counts(store) == counts

    first = forget(store, {"tenant_id": "acme", "subject": "mira", "idempotency_key": "f"})
    counts = _counts(store)
    again = forget(store, {"tenant_id": "acme", "subject": "mira", "idempotency_key": "f"})
    assert again.model_dump() == first.model_dump()
    assert again.replayed
    assert first.hidden == 1
    assert _counts(store) == counts
    with pytest.raises(IdempotencyConflict):
        forget(
            store, {"tenant_id": "acme", "subject": "mira", "idempotency_key": "f", "purge": True}
        )


def _put_in_process(url: str, barrier: Any, results: Any) -> None:
    store = Store(Settings(database_url=url))
    barrier.wait()
    try:
        results.put(pipeline.put(store, FACT).fact.fact_id)
    except Exception as error:  # report to the parent instead of dying silently
        results.put(f"error: {type(error).__name__}: {error}")
    finally:
        store.dispose()


@pytest.mark.slow
def test_same_key_from_several_processes_applies_once(store: Store, database_url: str) -> None:
    context = writer_processes()
    barrier = context.Barrier(4)
    results = context.Queue()
    workers = [
        context.Process(target=_put_in_process, args=(database_url, barrier, results))
        for _ in range(4)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)

    fact_ids = [results.get(timeout=5) for _ in workers]
    assert len(set(fact_ids)) == 1, fact_ids
    assert not fact_ids[0].startswith("error")
    with store.begin() as unit:
        session = unit.session
        assert session.scalar(select(func.count()).select_from(ClaimRow)) == 1
        assert session.scalar(select(func.count()).select_from(IdempotencyRow)) == 1
