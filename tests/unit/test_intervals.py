"""Pure tests of the interval arithmetic: no database, no clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import permutations

import pytest

from pipeline.ledger.intervals import Claim, Interval, Verdict, holding_at, judge, project, winners

INFERRED, VERIFIED, USER_CONFIRMED = 1, 2, 3
T0 = datetime(2026, 6, 1, tzinfo=UTC)
_recorded = iter(range(1_000_000))


def day(n: int) -> datetime:
    return T0 + timedelta(days=n)


def claim(
    claim_id: str,
    value: str,
    start: int,
    end: int | None = None,
    trust: int = VERIFIED,
    recorded: int | None = None,
) -> Claim:
    """A claim that `value` holds from day `start` (until day `end`)."""
    order = next(_recorded) if recorded is None else recorded
    return Claim(
        claim_id=claim_id,
        value_key=value,
        valid_from=day(start),
        valid_to=day(end) if end is not None else None,
        trust_rank=trust,
        recorded_order=(T0 + timedelta(seconds=order), claim_id),
    )


def spans(intervals: list[Interval]) -> list[tuple[str, str, int, int | None]]:
    """(fact_id, value, start day, end day) of each interval, for readable assertions."""
    return [
        (
            interval.fact_id,
            interval.value_key,
            (interval.valid_from - T0).days,
            (interval.valid_to - T0).days if interval.valid_to is not None else None,
        )
        for interval in intervals
    ]


def test_single_claim_is_open_ended() -> None:
    assert spans(project([claim("a", "X", 0)])) == [("a", "X", 0, None)]


def test_no_claims_project_to_nothing() -> None:
    assert project([]) == []
    assert holding_at([], day(0)) is None


def test_fact_inside_open_interval_closes_it_at_the_new_boundary() -> None:
    e1 = claim("e1", "2026-07-15", 0)
    e2 = claim("e2", "2026-06-30", 2)
    assert spans(project([e1, e2])) == [
        ("e1", "2026-07-15", 0, 2),
        ("e2", "2026-06-30", 2, None),
    ]


def test_fact_inside_closed_interval_inherits_the_predecessors_end() -> None:
    predecessor = claim("a", "X", 0, end=10)
    inside = claim("b", "Y", 4)
    assert spans(project([predecessor, inside])) == [("a", "X", 0, 4), ("b", "Y", 4, 10)]


def test_late_fact_before_all_others_ends_at_the_next_start() -> None:
    e1 = claim("e1", "2026-07-15", 2)
    e2 = claim("e2", "2026-06-30", 4)
    e0 = claim("e0", "2026-08-01", 0)
    intervals = project([e1, e2, e0])
    assert spans(intervals) == [
        ("e0", "2026-08-01", 0, 2),
        ("e1", "2026-07-15", 2, 4),
        ("e2", "2026-06-30", 4, None),
    ]
    current = holding_at(intervals, day(100))
    assert current is not None
    assert current.fact_id == "e2"


def test_restating_the_current_value_later_adds_no_interval() -> None:
    first = claim("first", "X", 0)
    again = claim("again", "X", 5)
    assert spans(project([first, again])) == [("first", "X", 0, None)]


def test_equal_adjacent_values_coalesce_into_the_earliest_claim() -> None:
    # Arrival order does not pick the representative: the earliest in valid time does.
    late_restatement = claim("late", "X", 5)
    early = claim("early", "X", 0)
    assert spans(project([late_restatement, early])) == [("early", "X", 0, None)]


def test_coalescing_stops_at_a_different_value() -> None:
    claims = [claim("a", "X", 0), claim("b", "X", 1), claim("c", "Y", 2), claim("d", "X", 3)]
    assert spans(project(claims)) == [("a", "X", 0, 2), ("c", "Y", 2, 3), ("d", "X", 3, None)]


def test_equal_values_across_a_gap_do_not_coalesce() -> None:
    claims = [claim("a", "X", 0, end=2), claim("b", "X", 3)]
    assert spans(project(claims)) == [("a", "X", 0, 2), ("b", "X", 3, None)]


def test_equal_value_that_starts_where_an_explicit_end_lies_coalesces() -> None:
    claims = [claim("a", "X", 0, end=2), claim("b", "X", 2, end=6)]
    assert spans(project(claims)) == [("a", "X", 0, 6)]


def test_explicit_valid_to_leaves_a_gap_where_nothing_holds() -> None:
    intervals = project([claim("a", "X", 0, end=3), claim("b", "Y", 5)])
    assert spans(intervals) == [("a", "X", 0, 3), ("b", "Y", 5, None)]
    assert holding_at(intervals, day(4)) is None
    assert holding_at(intervals, day(3)) is None  # half-open: the end itself is outside
    held = holding_at(intervals, day(3) - timedelta(microseconds=1))
    assert held is not None
    assert held.fact_id == "a"


def test_explicit_end_of_an_earlier_winner_bounds_a_later_open_claim() -> None:
    # The later claim starts inside [0, 8) and inherits its end, whatever the arrival order.
    closed = claim("a", "X", 0, end=8)
    inside = claim("b", "Y", 3)
    for order in ([closed, inside], [inside, closed]):
        assert spans(project(order)) == [("a", "X", 0, 3), ("b", "Y", 3, 8)]


def test_holding_at_uses_half_open_intervals() -> None:
    intervals = project([claim("a", "X", 0), claim("b", "Y", 2)])
    assert holding_at(intervals, day(0) - timedelta(microseconds=1)) is None
    first = holding_at(intervals, day(0))
    at_boundary = holding_at(intervals, day(2))
    assert first is not None
    assert first.fact_id == "a"
    assert at_boundary is not None
    assert at_boundary.fact_id == "b"


def test_interval_contains_is_half_open() -> None:
    interval = Interval("a", "X", day(0), day(1))
    assert interval.contains(day(0))
    assert not interval.contains(day(1))
    assert not interval.contains(day(0) - timedelta(microseconds=1))
    assert Interval("a", "X", day(0), None).contains(day(10_000))


@pytest.mark.parametrize(
    ("low", "high"),
    [(INFERRED, VERIFIED), (VERIFIED, USER_CONFIRMED), (INFERRED, USER_CONFIRMED)],
)
def test_highest_trust_wins_at_the_same_valid_from(low: int, high: int) -> None:
    weak = claim("weak", "X", 0, trust=low)
    strong = claim("strong", "Y", 0, trust=high)
    for order in ([weak, strong], [strong, weak]):
        (winner,) = winners(order)
        assert winner.claim_id == "strong"
        assert spans(project(order)) == [("strong", "Y", 0, None)]


def test_equal_trust_at_the_same_valid_from_is_won_by_the_earliest_recorded() -> None:
    first = claim("first", "X", 0, recorded=1)
    second = claim("second", "X", 0, recorded=2)
    for order in ([first, second], [second, first]):
        (winner,) = winners(order)
        assert winner.claim_id == "first"


def test_winners_are_in_valid_time_order() -> None:
    claims = [claim("c", "Z", 7), claim("a", "X", 1), claim("b", "Y", 4)]
    assert [winner.claim_id for winner in winners(claims)] == ["a", "b", "c"]


def test_a_losers_valid_to_is_not_a_boundary() -> None:
    loser = claim("loser", "Y", 0, end=2, trust=INFERRED)
    winner = claim("winner", "X", 0, trust=USER_CONFIRMED)
    assert spans(project([loser, winner])) == [("winner", "X", 0, None)]


def test_projection_does_not_depend_on_arrival_order() -> None:
    claims = [
        claim("a", "X", 0, trust=INFERRED),
        claim("b", "Y", 0, trust=USER_CONFIRMED),
        claim("c", "Y", 2),
        claim("d", "Z", 4, end=9),
        claim("e", "X", 6, trust=INFERRED),
        claim("f", "W", 12),
    ]
    expected = project(claims)
    assert spans(expected) == [
        ("b", "Y", 0, 4),
        ("d", "Z", 4, 6),
        ("e", "X", 6, 9),
        ("f", "W", 12, None),
    ]
    for order in permutations(claims):
        assert project(order) == expected


def test_projection_never_overlaps() -> None:
    claims = [
        claim("a", "X", 0, end=5),
        claim("b", "Y", 2, end=3),
        claim("c", "Z", 4),
        claim("d", "X", 1, end=20),
    ]
    intervals = project(claims)
    for before, after in zip(intervals, intervals[1:], strict=False):
        assert before.valid_to is not None
        assert before.valid_to <= after.valid_from
    for interval in intervals:
        assert interval.valid_to is None or interval.valid_from < interval.valid_to


def test_judge_accepts_a_claim_at_a_new_valid_from() -> None:
    verdict, rival = judge([claim("a", "X", 0)], claim("b", "Y", 1))
    assert verdict is Verdict.ACCEPT
    assert rival is None


def test_judge_accepts_the_same_value_at_the_same_valid_from_whatever_the_trust() -> None:
    existing = claim("a", "X", 0, trust=USER_CONFIRMED)
    verdict, rival = judge([existing], claim("b", "X", 0, trust=INFERRED))
    assert verdict is Verdict.ACCEPT
    assert rival == existing


def test_judge_accepts_a_different_value_with_higher_trust() -> None:
    existing = claim("a", "X", 0, trust=VERIFIED)
    verdict, rival = judge([existing], claim("b", "Y", 0, trust=USER_CONFIRMED))
    assert verdict is Verdict.ACCEPT
    assert rival == existing


def test_judge_reports_a_conflict_for_a_different_value_with_equal_trust() -> None:
    existing = claim("a", "X", 0)
    verdict, rival = judge([existing], claim("b", "Y", 0))
    assert verdict is Verdict.CONFLICT
    assert rival == existing


def test_judge_outranks_a_different_value_with_lower_trust() -> None:
    existing = claim("a", "X", 0, trust=USER_CONFIRMED)
    verdict, rival = judge([existing], claim("b", "Y", 0, trust=VERIFIED))
    assert verdict is Verdict.OUTRANKED
    assert rival == existing


def test_judge_compares_with_the_winner_not_with_a_loser() -> None:
    loser = claim("loser", "X", 0, trust=INFERRED)
    winner = claim("winner", "Y", 0, trust=USER_CONFIRMED)
    # Agreeing with the loser at equal trust is not enough: the winner has higher trust.
    verdict, rival = judge([loser, winner], claim("new", "X", 0, trust=VERIFIED))
    assert verdict is Verdict.OUTRANKED
    assert rival == winner
    # Agreeing with the winner is accepted even at the loser's trust.
    verdict, rival = judge([loser, winner], claim("new", "Y", 0, trust=INFERRED))
    assert verdict is Verdict.ACCEPT
    assert rival == winner


def test_judge_ignores_claims_at_other_valid_froms() -> None:
    others = [claim("a", "X", 0, trust=USER_CONFIRMED), claim("b", "Y", 2, trust=USER_CONFIRMED)]
    verdict, rival = judge(others, claim("c", "Z", 1, trust=INFERRED))
    assert verdict is Verdict.ACCEPT
    assert rival is None
