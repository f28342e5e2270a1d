"""The recurrence buffer's pure rules (`pipeline/buffer/rules.py`): support is counted in
distinct sessions on the episodes' own times, a window is measured back from the latest
support, and a promoted fact takes its start from the support whose statement starts first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pipeline.buffer.rules import eligible, first_support, sessions, stale
from schemas.buffer import SupportRecord

DAY = timedelta(days=1)
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def support(
    episode: str, session: str | None, day: int, *, starts: int | None = None
) -> SupportRecord:
    """An episode on day `day` after T0 whose statement holds from day `starts` (its own day
    unless given)."""
    return SupportRecord(
        episode_id=episode,
        session_id=session,
        occurred_at=T0 + day * DAY,
        valid_from=T0 + (day if starts is None else starts) * DAY,
        evidence=f"said in {episode}",
    )


def test_no_support_is_no_session() -> None:
    assert sessions([]) == 0
    assert sessions([], 30 * DAY) == 0


def test_episodes_of_one_session_count_once() -> None:
    same = [support("e1", "s1", 0), support("e2", "s1", 1), support("e3", "s1", 2)]
    assert sessions(same) == 1
    assert sessions([*same, support("e4", "s2", 3)]) == 2


def test_an_episode_without_a_session_counts_as_its_own() -> None:
    loose = [support("e1", None, 0), support("e2", None, 1), support("e3", "s1", 2)]
    assert sessions(loose) == 3
    assert sessions([support("e1", None, 0), support("e1", None, 0)]) == 1


def test_the_window_is_measured_back_from_the_latest_support() -> None:
    spread = [support("e1", "s1", 0), support("e2", "s2", 20), support("e3", "s3", 40)]
    assert sessions(spread) == 3
    assert sessions(spread, 30 * DAY) == 2  # day 0 is 40 days before the latest
    assert sessions(spread, 40 * DAY) == 3  # the edge is inside the window
    assert sessions(spread, 19 * DAY) == 1


def test_eligible_needs_the_sessions_within_the_window() -> None:
    two = [support("e1", "s1", 0), support("e2", "s2", 10)]
    assert eligible(two, 2, 30 * DAY)
    assert not eligible(two, 3, 30 * DAY)
    assert not eligible(two, 2, 9 * DAY)


def test_without_a_count_only_a_confirmation_promotes() -> None:
    many = [support(f"e{n}", f"s{n}", n) for n in range(10)]
    assert not eligible(many, None, 365 * DAY)


@pytest.mark.parametrize(
    ("supports", "expected"),
    [
        # The statement that starts first wins, whenever it was said.
        ([support("e1", "s1", 5), support("e2", "s2", 9, starts=1)], "e2"),
        # Same start: the earlier episode.
        ([support("e2", "s2", 4, starts=2), support("e1", "s1", 3, starts=2)], "e1"),
        # Same start and time: the smaller episode id, so the choice never depends on order.
        ([support("eb", "s1", 3), support("ea", "s2", 3)], "ea"),
    ],
)
def test_the_first_support_is_the_one_whose_statement_starts_first(
    supports: list[SupportRecord], expected: str
) -> None:
    assert first_support(supports).episode_id == expected
    assert first_support(list(reversed(supports))).episode_id == expected


def test_first_support_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        first_support([])


def test_stale_once_the_last_support_is_outside_the_window() -> None:
    last = T0
    assert not stale(last, 30 * DAY, T0 + 30 * DAY)  # the edge is still inside
    assert stale(last, 30 * DAY, T0 + 30 * DAY + timedelta(microseconds=1))
    assert not stale(last, 30 * DAY, T0 - DAY)  # a clock behind the support
