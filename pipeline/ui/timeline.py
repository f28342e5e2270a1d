"""The timeline picture of one attribute, computed on the server (pure, no I/O): every recorded
row version is one row, its valid-time interval a bar on a shared time axis.

Rows run in valid-time order (what held first on top). Reading it: a bar drawn solid is a
version the ledger still believes; a hatched one was superseded (the row says when it was
recorded and when it stopped being believed); the dashed line is now; the small mark on a bar's
row is when that version was recorded. So "what was true on X" is the solid bar above X, and
"what did we believe on Y" is every bar whose recorded interval contains Y.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from schemas.facts import Fact
from schemas.fields import format_utc

WIDTH = 800  # viewBox units; the SVG scales to the page's width
ROW = 44
TOP = 28


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    open_ended: bool  # still valid: drawn to the right edge with an arrow
    believed: bool  # not superseded
    label: str  # the value
    caption: str  # valid and recorded intervals, in words
    recorded_x: float = 0.0  # when the version was recorded, on the same axis


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Timeline:
    bars: list[Bar]
    ticks: list[Tick]
    height: float
    now_x: float = WIDTH
    width: int = WIDTH


def value_label(value: object, limit: int = 60) -> str:
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def timeline(versions: Sequence[Fact], now: datetime) -> Timeline:
    """One row per version, in valid-time order (versions valid from the same instant in the
    order they were recorded)."""
    rows = sorted(versions, key=lambda f: (f.valid_from, f.recorded_at, f.version, f.fact_id))
    if not rows:
        return Timeline([], [], TOP)
    start = min(min(f.valid_from, f.recorded_at) for f in rows)
    ends = [f.valid_to for f in rows if f.valid_to is not None]
    end = max([now, *ends])
    span = max((end - start).total_seconds(), 1.0)
    start -= timedelta(seconds=span * 0.02)  # a margin so a bar's start is visible
    span *= 1.06

    def x(moment: datetime) -> float:
        return round((moment - start).total_seconds() / span * WIDTH, 1)

    bars = []
    for index, fact in enumerate(rows):
        left = x(fact.valid_from)
        right = x(fact.valid_to) if fact.valid_to is not None else WIDTH
        believed = fact.superseded_at is None
        caption = (
            f"valid {_minute(fact.valid_from)} – {_minute(fact.valid_to) or 'now'}; "
            f"recorded {_minute(fact.recorded_at)}"
            + ("" if believed else f", superseded {_minute(fact.superseded_at)}")
        )
        bars.append(
            Bar(
                x=left,
                y=TOP + index * ROW + 16,
                width=max(right - left, 2.0),
                open_ended=fact.valid_to is None,
                believed=believed,
                label=value_label(fact.value),
                caption=caption,
                recorded_x=x(fact.recorded_at),
            )
        )
    return Timeline(bars, _ticks(start, span), TOP + len(rows) * ROW + 8, now_x=x(now))


def _ticks(start: datetime, span: float, count: int = 5) -> list[Tick]:
    return [
        Tick(
            round(WIDTH * i / count, 1),
            _day(start + timedelta(seconds=span * i / count)) or "",
        )
        for i in range(count + 1)
    ]


def _day(moment: datetime | None) -> str | None:
    stamp = format_utc(moment)
    return stamp[:10] if stamp is not None else None


def _minute(moment: datetime | None) -> str | None:
    """The pages' one format: `2026-03-01 09:00 UTC`."""
    stamp = format_utc(moment)
    return stamp[:16].replace("T", " ") + " UTC" if stamp is not None else None
