"""When a candidate is promoted: pure functions over its support, no I/O.

Support is counted in distinct sessions (an episode without a session counts as its own), on
the episodes' own times: N sessions within the window, measured back from the latest support.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from schemas.buffer import SupportRecord


def sessions(supports: Sequence[SupportRecord], window: timedelta | None = None) -> int:
    """Distinct sessions among the supports; with `window`, only those within it of the
    latest support."""
    if not supports:
        return 0
    latest = max(support.occurred_at for support in supports)
    counted = {
        support.session_id or f"episode:{support.episode_id}"
        for support in supports
        if window is None or latest - support.occurred_at <= window
    }
    return len(counted)


def eligible(supports: Sequence[SupportRecord], times: int | None, window: timedelta) -> bool:
    """Whether recurrence alone promotes the candidate (`times` None: only a confirmation)."""
    return times is not None and sessions(supports, window) >= times


def first_support(supports: Sequence[SupportRecord]) -> SupportRecord:
    """The support a promoted fact takes its valid_from, source episode and evidence from:
    the one whose statement starts first (then the earliest episode)."""
    return min(supports, key=lambda s: (s.valid_from, s.occurred_at, s.episode_id))


def stale(last_seen: datetime, window: timedelta, now: datetime) -> bool:
    """No support inside the window any more: the candidate expires at consolidation."""
    return now - last_seen > window
