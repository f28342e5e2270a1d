"""Property tests: random claims about one key, in random arrival orders, give one ledger, and
every point read agrees with a small in-memory oracle of the semantics."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pipeline
from pipeline.db.store import Store
from pipeline.errors import TrustRejected
from schemas.facts import Trust
from tests.integration.ledger_helpers import assert_no_overlap, count_rows

pytestmark = pytest.mark.slow

# Fact boundaries: valid_from is one of the first six, valid_to any later one.
INSTANTS = [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=10 * i) for i in range(7)]
STARTS = range(len(INSTANTS) - 1)
VALUES = ["Berlin", "Paris", "Rome"]
LEVELS = [Trust.INFERRED, Trust.VERIFIED, Trust.USER_CONFIRMED]
PROBES = sorted(
    {INSTANTS[0] - timedelta(days=1), INSTANTS[-1] + timedelta(days=400)}
    | set(INSTANTS)
    | {moment - timedelta(microseconds=1) for moment in INSTANTS}
    | {moment + timedelta(days=5) for moment in INSTANTS}
)


@dataclass(frozen=True)
class Statement:
    valid_from: datetime
    valid_to: datetime | None
    value: str
    trust: Trust
    source: str


@st.composite
def statements(draw: st.DrawFn) -> list[Statement]:
    """1-8 statements. Equal trust at the same valid_from always repeats the same value, so no
    arrival order can produce a conflict, but its end may differ: then content decides which
    end holds (an explicit end before an open one, the earlier end first)."""
    chosen: dict[tuple[int, Trust], str] = {}
    drawn: list[Statement] = []
    for number in range(draw(st.integers(min_value=1, max_value=8))):
        start = draw(st.sampled_from(STARTS))
        trust = draw(st.sampled_from(LEVELS))
        value = chosen.setdefault((start, trust), draw(st.sampled_from(VALUES)))
        end = draw(st.none() | st.integers(min_value=start + 1, max_value=len(INSTANTS) - 1))
        drawn.append(
            Statement(
                INSTANTS[start],
                INSTANTS[end] if end is not None else None,
                value,
                trust,
                f"ep{number}",
            )
        )
    return drawn


def oracle(claims: list[Statement], moment: datetime) -> str | None:
    """The value holding at `moment`: the winner at the latest valid_from not after it (the
    highest trust; among equal ones the earliest explicit end), unless an explicit end of any
    winner lies in (that valid_from, moment]."""

    def rank(claim: Statement) -> tuple[int, bool, datetime]:
        return (
            -claim.trust.rank,
            claim.valid_to is None,
            claim.valid_to or datetime.max.replace(tzinfo=UTC),
        )

    winners: dict[datetime, Statement] = {}
    for claim in claims:
        best = winners.get(claim.valid_from)
        if best is None or rank(claim) < rank(best):
            winners[claim.valid_from] = claim
    started = [start for start in winners if start <= moment]
    if not started:
        return None
    latest = max(started)
    for winner in winners.values():
        if winner.valid_to is not None and latest < winner.valid_to <= moment:
            return None
    return winners[latest].value


def write_all(store: Store, key: dict[str, str], claims: list[Statement]) -> None:
    for claim in claims:
        command = {
            **key,
            "value": claim.value,
            "valid_from": claim.valid_from,
            "valid_to": claim.valid_to,
            "trust": claim.trust.value,
            "source_episode_id": claim.source,
        }
        # An outranked statement could never win at its valid_from: rejecting it is right.
        with contextlib.suppress(TrustRejected):
            pipeline.put(store, command)


def ledger(store: Store, key: dict[str, str]) -> list[tuple[datetime, datetime | None, str, Trust]]:
    return [
        (fact.valid_from, fact.valid_to, fact.value, fact.trust)
        for fact in pipeline.history(store, key)
    ]


def fresh_key() -> dict[str, str]:
    return {"tenant_id": f"prop-{uuid.uuid4()}", "subject": "mira", "attribute": "home_city"}


def test_arrival_order_does_not_change_the_ledger_and_reads_match_the_oracle(
    store: Store,
) -> None:
    @settings(max_examples=30 if store.is_postgres else 60, deadline=None)
    @given(data=st.data(), claims=statements())
    def check(data: st.DataObject, claims: list[Statement]) -> None:
        shuffled = data.draw(st.permutations(claims), label="arrival order")
        first, second = fresh_key(), fresh_key()
        write_all(store, first, claims)
        write_all(store, second, shuffled)

        expected = ledger(store, first)
        assert ledger(store, second) == expected
        assert_no_overlap(pipeline.history(store, first))
        for moment in PROBES:
            found = pipeline.get(store, {**first, "at": moment})
            assert len(found) <= 1
            value = found[0].value if found else None
            assert value == oracle(claims, moment), f"at {moment.isoformat()}"

        # Redelivering every statement, in the other order, is a no-op.
        rows_before = count_rows(store, "facts", tenant_id=first["tenant_id"])
        write_all(store, first, shuffled)
        assert ledger(store, first) == expected
        assert count_rows(store, "facts", tenant_id=first["tenant_id"]) == rows_before

    check()


def test_every_row_version_is_a_valid_bitemporal_interval(store: Store) -> None:
    @settings(max_examples=15 if store.is_postgres else 30, deadline=None)
    @given(claims=statements())
    def check(claims: list[Statement]) -> None:
        key = fresh_key()
        write_all(store, key, claims)
        versions = pipeline.history(store, key, versions=True)
        assert versions, "at least the first statement is always accepted"
        for fact in versions:
            assert fact.valid_to is None or fact.valid_from < fact.valid_to
            assert fact.superseded_at is None or fact.recorded_at <= fact.superseded_at
        current = [fact for fact in versions if fact.superseded_at is None]
        assert len({fact.fact_id for fact in current}) == len(current)
        assert_no_overlap([fact for fact in current if fact.status.value == "active"])

    check()
