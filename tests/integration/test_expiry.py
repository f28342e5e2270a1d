"""Retention per memory kind, expiry events, and expired facts hidden from every read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

import pipeline
from pipeline.db.models import EventRow
from pipeline.db.store import Store
from pipeline.errors import InvalidInput
from pipeline.ledger.expire import expire
from pipeline.read.context import assemble
from tests.conftest import FrozenClock

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
READ = {"tenant_id": "acme", "subject": "mira"}


def _put(store: Store, attribute: str, value: object, **extra: object) -> pipeline.PutResult:
    fields = READ | {
        "attribute": attribute,
        "value": value,
        "valid_from": "2026-11-01T00:00:00Z",
        "source_episode_id": "ep",
    }
    return pipeline.put(store, fields | extra)


def test_expiry_comes_from_the_kind_and_may_only_be_shortened(clocked_store: Store) -> None:
    note = _put(clocked_store, "scratch", "call back")  # working_note: P7D
    deadline = _put(clocked_store, "passport_deadline", "2027-01-01")  # fact: P3650D
    shorter = _put(clocked_store, "home_city", "Utrecht", expires_at="2026-12-01T00:00:00Z")

    assert note.fact.expires_at is not None
    assert note.fact.expires_at - note.fact.recorded_at == timedelta(days=7)
    assert deadline.fact.expires_at is not None
    assert deadline.fact.expires_at - deadline.fact.recorded_at == timedelta(days=3650)
    assert shorter.fact.expires_at == datetime(2026, 12, 1, tzinfo=UTC)
    with pytest.raises(InvalidInput) as refused:
        _put(clocked_store, "answer_style", "concise", expires_at="2040-01-01T00:00:00Z")
    assert refused.value.field == "expires_at"


def test_reads_never_return_expired_facts(clocked_store: Store, clock: FrozenClock) -> None:
    _put(clocked_store, "scratch", "call back")
    _put(clocked_store, "home_city", "Utrecht")

    assert {f.attribute for f in pipeline.get(clocked_store, READ)} == {"home_city", "scratch"}
    clock.set(START + timedelta(days=8))  # past the working note's retention, no expire run yet

    assert [f.attribute for f in pipeline.get(clocked_store, READ)] == ["home_city"]
    past = pipeline.get(clocked_store, READ | {"at": "2026-11-15T00:00:00Z"})
    assert [f.attribute for f in past] == ["home_city"]
    assert pipeline.history(clocked_store, READ | {"attribute": "scratch"}) == []
    assert [item.attribute for item in assemble(clocked_store, READ).items] == ["home_city"]


def test_expire_writes_explicit_events(clocked_store: Store, clock: FrozenClock) -> None:
    note = _put(clocked_store, "scratch", "call back")
    _put(clocked_store, "home_city", "Utrecht")

    early = expire(clocked_store, {"now": "2026-12-01T00:00:00Z"})
    assert early.expired_fact_ids == []

    result = expire(clocked_store, {"now": "2026-12-07T12:00:01Z"})

    assert result.expired_fact_ids == [note.fact.fact_id]
    versions = pipeline.history(clocked_store, READ | {"attribute": "scratch"}, versions=True)
    assert [(f.version, f.status.value) for f in versions] == [(1, "active"), (2, "expired")]
    with clocked_store.begin() as unit:
        session = unit.session
        events = session.scalars(select(EventRow).where(EventRow.kind == "expire")).all()
    assert [event.fact_ids for event in events] == [[note.fact.fact_id]]
    assert expire(clocked_store, {"now": "2026-12-08T00:00:00Z"}).expired_fact_ids == []


def test_expire_is_scoped_to_a_tenant_when_asked(clocked_store: Store) -> None:
    _put(clocked_store, "scratch", "a")
    pipeline.put(
        clocked_store,
        {
            "tenant_id": "globex",
            "subject": "mira",
            "attribute": "scratch",
            "value": "b",
            "valid_from": "2026-11-01T00:00:00Z",
            "source_episode_id": "ep",
        },
    )

    result = expire(clocked_store, {"tenant_id": "globex", "now": "2027-01-01T00:00:00Z"})

    assert len(result.expired_fact_ids) == 1
    with clocked_store.begin() as unit:
        session = unit.session
        tenants = session.scalars(select(EventRow.tenant_id).where(EventRow.kind == "expire"))
        assert list(tenants) == ["globex"]


def test_expired_and_over_budget_facts_are_not_returned(
    clocked_store: Store, clock: FrozenClock
) -> None:
    """Seed test 5: the context holds neither an expired fact nor one beyond the budget."""
    _put(clocked_store, "scratch", "expires soon")
    _put(clocked_store, "home_city", "Utrecht", confidence=0.9)
    _put(clocked_store, "employer", "A very long employer name " * 20, confidence=0.5)
    _put(clocked_store, "answer_style", "concise", confidence=0.8)
    clock.set(START + timedelta(days=10))
    expire(clocked_store, {})

    context = assemble(clocked_store, READ | {"budget_tokens": 40})

    assert [item.attribute for item in context.items] == ["home_city", "answer_style"]
    assert [item.attribute for item in context.skipped] == ["employer"]
    assert context.used_tokens <= 40
