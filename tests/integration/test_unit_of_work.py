"""The caller owns the transaction: ledger operations compose in one unit of work."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import select

import pipeline
from pipeline.db.models import FactRow
from pipeline.db.store import Store
from tests.databases import empty_database
from tests.factories import FrozenClock
from tests.integration.ledger_helpers import all_rows

KEY = {"tenant_id": "acme", "subject": "mira", "source_episode_id": "e1"}
FIRST = KEY | {"attribute": "home_city", "value": "Berlin", "valid_from": "2026-01-01T00:00:00Z"}
QUARANTINED = KEY | {
    "attribute": "employer",
    "value": "Globex",
    "valid_from": "2026-02-01T00:00:00Z",
    "trust": "untrusted",
}
SECOND = KEY | {
    "attribute": "home_city",
    "value": "Paris",
    "valid_from": "2026-03-01T00:00:00Z",
    "idempotency_key": "move-1",
}


def _quarantined_fact_id(unit: pipeline.Unit) -> str:
    query = select(FactRow.fact_id).where(FactRow.status == "quarantined")
    return unit.session.scalars(query).one()


def _two_puts_and_a_promote(unit: pipeline.Unit) -> None:
    for command in (FIRST, QUARANTINED, SECOND):
        assert isinstance(pipeline.write_fact(unit, command), pipeline.PutResult)
    promote = {"tenant_id": "acme", "fact_id": _quarantined_fact_id(unit)}
    assert isinstance(pipeline.promote_fact(unit, promote), pipeline.PutResult)


class _Abandon(Exception):
    pass


def test_a_rolled_back_unit_leaves_no_row_claim_event_or_key(clocked_store: Store) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}

    def abandoned() -> None:
        with clocked_store.begin() as unit:
            _two_puts_and_a_promote(unit)
            seen.update(all_rows(clocked_store))  # another connection sees nothing yet
            raise _Abandon

    with pytest.raises(_Abandon):
        abandoned()
    inside = seen

    assert all(rows == [] for rows in inside.values()), inside
    after = all_rows(clocked_store)
    assert set(after) >= {"facts", "claims", "events", "idempotency_keys"}
    assert all(rows == [] for rows in after.values()), after


def test_a_committed_unit_equals_the_same_calls_made_separately(
    clocked_store: Store, clock: FrozenClock, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = clock.now
    monkeypatch.setattr(uuid, "uuid4", _Counter())
    with clocked_store.begin() as unit:
        _two_puts_and_a_promote(unit)
    together = all_rows(clocked_store)

    empty_database(database_url)
    clock.set(start)
    monkeypatch.setattr(uuid, "uuid4", _Counter())
    for command in (FIRST, QUARANTINED, SECOND):
        pipeline.put(clocked_store, command)
    with clocked_store.begin() as unit:
        fact_id = _quarantined_fact_id(unit)
    pipeline.promote(clocked_store, {"tenant_id": "acme", "fact_id": fact_id})
    separately = all_rows(clocked_store)

    assert len(together["events"]) == 5, "the unit wrote its decisions"
    assert together == separately


class _Counter:
    """Deterministic ids, so two runs can be compared row for row, hashes included."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> uuid.UUID:
        self.count += 1
        return uuid.UUID(int=self.count)
