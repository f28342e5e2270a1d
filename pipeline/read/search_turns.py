"""An episode is read with the turns around it: a search's episode score is its own BM25
plus NEIGHBOUR times the better BM25 of the episodes said just before and just after it in
its session (ordered by when they were said). A query that asks about the course of the
conversation (`asks_over_time`) has its answer spread over the sessions that match: each
episode's score is multiplied by SPREAD once for each better-scoring episode of its own
session.

A turn's meaning often sits in the turn beside it: the answer to a question, the short
follow-up ("yes, and it failed again") to a message that named the thing. So an episode that
matches the query lifts its neighbours, and one whose own words miss the query can be found
through them, below what matches outright. Neighbours are taken inside the filtered scope,
so a hidden episode neither lifts nor separates the ones around it.

Why spread, and why only then: "in which order did I bring up ... throughout our
conversations?" or "how many times did I move the deadline?" want a turn from
each session that speaks of it, and one session's many close matches would otherwise fill
the answer. Multiplying by SPREAD per better turn of the same session is what a greedy pick
that discounts a session by each turn already taken from it returns, in one window function:
within a session the order never changes; a session's second best falls below another's best
when within 15 % of it (its third within 28 %, ...). A plain question ("what did Anna say
about her new job?") wants the cluster of turns where it was said: spreading every query
cost LoCoMo's episodes 0.04 of recall@10 (0.686 to 0.644, bench/HISTORY.md). The
episodes of no session count as one session, as the neighbour window takes them.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import Float, Select, bindparam, case, func, null, or_, select, union_all

# Measured on LoCoMo turns and BEAM messages (bench/README.md): a third of a neighbour's score
# lifted recall@10 on both; a half began to push outright matches out of the ten on BEAM.
NEIGHBOUR = 0.3
# Measured on BEAM (bench/README.md): 0.7-0.9 lift recall@10 alike.
SPREAD = 0.85
# Words by which a question asks about the course of the conversation rather than one moment;
# "how many" counts what was said, so it gathers from every session that said it.
OVER_TIME = re.compile(
    r"\b(across|throughout|order|sequence|over time|conversations?|sessions?|evolved?"
    r"|progress(?:ed)?|how many)\b",
    re.IGNORECASE,
)


def asks_over_time(query: str) -> bool:
    return OVER_TIME.search(query) is not None


def spread(query: str) -> float:
    """The factor per better turn of the same session for `query`: SPREAD when it asks
    about the course of the conversation, else 1 (no spread)."""
    return SPREAD if asks_over_time(query) else 1.0


def with_neighbours(scope: Any, scored: Any) -> Select[Any]:
    """(doc, score, weights, near) of every episode of `scope` (doc, session_id, occurred_at)
    that matched or sits beside one that did (`scored`: doc, score, weights), best first,
    spread over the sessions by the bound `spread` (1: not at all); `near` is the better BM25
    of the two beside it."""
    # The scope with each episode's own score: the matched ones joined to the scope, the
    # rest outside the scored set. A LEFT JOIN says the same, but SQLite scans the scores
    # once per episode of the scope for it (124 of a 127 ms search at 5,882 episodes).
    matched = select(
        scope.c.doc, scope.c.session_id, scope.c.occurred_at, scored.c.score, scored.c.weights
    ).join(scored, scored.c.doc == scope.c.doc)
    unmatched = select(
        scope.c.doc,
        scope.c.session_id,
        scope.c.occurred_at,
        null().label("score"),
        null().label("weights"),
    ).where(scope.c.doc.not_in(select(scored.c.doc)))
    own = union_all(matched, unmatched).subquery("own")
    window: dict[str, Any] = {
        "partition_by": own.c.session_id,
        "order_by": (own.c.occurred_at, own.c.doc),
    }
    around = select(
        own.c.doc,
        own.c.session_id,
        own.c.score.label("own"),
        own.c.weights,
        func.lag(own.c.score).over(**window).label("before"),
        func.lead(own.c.score).over(**window).label("after"),
    ).cte("around")
    near_before = func.coalesce(around.c.before, 0.0)
    near_after = func.coalesce(around.c.after, 0.0)
    near = case((near_before > near_after, near_before), else_=near_after)
    read = (func.coalesce(around.c.own, 0.0) + NEIGHBOUR * near).label("read")
    beside = (
        select(around.c.doc, around.c.session_id, read, around.c.weights, near.label("near"))
        .where(
            or_(
                around.c.own.is_not(None),
                around.c.before.is_not(None),
                around.c.after.is_not(None),
            )
        )
        .cte("beside")
    )
    better = func.row_number().over(
        partition_by=beside.c.session_id, order_by=(beside.c.read.desc(), beside.c.doc)
    )
    score = (beside.c.read * func.power(bindparam("spread", type_=Float), better - 1)).label(
        "score"
    )
    return (
        select(beside.c.doc, score, beside.c.weights, beside.c.near)
        .order_by(score.desc(), beside.c.doc)
        .limit(bindparam("limit"))
    )
