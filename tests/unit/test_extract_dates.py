"""Date expressions resolved against the episode's own calendar day."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from pipeline.extract.dates import resolve_date, resolve_instant

WEDNESDAY = datetime(2026, 6, 3, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2026-06-30", date(2026, 6, 30)),
        ("June 30, 2026", date(2026, 6, 30)),
        ("Jun 30th 2026", date(2026, 6, 30)),
        ("30 June 2026", date(2026, 6, 30)),
        ("30th of June, 2026", date(2026, 6, 30)),
        ("June 30", date(2026, 6, 30)),
        ("June 2026", date(2026, 6, 1)),
        ("today", date(2026, 6, 3)),
        ("tomorrow", date(2026, 6, 4)),
        ("yesterday", date(2026, 6, 2)),
        ("next Friday", date(2026, 6, 5)),
        ("next Wednesday", date(2026, 6, 10)),
        ("this Wednesday", date(2026, 6, 3)),
        ("in two weeks", date(2026, 6, 17)),
        ("in 3 days", date(2026, 6, 6)),
        ("in a month", date(2026, 7, 3)),
        ("two weeks ago", date(2026, 5, 20)),
        ("last March", date(2026, 3, 1)),
        ("last July", date(2025, 7, 1)),
        ("last month", date(2026, 5, 1)),
        ("last year", date(2025, 1, 1)),
        ("last week", date(2026, 5, 25)),  # the Monday of the week before
        ("30/06/2026", None),  # slash dates only with the day-first setting
        ("February 30, 2026", None),
        ("someday", None),
        ("", None),
    ],
)
def test_resolve_date(expression: str, expected: date | None) -> None:
    assert resolve_date(expression, WEDNESDAY) == expected


def test_slash_dates_need_day_first() -> None:
    assert resolve_date("03/04/2026", WEDNESDAY, day_first=True) == date(2026, 4, 3)
    assert resolve_date("31/12/2026", WEDNESDAY, day_first=True) == date(2026, 12, 31)
    assert resolve_date("12/31/2026", WEDNESDAY, day_first=True) is None


def test_relative_dates_use_the_speakers_calendar_day() -> None:
    # 22:00 on 3 June in UTC-7 is already 4 June in UTC: "tomorrow" is the 4th for the speaker.
    evening = datetime(2026, 6, 3, 22, 0, tzinfo=timezone(timedelta(hours=-7)))
    assert resolve_date("tomorrow", evening) == date(2026, 6, 4)
    assert resolve_instant("tomorrow", evening) == datetime(2026, 6, 4, 7, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-06-01", datetime(2026, 6, 1, tzinfo=UTC)),
        ("2026-06-01T08:30:00+02:00", datetime(2026, 6, 1, 6, 30, tzinfo=UTC)),
        ("2026-06-01T08:30:00", datetime(2026, 6, 1, 8, 30, tzinfo=UTC)),  # episode's offset
        ("last March", datetime(2026, 3, 1, tzinfo=UTC)),
    ],
)
def test_resolve_instant(text: str, expected: datetime) -> None:
    assert resolve_instant(text, WEDNESDAY) == expected


def test_resolve_instant_refuses_other_text() -> None:
    with pytest.raises(ValueError, match="not a date"):
        resolve_instant("when I was young", WEDNESDAY)
