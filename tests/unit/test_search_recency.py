"""The episode order of a search: a later episode about the same thing takes an earlier
one's score (pure: rows, scores and matched-term weights in, order out)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from pipeline.read.search_recency import superseding


def _row(doc: str, day: int) -> SimpleNamespace:
    return SimpleNamespace(doc=doc, episode_id=doc, occurred_at=datetime(2026, 5, day, tzinfo=UTC))


def test_a_later_episode_sharing_two_thirds_of_the_weight_goes_first() -> None:
    rows = [_row("old", 1), _row("new", 3)]
    weights = {"old": {"webinar": 2.0, "price": 1.0}, "new": {"webinar": 2.0}}

    assert superseding(rows, {"old": 9.0, "new": 4.0}, weights) == [("new", 9.0), ("old", 9.0)]


def test_a_later_episode_sharing_less_stays_where_its_score_puts_it() -> None:
    rows = [_row("old", 1), _row("new", 3)]
    weights = {"old": {"webinar": 2.0, "price": 1.5}, "new": {"price": 1.5}}

    assert superseding(rows, {"old": 9.0, "new": 4.0}, weights) == [("old", 9.0), ("new", 4.0)]


def test_an_earlier_episode_never_takes_a_later_ones_score() -> None:
    rows = [_row("old", 1), _row("new", 3)]
    weights = {"old": {"webinar": 2.0}, "new": {"webinar": 2.0}}

    assert superseding(rows, {"old": 4.0, "new": 9.0}, weights) == [("new", 9.0), ("old", 4.0)]


def test_an_episode_found_by_its_neighbours_supersedes_nothing() -> None:
    rows = [_row("old", 1), _row("beside", 2)]

    ranked = superseding(rows, {"old": 9.0, "beside": 2.7}, {"old": {"webinar": 2.0}})

    assert ranked == [("old", 9.0), ("beside", 2.7)]
