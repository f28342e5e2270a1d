"""Interval arithmetic of the ledger, as pure functions with no I/O.

A *claim* is one accepted statement "value holds from valid_from (until valid_to)". The ledger's
current belief for one slot (a single-valued key, or one value of a multi-valued key) is a pure
function of its claims, so the result never depends on arrival order:

1. At each valid_from the claim with the highest trust wins (ties between equal values: the
   one with the earliest explicit end, then the earliest recorded).
2. Every winner holds until the next boundary after its start. Boundaries are the winners'
   starts and their explicit ends, so a fact inside an interval closes it and inherits its end,
   and a late fact before all others ends where the next one starts.
3. Adjacent intervals with the same value merge; the earliest claim represents the run, so
   restating the current value adds provenance but no interval. A claim past its retention
   never merges with one within it: a value restated after it expired is a new fact.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum


@dataclass(frozen=True)
class Claim:
    claim_id: str
    value_key: str
    valid_from: datetime
    valid_to: datetime | None
    trust_rank: int
    recorded_order: tuple[datetime, str]
    # Past its retention: it no longer "already holds" for a restatement of its value.
    expired: bool = False


@dataclass(frozen=True)
class Interval:
    fact_id: str
    value_key: str
    valid_from: datetime
    valid_to: datetime | None

    def contains(self, moment: datetime) -> bool:
        return self.valid_from <= moment and (self.valid_to is None or moment < self.valid_to)


def _precedence(claim: Claim) -> tuple[int, bool, bool, datetime, tuple[datetime, str]]:
    """Smaller goes first among claims with the same valid_from: the highest trust; then a
    claim within its retention before an expired one; then, for the same value, an explicit
    end before an open one and the earlier end first (the end is what such claims disagree
    on, and content must decide, not arrival); then the earliest recorded."""
    return (
        -claim.trust_rank,
        claim.expired,
        claim.valid_to is None,
        claim.valid_to or _END_OF_TIME,
        claim.recorded_order,
    )


_END_OF_TIME = datetime.max.replace(tzinfo=UTC)


def winners(claims: Iterable[Claim]) -> list[Claim]:
    """The winning claim at each distinct valid_from, in valid-time order."""
    best: dict[datetime, Claim] = {}
    for claim in claims:
        current = best.get(claim.valid_from)
        if current is None or _precedence(claim) < _precedence(current):
            best[claim.valid_from] = claim
    return [best[start] for start in sorted(best)]


def project(claims: Iterable[Claim]) -> list[Interval]:
    """The current-belief intervals of one slot, sorted, non-overlapping and coalesced."""
    ranked = winners(claims)
    boundaries = sorted(
        {claim.valid_from for claim in ranked}
        | {claim.valid_to for claim in ranked if claim.valid_to is not None}
    )
    intervals: list[Interval] = []
    expired: dict[str, bool] = {}  # of the claim that represents each interval
    for claim in ranked:
        after = bisect_right(boundaries, claim.valid_from)
        end = boundaries[after] if after < len(boundaries) else None
        previous = intervals[-1] if intervals else None
        if (
            previous is not None
            and previous.valid_to == claim.valid_from
            and previous.value_key == claim.value_key
            and expired[previous.fact_id] == claim.expired
        ):
            intervals[-1] = replace(previous, valid_to=end)
        else:
            intervals.append(Interval(claim.claim_id, claim.value_key, claim.valid_from, end))
            expired[claim.claim_id] = claim.expired
    return intervals


def holding_at(intervals: Sequence[Interval], moment: datetime) -> Interval | None:
    return next((interval for interval in intervals if interval.contains(moment)), None)


class Verdict(StrEnum):
    ACCEPT = "accept"
    CONFLICT = "conflict"
    OUTRANKED = "outranked"


def judge(existing: Iterable[Claim], new: Claim) -> tuple[Verdict, Claim | None]:
    """Decide whether `new` may join the slot's claims, against the winner at its valid_from.

    Agreeing with the winner is always accepted (it adds provenance, or raises trust). A
    different value needs strictly higher trust; equal trust is a conflict for a human, lower
    trust loses. Returns the verdict and the winner it was judged against.
    """
    rivals = [claim for claim in existing if claim.valid_from == new.valid_from]
    if not rivals:
        return Verdict.ACCEPT, None
    winner = winners(rivals)[0]
    if winner.value_key == new.value_key or new.trust_rank > winner.trust_rank:
        return Verdict.ACCEPT, winner
    if new.trust_rank == winner.trust_rank:
        return Verdict.CONFLICT, winner
    return Verdict.OUTRANKED, winner
