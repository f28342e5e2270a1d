"""Dates in what people write, resolved against the episode's own calendar day.

Read forms (case-insensitive; the whole expression must match):

- ISO `2026-06-30`; `June 30, 2026`, `Jun 30th 2026`, `30 June 2026`, `30th of June, 2026`;
  without a year (`June 30`) the episode's year; `June 2026` is the first of the month
- `30/06/2026` only when `day_first` is set (SGAM_DATES_DAY_FIRST): never guessed
- `today`, `tomorrow`, `yesterday`
- `next Friday` / `this Friday`: the first Friday after the episode's day / on or after it
- `in two weeks`, `in 3 days`, `in a month`; `two weeks ago`
- `last March`: the first of the most recent March before the episode's month
- `last month` / `last year`: the first of the month (year) before the episode's;
  `last week`: the Monday of the week before

Anything else is not a date to the rules extractor (the LLM path handles free phrasing).
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, time, timedelta

from dateutil.relativedelta import relativedelta

from schemas.fields import to_utc

_MONTHS = {name.lower(): index for index, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): index for index, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): index for index, name in enumerate(calendar.day_name)}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_UNITS = {"day": "days", "week": "weeks", "month": "months", "year": "years"}

_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_AMOUNT = r"(?P<amount>\d{1,3}|" + "|".join(_NUMBERS) + ")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_WEEKDAY = "(?P<weekday>" + "|".join(_WEEKDAYS) + ")"

_PATTERNS = (
    r"(?P<iso>\d{4}-\d{2}-\d{2})",
    r"(?P<d>\d{1,2})/(?P<m>\d{1,2})/(?P<y>\d{4})",
    r"(?P<word>today|tomorrow|yesterday)",
    r"(?P<which>next|this)\s+" + _WEEKDAY,
    r"in\s+" + _AMOUNT + r"\s+" + _UNIT,
    _AMOUNT + r"\s+" + _UNIT + r"\s+(?P<ago>ago)",
    r"last\s+(?P<period>week|month|year)",
    r"last\s+" + _MONTH,
    _MONTH + r"\s+" + _DAY + r"(?:,?\s+" + _YEAR + ")?",
    _DAY + r"\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+" + _YEAR + ")?",
    _MONTH + r"\s+" + _YEAR,
)
_FORMS = [re.compile(pattern, re.IGNORECASE) for pattern in _PATTERNS]
# The same forms as one alternation without group names, to find a date inside a sentence.
DATE_EXPRESSION = "|".join(f"(?:{re.sub(r'[(][?]P<[a-z]+>', '(?:', p)})" for p in _PATTERNS)
# The forms that count back from the episode's day, which people put after what they state
# ("I moved to Lisbon two weeks ago", "... last month") with no word before them.
TRAILING_EXPRESSION = "|".join(
    f"(?:{re.sub(r'[(][?]P<[a-z]+>', '(?:', p)})" for p in _PATTERNS[5:8]
)


def resolve_date(expression: str, origin: datetime, *, day_first: bool = False) -> date | None:
    """The calendar date `expression` names, counted from `origin`'s own day; None when it is
    not one of the forms above or names no real date (February 30)."""
    text = expression.strip()
    today = origin.date()
    for form in _FORMS:
        match = form.fullmatch(text)
        if match is None:
            continue
        try:
            return _resolve(match.groupdict(), today, day_first)
        except ValueError:
            return None
    return None


def _resolve(parts: dict[str, str | None], today: date, day_first: bool) -> date | None:
    if parts.get("iso"):
        return date.fromisoformat(str(parts["iso"]))
    if parts.get("d"):
        if not day_first:
            return None  # 03/04/2026 is 3 April or 4 March: only an explicit setting decides
        return date(int(str(parts["y"])), int(str(parts["m"])), int(str(parts["d"])))
    word = (parts.get("word") or "").lower()
    if word:
        return today + timedelta(days={"today": 0, "tomorrow": 1, "yesterday": -1}[word])
    if parts.get("weekday"):
        target = _WEEKDAYS[str(parts["weekday"]).lower()]
        ahead = (target - today.weekday()) % 7
        if ahead == 0 and str(parts["which"]).lower() == "next":
            ahead = 7
        return today + timedelta(days=ahead)
    period = (parts.get("period") or "").lower()
    if period == "week":
        return today - timedelta(days=today.weekday() + 7)
    if period == "month":
        return (today.replace(day=1) - timedelta(days=1)).replace(day=1)
    if period == "year":
        return date(today.year - 1, 1, 1)
    if parts.get("unit"):
        amount_text = str(parts["amount"]).lower()
        amount = _NUMBERS[amount_text] if amount_text in _NUMBERS else int(amount_text)
        unit = _UNITS[str(parts["unit"]).lower()]
        step = relativedelta(
            days=amount if unit == "days" else 0,
            weeks=amount if unit == "weeks" else 0,
            months=amount if unit == "months" else 0,
            years=amount if unit == "years" else 0,
        )
        return today - step if parts.get("ago") else today + step
    month = _MONTHS[str(parts["month"]).lower()]
    if parts.get("day") is None:
        if parts.get("year"):
            return date(int(str(parts["year"])), month, 1)
        year = today.year if month < today.month else today.year - 1  # "last March"
        return date(year, month, 1)
    year = int(str(parts["year"])) if parts.get("year") else today.year
    return date(year, month, int(str(parts["day"])))


def start_of_day(day: date, origin: datetime) -> datetime:
    """Midnight of `day` in the episode's own offset: when a date-only fact starts to hold."""
    return datetime.combine(day, time(), tzinfo=origin.tzinfo)


def resolve_instant(text: str, origin: datetime, *, day_first: bool = False) -> datetime:
    """An instant from a model's `valid_from`: RFC 3339 (naive read in the episode's offset),
    a date, or one of the date forms above. ValueError when it is none of them."""
    stripped = text.strip()
    try:
        moment = datetime.fromisoformat(stripped)
    except ValueError:
        day = resolve_date(stripped, origin, day_first=day_first)
        if day is None:
            raise ValueError(f"{text!r} is not a date or an RFC 3339 timestamp") from None
        return to_utc(start_of_day(day, origin))
    if len(stripped) == 10:  # a bare date parses as naive midnight
        return to_utc(start_of_day(moment.date(), origin))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=origin.tzinfo)
    return to_utc(moment)
