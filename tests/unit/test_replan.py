"""When a connection plans its prepared statements again: pure tests of the size rule."""

from __future__ import annotations

from pipeline.db.replan import FLOOR_ROWS, outgrown, rebase

BIG = 10 * FLOOR_ROWS


def test_a_table_that_doubled_past_the_floor_needs_new_plans() -> None:
    assert outgrown({"facts": BIG, "claims": BIG}, {"facts": 2 * BIG, "claims": BIG})


def test_growth_by_less_than_double_keeps_the_plans() -> None:
    assert not outgrown({"facts": BIG}, {"facts": 2 * BIG - 1})


def test_growth_below_the_floor_keeps_the_plans() -> None:
    assert not outgrown({"facts": 0}, {"facts": FLOOR_ROWS - 1})
    assert outgrown({"facts": 0}, {"facts": FLOOR_ROWS})


def test_a_table_not_seen_before_counts_as_empty() -> None:
    assert outgrown({}, {"facts": FLOOR_ROWS})


def test_a_table_that_shrank_counts_its_growth_from_its_smaller_size() -> None:
    planned = rebase({"facts": BIG}, {"facts": 0})  # TRUNCATE
    assert planned == {"facts": 0}
    assert outgrown(planned, {"facts": FLOOR_ROWS})


def test_rebase_keeps_the_planned_size_of_a_table_that_grew() -> None:
    assert rebase({"facts": BIG, "claims": BIG}, {"facts": BIG + 1, "claims": 1}) == {
        "facts": BIG,
        "claims": 1,
    }
