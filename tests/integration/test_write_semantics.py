"""Each rule of the ledger's write path, on SQLite and Postgres, and the database's own guard
against overlapping current-belief intervals."""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

import pipeline
from pipeline.db.store import Store
from pipeline.errors import FactConflict, InvalidInput, TrustRejected
from schemas.facts import FactStatus, Trust
from tests.factories import FrozenClock
from tests.integration.ledger_helpers import (
    assert_no_overlap,
    count_rows,
    ledger_counts,
    one_at,
    put,
    timeline,
    utc,
)

CITY = {"tenant_id": "acme", "subject": "mira", "attribute": "home_city"}
LANGUAGES = {"tenant_id": "acme", "subject": "mira", "attribute": "languages"}
JAN = "2026-01-01T00:00:00Z"
FEB = "2026-02-01T00:00:00Z"
MAR = "2026-03-01T00:00:00Z"
APR = "2026-04-01T00:00:00Z"
MAY = "2026-05-01T00:00:00Z"


def events(store: Store) -> list[str]:
    with store.engine.connect() as connection:
        rows = connection.execute(text("SELECT kind FROM events ORDER BY event_id"))
        return [row[0] for row in rows]


# -- restatements ------------------------------------------------------------------------------


def test_restating_the_current_value_writes_no_new_fact(store: Store) -> None:
    first = put(store, CITY, value="Berlin", valid_from=JAN, source_episode_id="e1")
    before = ledger_counts(store)
    again = put(store, CITY, value="Berlin", valid_from=MAR, source_episode_id="e2")
    assert again.written is False
    assert again.fact.fact_id == first.fact.fact_id
    assert count_rows(store, "facts") == before["facts"]
    assert count_rows(store, "claims") == before["claims"] + 1, "kept as provenance"
    assert timeline(pipeline.history(store, CITY)) == [
        ("2026-01-01T00:00:00+00:00", None, "Berlin")
    ]


def test_same_valid_from_and_same_value_is_idempotent(store: Store) -> None:
    first = put(store, CITY, value="Berlin", valid_from=JAN, source_episode_id="e1")
    facts_before = count_rows(store, "facts")
    for source in ("e2", "e3"):
        again = put(store, CITY, value="Berlin", valid_from=JAN, source_episode_id=source)
        assert again.written is False
        assert again.fact.fact_id == first.fact.fact_id
        assert again.fact.version == first.fact.version
    assert count_rows(store, "facts") == facts_before
    (current,) = pipeline.get(store, CITY)
    assert current.source_episode_id == "e1"


def test_a_normalised_equal_value_is_a_restatement(store: Store) -> None:
    key = {**CITY, "attribute": "monthly_budget"}
    put(store, key, value=1000, valid_from=JAN)
    facts_before = count_rows(store, "facts")
    assert put(store, key, value="1000", valid_from=FEB).written is False
    assert put(store, key, value=1e3, valid_from=JAN).written is False
    assert count_rows(store, "facts") == facts_before
    (current,) = pipeline.get(store, key)
    assert current.value == 1000


def test_restating_an_earlier_value_inside_its_own_interval_changes_nothing(store: Store) -> None:
    put(store, CITY, value="Berlin", valid_from=JAN)
    put(store, CITY, value="Paris", valid_from=MAR)
    facts_before = count_rows(store, "facts")
    assert put(store, CITY, value="Berlin", valid_from=FEB).written is False
    assert count_rows(store, "facts") == facts_before
    assert [fact.value for fact in pipeline.history(store, CITY)] == ["Berlin", "Paris"]


def test_restating_a_closed_value_from_its_end_extends_it(store: Store) -> None:
    # Berlin held until MAR; a source says Berlin holds from MAR on: one open Berlin interval.
    first = put(store, CITY, value="Berlin", valid_from=JAN, valid_to=MAR)
    result = put(store, CITY, value="Berlin", valid_from=MAR)
    assert timeline(pipeline.history(store, CITY)) == [
        ("2026-01-01T00:00:00+00:00", None, "Berlin")
    ]
    (current,) = pipeline.get(store, {**CITY, "at": APR})
    assert current.fact_id == first.fact.fact_id
    assert result.fact == current, "the put returns the fact that now holds the value"


def test_restating_the_current_value_with_an_end_closes_it(store: Store) -> None:
    first = put(store, CITY, value="Berlin", valid_from=JAN)
    result = put(store, CITY, value="Berlin", valid_from=MAR, valid_to=MAY)
    assert timeline(pipeline.history(store, CITY)) == [
        ("2026-01-01T00:00:00+00:00", "2026-05-01T00:00:00+00:00", "Berlin")
    ]
    assert pipeline.get(store, {**CITY, "at": "2026-06-01T00:00:00Z"}) == []
    (current,) = pipeline.get(store, {**CITY, "at": APR})
    assert current.fact_id == first.fact.fact_id
    assert result.fact == current, "the put returns the current version, not a superseded one"
    assert result.fact.superseded_at is None


def test_an_identical_restatement_never_replaces_the_current_fact(
    clocked_store: Store, clock: FrozenClock
) -> None:
    # Two writers that read their clocks in the opposite order of their commits (a concurrent
    # put that waited for the key lock, or a host whose clock is behind) restate the same
    # value, at the same instant, with the same trust. The second is a restatement.
    store = clocked_store
    clock.set(datetime(2026, 6, 5, 12, 0, tzinfo=UTC))
    first = put(store, CITY, value="Berlin", valid_from=JAN, source_episode_id="e1")
    clock.set(datetime(2026, 6, 5, 11, 59, tzinfo=UTC))
    facts_before = count_rows(store, "facts")
    again = put(store, CITY, value="Berlin", valid_from=JAN, source_episode_id="e2")
    assert again.written is False
    assert count_rows(store, "facts") == facts_before
    (current,) = pipeline.get(store, {**CITY, "at": FEB})
    assert (current.fact_id, current.source_episode_id) == (first.fact.fact_id, "e1")


# -- supersession -------------------------------------------------------------------------------


def test_fact_inside_an_open_interval_closes_it_and_records_supersession(store: Store) -> None:
    first = put(store, CITY, value="Berlin", valid_from=JAN)
    second = put(store, CITY, value="Paris", valid_from=MAR)
    assert second.written
    assert second.fact.supersedes_fact_id == first.fact.fact_id
    assert second.fact.valid_to is None
    old = one_at(store, CITY, FEB)
    assert old.fact_id == first.fact.fact_id
    assert old.valid_to == utc(MAR)
    assert old.version == 2, "closing an interval writes a new row version"


def test_fact_inside_a_closed_interval_inherits_its_end(store: Store) -> None:
    first = put(store, CITY, value="Berlin", valid_from=JAN, valid_to=APR)
    inside = put(store, CITY, value="Paris", valid_from=FEB)
    assert inside.fact.valid_to == utc(APR)
    assert inside.fact.supersedes_fact_id == first.fact.fact_id
    assert timeline(pipeline.history(store, CITY)) == [
        ("2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00", "Berlin"),
        ("2026-02-01T00:00:00+00:00", "2026-04-01T00:00:00+00:00", "Paris"),
    ]
    assert pipeline.get(store, {**CITY, "at": MAY}) == []


def test_explicit_valid_to_ends_the_fact(store: Store) -> None:
    put(store, CITY, value="Berlin", valid_from=JAN, valid_to=MAR)
    assert one_at(store, CITY, "2026-02-28T23:59:59.999999Z").value == "Berlin"
    assert pipeline.get(store, {**CITY, "at": MAR}) == []
    put(store, CITY, value="Paris", valid_from=APR)
    assert pipeline.get(store, {**CITY, "at": MAR}) == []
    assert one_at(store, CITY, MAY).value == "Paris"
    assert_no_overlap(pipeline.history(store, CITY))


def test_late_fact_ends_at_the_next_start_and_leaves_the_current_fact_alone(
    store: Store,
) -> None:
    put(store, CITY, value="Berlin", valid_from=FEB)
    current = put(store, CITY, value="Paris", valid_from=APR)
    versions_before = [(f.fact_id, f.version) for f in pipeline.history(store, CITY, versions=True)]
    late = put(store, CITY, value="Rome", valid_from=JAN)
    assert late.written
    assert late.fact.valid_to == utc(FEB)
    assert late.fact.supersedes_fact_id is None
    versions_after = [(f.fact_id, f.version) for f in pipeline.history(store, CITY, versions=True)]
    assert set(versions_after) - set(versions_before) == {(late.fact.fact_id, 1)}
    (now,) = pipeline.get(store, CITY)
    assert (now.fact_id, now.version) == (current.fact.fact_id, current.fact.version)


def test_history_is_in_valid_time_order_with_supersession_links(store: Store) -> None:
    a = put(store, CITY, value="A", valid_from=JAN)
    c = put(store, CITY, value="C", valid_from=MAR)
    b = put(store, CITY, value="B", valid_from=FEB)
    late = put(store, CITY, value="Z", valid_from="2025-12-01T00:00:00Z")
    found = pipeline.history(store, CITY)
    assert [fact.fact_id for fact in found] == [
        late.fact.fact_id,
        a.fact.fact_id,
        b.fact.fact_id,
        c.fact.fact_id,
    ]
    assert [fact.supersedes_fact_id for fact in found] == [
        None,
        None,
        a.fact.fact_id,
        a.fact.fact_id,
    ]
    assert timeline(found) == [
        ("2025-12-01T00:00:00+00:00", "2026-01-01T00:00:00+00:00", "Z"),
        ("2026-01-01T00:00:00+00:00", "2026-02-01T00:00:00+00:00", "A"),
        ("2026-02-01T00:00:00+00:00", "2026-03-01T00:00:00+00:00", "B"),
        ("2026-03-01T00:00:00+00:00", None, "C"),
    ]


# -- same valid_from, different value: trust decides ------------------------------------------


@pytest.mark.parametrize(
    ("low", "high"),
    [
        (Trust.INFERRED, Trust.VERIFIED),
        (Trust.VERIFIED, Trust.USER_CONFIRMED),
        (Trust.INFERRED, Trust.USER_CONFIRMED),
    ],
)
def test_higher_trust_at_the_same_valid_from_wins_and_supersedes(
    store: Store, low: Trust, high: Trust
) -> None:
    weak = put(store, CITY, value="Berlin", valid_from=JAN, trust=low.value)
    strong = put(store, CITY, value="Paris", valid_from=JAN, trust=high.value)
    assert strong.written
    assert strong.fact.supersedes_fact_id == weak.fact.fact_id
    (current,) = pipeline.get(store, {**CITY, "at": FEB})
    assert (current.value, current.trust) == ("Paris", high)
    assert [fact.value for fact in pipeline.history(store, CITY)] == ["Paris"]
    weak_versions = [
        fact for fact in pipeline.history(store, CITY, versions=True)
        if fact.fact_id == weak.fact.fact_id
    ]  # fmt: skip
    assert weak_versions[-1].status is FactStatus.SUPERSEDED
    assert weak_versions[0].superseded_at is not None


def test_lower_trust_different_value_is_rejected_and_changes_nothing(store: Store) -> None:
    strong = put(store, CITY, value="Paris", valid_from=JAN, trust="user_confirmed")
    put(store, CITY, value="Rome", valid_from=MAR)
    before = ledger_counts(store)
    history_before = pipeline.history(store, CITY, versions=True)
    with pytest.raises(TrustRejected) as rejected:
        put(store, CITY, value="Berlin", valid_from=JAN, trust="verified")
    assert rejected.value.existing_fact_id == strong.fact.fact_id
    assert count_rows(store, "facts") == before["facts"]
    assert count_rows(store, "claims") == before["claims"]
    assert pipeline.history(store, CITY, versions=True) == history_before
    assert events(store)[-1] == "reject"


def test_equal_trust_different_value_is_a_conflict_and_changes_nothing(store: Store) -> None:
    first = put(store, CITY, value="Paris", valid_from=JAN, trust="inferred")
    before = ledger_counts(store)
    history_before = pipeline.history(store, CITY, versions=True)
    with pytest.raises(FactConflict) as conflict:
        put(store, CITY, value="Berlin", valid_from="2026-01-01T01:00:00+01:00", trust="inferred")
    assert conflict.value.existing_fact_id == first.fact.fact_id
    assert count_rows(store, "facts") == before["facts"]
    assert count_rows(store, "claims") == before["claims"]
    assert pipeline.history(store, CITY, versions=True) == history_before
    assert one_at(store, CITY, FEB).value == "Paris"
    assert events(store)[-1] == "conflict"


def test_a_new_claim_is_judged_against_the_winner_at_its_valid_from(store: Store) -> None:
    put(store, CITY, value="Berlin", valid_from=JAN, trust="inferred")
    winner = put(store, CITY, value="Paris", valid_from=JAN, trust="verified")
    # Agreeing with the outranked claim at the winner's trust is a conflict with the winner.
    with pytest.raises(FactConflict) as conflict:
        put(store, CITY, value="Berlin", valid_from=JAN, trust="verified")
    assert conflict.value.existing_fact_id == winner.fact.fact_id
    # Agreeing with the winner at lower trust is a restatement.
    assert put(store, CITY, value="Paris", valid_from=JAN, trust="inferred").written is False
    assert one_at(store, CITY, FEB).value == "Paris"


def test_a_lower_trust_fact_at_a_different_valid_from_still_supersedes(store: Store) -> None:
    # Trust only settles disagreements at the same instant; a later change is a change.
    put(store, CITY, value="Paris", valid_from=JAN, trust="user_confirmed")
    later = put(store, CITY, value="Rome", valid_from=MAR, trust="inferred")
    assert later.written
    assert one_at(store, CITY, APR).value == "Rome"


def test_same_claims_in_either_order_give_the_same_ledger_when_only_valid_to_differs(
    store: Store,
) -> None:
    # Two sources agree on the value from JAN; one also says it ends in MAR. The spec says the
    # final ledger does not depend on arrival order.
    open_ended = {"value": "Berlin", "valid_from": JAN, "source_episode_id": "open"}
    bounded = {"value": "Berlin", "valid_from": JAN, "valid_to": MAR, "source_episode_id": "end"}
    outcomes = []
    for first, second in ((open_ended, bounded), (bounded, open_ended)):
        key = {**CITY, "tenant_id": f"order-{uuid.uuid4()}"}
        for fact in (first, second):
            with contextlib.suppress(pipeline.ConflictError):
                pipeline.put(store, {**key, **fact})
        outcomes.append(timeline(pipeline.history(store, key)))
    assert outcomes[0] == outcomes[1]


# -- multi-valued attributes ---------------------------------------------------------------------


def test_multi_valued_attribute_keeps_one_interval_per_value(store: Store) -> None:
    put(store, LANGUAGES, value="en", valid_from=JAN)
    put(store, LANGUAGES, value="de", valid_from=FEB, cardinality="many")
    put(store, LANGUAGES, value="fr", valid_from=JAN, valid_to=MAR)
    assert sorted(f.value for f in pipeline.get(store, {**LANGUAGES, "at": FEB})) == [
        "de",
        "en",
        "fr",
    ]
    assert sorted(f.value for f in pipeline.get(store, {**LANGUAGES, "at": APR})) == ["de", "en"]
    assert sorted(f.value for f in pipeline.get(store, {**LANGUAGES, "at": JAN})) == ["en", "fr"]
    facts_before = count_rows(store, "facts")
    assert put(store, LANGUAGES, value="en", valid_from=APR).written is False
    assert count_rows(store, "facts") == facts_before
    found = pipeline.history(store, LANGUAGES)
    assert len(found) == 3
    for value in ("en", "de", "fr"):
        assert_no_overlap([fact for fact in found if fact.value == value])
    assert all(fact.supersedes_fact_id is None for fact in found)


def test_cardinality_must_match_the_catalogue(store: Store) -> None:
    with pytest.raises(InvalidInput) as bad:
        put(store, CITY, value="Berlin", valid_from=JAN, cardinality="many")
    assert bad.value.field == "cardinality"
    with pytest.raises(InvalidInput) as bad:
        put(store, LANGUAGES, value="en", valid_from=JAN, cardinality="one")
    assert bad.value.field == "cardinality"
    assert count_rows(store, "facts") == 0


# -- time ------------------------------------------------------------------------------------------


def test_timestamps_are_normalised_to_utc(store: Store) -> None:
    put(store, CITY, value="Berlin", valid_from=JAN)
    moved = put(store, CITY, value="Paris", valid_from="2026-06-03T12:00:00+02:00")
    assert moved.fact.valid_from == datetime(2026, 6, 3, 10, 0, tzinfo=UTC)
    assert moved.fact.valid_from.utcoffset() == timedelta(0)
    assert one_at(store, CITY, "2026-06-03T09:59:59.999999Z").value == "Berlin"
    assert one_at(store, CITY, "2026-06-03T10:00:00Z").value == "Paris"
    assert one_at(store, CITY, "2026-06-03T05:00:00-05:00").value == "Paris"
    # The same instant in another offset is the same valid_from: a restatement.
    again = put(store, CITY, value="Paris", valid_from="2026-06-03T06:00:00-04:00")
    assert again.written is False
    # Offsets that put the local date on the other side of midnight still order correctly.
    put(store, CITY, value="Tokyo", valid_from="2026-06-04T01:00:00+09:00")
    assert one_at(store, CITY, "2026-06-03T15:59:59Z").value == "Paris"
    assert one_at(store, CITY, "2026-06-03T16:00:00Z").value == "Tokyo"


def test_microseconds_are_kept_and_ordered(store: Store) -> None:
    put(store, CITY, value="A", valid_from="2026-06-03T10:00:00Z")
    put(store, CITY, value="B", valid_from="2026-06-03T10:00:00.000001Z")
    assert one_at(store, CITY, "2026-06-03T10:00:00Z").value == "A"
    assert one_at(store, CITY, "2026-06-03T10:00:00.000001Z").value == "B"


def test_a_start_of_time_sentinel_orders_before_modern_instants(store: Store) -> None:
    # '0001-01-01T00:00:00Z' is a common "since always" value; it is a valid RFC 3339 instant.
    put(store, CITY, value="Berlin", valid_from="0001-01-01T00:00:00Z")
    put(store, CITY, value="Paris", valid_from=MAR)
    assert one_at(store, CITY, FEB).value == "Berlin"
    assert one_at(store, CITY, APR).value == "Paris"
    assert [fact.value for fact in pipeline.history(store, CITY)] == ["Berlin", "Paris"]


def test_known_at_answers_what_the_ledger_believed(
    clocked_store: Store, clock: FrozenClock
) -> None:
    store = clocked_store
    clock.set(datetime(2026, 6, 1, 12, 0, tzinfo=UTC))
    first = put(store, CITY, value="Berlin", valid_from=JAN)
    clock.set(datetime(2026, 6, 5, 12, 0, tzinfo=UTC))
    second = put(store, CITY, value="Paris", valid_from=MAR)
    clock.set(datetime(2026, 6, 10, 12, 0, tzinfo=UTC))

    before_anything = "2026-05-01T00:00:00Z"
    between = "2026-06-03T00:00:00Z"
    after = "2026-06-07T00:00:00Z"
    assert pipeline.get(store, {**CITY, "at": APR, "known_at": before_anything}) == []
    believed = one_at(store, CITY, APR, known_at=between)
    assert (believed.value, believed.fact_id, believed.valid_to) == (
        "Berlin",
        first.fact.fact_id,
        None,
    )
    assert one_at(store, CITY, APR, known_at=after).value == "Paris"
    assert one_at(store, CITY, APR).value == "Paris"
    # Valid time before the correction: Berlin, both before and after it was recorded.
    assert one_at(store, CITY, FEB, known_at=between).value == "Berlin"
    assert one_at(store, CITY, FEB, known_at=after).value == "Berlin"

    assert timeline(pipeline.history(store, {**CITY, "known_at": between})) == [
        ("2026-01-01T00:00:00+00:00", None, "Berlin")
    ]
    assert timeline(pipeline.history(store, {**CITY, "known_at": after})) == [
        ("2026-01-01T00:00:00+00:00", "2026-03-01T00:00:00+00:00", "Berlin"),
        ("2026-03-01T00:00:00+00:00", None, "Paris"),
    ]
    assert second.fact.recorded_at > first.fact.recorded_at


def test_closing_an_interval_keeps_the_old_row_version(
    clocked_store: Store, clock: FrozenClock
) -> None:
    store = clocked_store
    clock.set(datetime(2026, 6, 1, 12, 0, tzinfo=UTC))
    first = put(store, CITY, value="Berlin", valid_from=JAN)
    clock.set(datetime(2026, 6, 5, 12, 0, tzinfo=UTC))
    second = put(store, CITY, value="Paris", valid_from=MAR)

    versions = [
        f for f in pipeline.history(store, CITY, versions=True) if f.fact_id == first.fact.fact_id
    ]
    assert [(f.version, f.valid_to) for f in versions] == [(1, None), (2, utc(MAR))]
    old, new = versions
    assert old.superseded_at is not None
    assert old.superseded_at == new.recorded_at
    assert old.recorded_at == first.fact.recorded_at
    assert new.superseded_at is None
    assert second.fact.recorded_at <= new.recorded_at + timedelta(seconds=1)
    assert count_rows(store, "facts", fact_id=first.fact.fact_id) == 2
    # The old version is what a read as of before the close returns.
    old_belief = one_at(store, CITY, APR, known_at="2026-06-02T00:00:00Z")
    assert (old_belief.version, old_belief.superseded_at) == (1, old.superseded_at)


def test_reads_are_scoped_by_tenant_agent_and_purpose(store: Store) -> None:
    put(store, CITY, value="Berlin", valid_from=JAN)
    put(store, {**CITY, "tenant_id": "globex"}, value="Paris", valid_from=JAN)
    put(store, {**CITY, "agent_id": "planner"}, value="Rome", valid_from=JAN)
    put(store, {**CITY, "purpose": "billing"}, value="Oslo", valid_from=JAN)
    assert one_at(store, CITY, FEB).value == "Berlin"
    assert one_at(store, {**CITY, "tenant_id": "globex"}, FEB).value == "Paris"
    assert one_at(store, {**CITY, "agent_id": "planner"}, FEB).value == "Rome"
    assert one_at(store, {**CITY, "purpose": "billing"}, FEB).value == "Oslo"
    assert pipeline.get(store, {**CITY, "tenant_id": "initech", "at": FEB}) == []


def test_get_without_attribute_returns_every_attribute_of_the_subject(store: Store) -> None:
    put(store, CITY, value="Berlin", valid_from=JAN)
    put(store, {**CITY, "attribute": "answer_style"}, value="Concise", valid_from=JAN)
    put(store, {**CITY, "subject": "otto"}, value="Paris", valid_from=JAN)
    found = pipeline.get(store, {"tenant_id": "acme", "subject": "mira", "at": FEB})
    assert [(f.attribute, f.value) for f in found] == [
        ("answer_style", "concise"),
        ("home_city", "Berlin"),
    ]


def test_untrusted_writes_are_hidden_from_reads(store: Store) -> None:
    put(store, CITY, value="Berlin", valid_from=JAN)
    hidden = put(store, CITY, value="Atlantis", valid_from=MAR, trust="untrusted")
    assert hidden.fact.status is FactStatus.QUARANTINED
    assert one_at(store, CITY, APR).value == "Berlin"
    assert [fact.value for fact in pipeline.history(store, CITY)] == ["Berlin"]
    assert "Atlantis" not in [f.value for f in pipeline.history(store, CITY, versions=True)]


# -- the database's own guard ------------------------------------------------------------------

_COLUMNS = (
    "fact_id, version, tenant_id, agent_id, purpose, subject, attribute, slot, cardinality, "
    "value, value_hash, kind, schema_version, valid_from, valid_to, recorded_at, superseded_at, "
    "supersedes_fact_id, source_episode_id, evidence, confidence, trust, status, expires_at, "
    "forgotten_at"
)


def _stamp(store: Store, moment: datetime | None) -> Any:
    if moment is None or store.is_postgres:
        return moment
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def insert_raw(
    store: Store,
    start: str,
    end: str | None,
    *,
    slot: str = "",
    superseded_at: str | None = None,
    status: str = "active",
) -> str:
    """Insert one fact row with plain SQL, bypassing the ledger entirely."""
    fact_id = str(uuid.uuid4())
    row = {
        "fact_id": fact_id,
        "version": 1,
        "tenant_id": "raw",
        "agent_id": "default",
        "purpose": "default",
        "subject": "mira",
        "attribute": "home_city",
        "slot": slot,
        "cardinality": "many" if slot else "one",
        "value": None,
        "value_hash": slot or "h",
        "kind": "fact",
        "schema_version": "test",
        "valid_from": _stamp(store, utc(start)),
        "valid_to": _stamp(store, utc(end) if end else None),
        "recorded_at": _stamp(store, utc("2026-06-01T00:00:00Z")),
        "superseded_at": _stamp(store, utc(superseded_at) if superseded_at else None),
        "supersedes_fact_id": None,
        "source_episode_id": "raw",
        "evidence": None,
        "confidence": 1.0,
        "trust": "verified",
        "status": status,
        "expires_at": None,
        "forgotten_at": None,
    }
    placeholders = ", ".join(f":{name.strip()}" for name in _COLUMNS.split(","))
    with store.engine.begin() as connection:
        connection.execute(text(f"INSERT INTO facts ({_COLUMNS}) VALUES ({placeholders})"), row)
    return fact_id


def test_database_refuses_overlapping_current_intervals(store: Store) -> None:
    insert_raw(store, JAN, MAR)
    with pytest.raises(IntegrityError):
        insert_raw(store, FEB, APR)
    with pytest.raises(IntegrityError):
        insert_raw(store, "2025-12-01T00:00:00Z", None)
    with pytest.raises(IntegrityError):
        insert_raw(store, JAN, MAR)
    assert count_rows(store, "facts") == 1


def test_database_refuses_two_open_rows_per_key(store: Store) -> None:
    insert_raw(store, JAN, None)
    with pytest.raises(IntegrityError):
        insert_raw(store, MAR, None)
    with pytest.raises(IntegrityError):
        insert_raw(store, JAN, None)
    assert count_rows(store, "facts") == 1


def test_database_accepts_adjacent_superseded_and_other_slot_rows(store: Store) -> None:
    insert_raw(store, JAN, MAR)
    insert_raw(store, MAR, None)  # half-open: adjacent is not overlapping
    insert_raw(store, JAN, None, superseded_at="2026-06-02T00:00:00Z")  # an old version
    insert_raw(store, JAN, None, status="superseded")
    insert_raw(store, JAN, None, slot="other-value")  # another value of a multi-valued key
    assert count_rows(store, "facts") == 5


def test_database_refuses_an_update_that_reopens_an_overlap(store: Store) -> None:
    # The guard must hold for every write to the table, not only for inserts.
    insert_raw(store, JAN, MAR)
    later = insert_raw(store, MAR, None)
    with pytest.raises(IntegrityError), store.engine.begin() as connection:
        connection.execute(
            text("UPDATE facts SET valid_from = :start WHERE fact_id = :fact_id"),
            {"start": _stamp(store, utc(FEB)), "fact_id": later},
        )


def test_database_refuses_reactivating_a_superseded_fact_over_the_winner(store: Store) -> None:
    # A lifecycle bug that flips a lost fact back to active must be stopped by the database.
    weak = put(store, CITY, value="Berlin", valid_from=JAN, valid_to=MAR, trust="inferred")
    put(store, CITY, value="Paris", valid_from=JAN, trust="verified")
    with pytest.raises(IntegrityError), store.engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE facts SET status = 'active' WHERE fact_id = :id AND superseded_at IS NULL"
            ),
            {"id": weak.fact.fact_id},
        )
    assert [fact.value for fact in pipeline.history(store, CITY)] == ["Paris"]


def test_a_restatement_holds_from_its_own_time_once_a_correction_cuts_its_fact(
    clocked_store: Store,
) -> None:
    """The README's example: a restatement is a claim at its own valid_from."""
    key = {"tenant_id": "acme", "subject": "mira", "attribute": "passport_deadline"}
    first = put(clocked_store, key, value="2026-06-30", valid_from="2026-06-03T00:00:00Z")
    restated = put(clocked_store, key, value="2026-06-30", valid_from="2026-06-10T00:00:00Z")
    assert restated.written is False
    correction = put(
        clocked_store,
        key,
        value="2026-09-09",
        valid_from="2026-06-03T00:00:00Z",
        trust="user_confirmed",
    )

    assert one_at(clocked_store, key, "2026-06-05T00:00:00Z").value == "2026-09-09"
    surfaced = one_at(clocked_store, key, "2026-06-15T00:00:00Z")
    assert surfaced.value == "2026-06-30"
    assert surfaced.valid_from == utc("2026-06-10T00:00:00Z")
    assert surfaced.fact_id not in (first.fact.fact_id, correction.fact.fact_id)
    (event,) = [
        event
        for event in pipeline.decision_log(clocked_store, {"tenant_id": "acme"})
        if event.fact_ids == [surfaced.fact_id] and event.kind == "supersede"
    ]
    assert event.reason == (
        "an earlier restatement now holds on its own from 2026-06-10T00:00:00Z: "
        f"fact {correction.fact.fact_id} changed the value before it"
    )
