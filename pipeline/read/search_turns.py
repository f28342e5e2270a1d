"""An episode is read with the turns around it: a search's episode score is its own BM25
plus NEIGHBOUR times the better BM25 of the episodes said just before and just after it in
its session (ordered by when they were said).

A turn's meaning often sits in the turn beside it: the answer to a question, the short
follow-up ("yes, and it failed again") to a message that named the thing. So an episode that
matches the query lifts its neighbours, and one whose own words miss the query can be found
through them, below what matches outright. Neighbours are taken inside the filtered scope,
so a hidden episode neither lifts nor separates the ones around it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, bindparam, case, func, or_, select

# Measured on LoCoMo turns and BEAM messages (bench/README.md): a third of a neighbour's score
# lifted recall@10 on both; a half began to push outright matches out of the ten on BEAM.
NEIGHBOUR = 0.3


def with_neighbours(scope: Any, scored: Any) -> Select[Any]:
    """(doc, score, weights, near) of every episode of `scope` (doc, session_id, occurred_at)
    that matched or sits beside one that did (`scored`: doc, score, weights), best first;
    `near` is the better BM25 of the two beside it."""
    window = {"partition_by": scope.c.session_id, "order_by": (scope.c.occurred_at, scope.c.doc)}
    around = select(
        scope.c.doc,
        func.lag(scope.c.doc).over(**window).label("before"),
        func.lead(scope.c.doc).over(**window).label("after"),
    ).cte("around")
    own, before, after = scored.alias("own"), scored.alias("before"), scored.alias("after")
    near_before = func.coalesce(before.c.score, 0.0)
    near_after = func.coalesce(after.c.score, 0.0)
    near = case((near_before > near_after, near_before), else_=near_after)
    score = (func.coalesce(own.c.score, 0.0) + NEIGHBOUR * near).label("score")
    return (
        select(around.c.doc, score, own.c.weights, near.label("near"))
        .select_from(
            around.outerjoin(own, own.c.doc == around.c.doc)
            .outerjoin(before, before.c.doc == around.c.before)
            .outerjoin(after, after.c.doc == around.c.after)
        )
        .where(or_(own.c.doc.is_not(None), before.c.doc.is_not(None), after.c.doc.is_not(None)))
        .order_by(score.desc(), around.c.doc)
        .limit(bindparam("limit"))
    )
