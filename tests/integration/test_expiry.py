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
from tests.factories import FrozenClock, put_fact

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
READ = {"tenant_id": "acme", "subject": "mira"}


def _put(store: Store, attribute: str, value: object, **extra: object) -> pipeline.PutResult:
    fields = READ | {"attribute": attribute, "value": value, "valid_from": "2026-11-01T00:00:00Z"}
    return put_fact(store, **fields | extra)


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

    early = expire(clocked_store, {"now": "2026-12-01T00:00:00Z", "force": True})
    assert early.expired_fact_ids == []

    result = expire(clocked_store, {"now": "2026-12-07T12:00:01Z", "force": True})

    assert result.expired_fact_ids == [note.fact.fact_id]
    versions = pipeline.history(clocked_store, READ | {"attribute": "scratch"}, versions=True)
    assert [(f.version, f.status.value) for f in versions] == [(1, "active"), (2, "expired")]
    with clocked_store.begin() as unit:
        session = unit.session
        events = session.scalars(select(EventRow).where(EventRow.kind == "expire")).all()
    assert [event.fact_ids for event in events] == [[note.fact.fact_id]]
    assert (
        expire(clocked_store, {"now": "2026-12-08T00:00:00Z", "force": True}).expired_fact_ids == []
    )


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

    result = expire(
        clocked_store, {"tenant_id": "globex", "now": "2027-01-01T00:00:00Z", "force": True}
    )

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


def test_a_quarantined_fact_expires_too(clocked_store: Store, clock: FrozenClock) -> None:
    hidden = _put(clocked_store, "scratch", "unreviewed note", trust="untrusted")
    clock.set(START + timedelta(days=8))

    result = expire(clocked_store, {})

    assert result.expired_fact_ids == [hidden.fact.fact_id]
    reviewer = pipeline.get(clocked_store, READ | {"include_quarantined": True})
    assert reviewer == []
    versions = pipeline.history(
        clocked_store, READ | {"attribute": "scratch", "include_quarantined": True}, versions=True
    )
    assert [(f.status.value, f.trust.value) for f in versions] == [
        ("quarantined", "untrusted"),
        ("expired", "untrusted"),
    ]
    # A reader who may not see quarantine does not see its expired version either.
    assert pipeline.history(clocked_store, READ | {"attribute": "scratch"}, versions=True) == []
    with pytest.raises(pipeline.NotQuarantined):
        pipeline.promote(clocked_store, {"tenant_id": "acme", "fact_id": hidden.fact.fact_id})


def test_an_expired_quarantined_fact_never_blocks_an_accepted_one(
    clocked_store: Store, clock: FrozenClock
) -> None:
    _put(clocked_store, "scratch", "unreviewed", trust="untrusted")
    clock.set(START + timedelta(days=8))
    expire(clocked_store, {})

    accepted = _put(clocked_store, "scratch", "reviewed note")

    assert accepted.written
    (current,) = pipeline.get(clocked_store, READ | {"attribute": "scratch"})
    assert current.value == "reviewed note"


def test_restating_a_value_after_it_expired_writes_a_new_fact(
    clocked_store: Store, clock: FrozenClock
) -> None:
    first = _put(clocked_store, "scratch", "call back")  # working note: 7 days
    clock.set(START + timedelta(days=8))
    expire(clocked_store, {})

    again = _put(clocked_store, "scratch", "call back", valid_from="2026-12-07T00:00:00Z")

    assert again.written
    assert again.fact.fact_id != first.fact.fact_id
    assert again.fact.expires_at is not None
    assert again.fact.expires_at > clock.now
    (current,) = pipeline.get(clocked_store, READ | {"attribute": "scratch"})
    assert current.fact_id == again.fact.fact_id


def test_restating_at_the_same_start_after_expiry_writes_a_new_fact(
    clocked_store: Store, clock: FrozenClock
) -> None:
    first = _put(clocked_store, "scratch", "call back")
    clock.set(START + timedelta(days=8))

    again = _put(clocked_store, "scratch", "call back")  # the same valid_from, before any run

    assert again.written
    assert again.fact.fact_id != first.fact.fact_id
    assert [f.value for f in pipeline.get(clocked_store, READ)] == ["call back"]


def test_expire_refuses_a_now_after_the_clock_unless_forced(clocked_store: Store) -> None:
    note = _put(clocked_store, "scratch", "call back")
    with pytest.raises(InvalidInput) as refused:
        expire(clocked_store, {"now": "2027-01-01T00:00:00Z"})
    assert refused.value.field == "now"
    assert pipeline.get(clocked_store, READ) != []

    forced = expire(clocked_store, {"now": "2027-01-01T00:00:00Z", "force": True})
    assert forced.expired_fact_ids == [note.fact.fact_id]
