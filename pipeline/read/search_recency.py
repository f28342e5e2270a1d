"""The order of the episodes a search answers: among close scores, what was said last first.

A later episode's BM25 score is lifted by how late it was said among the episodes ranked with
it: the latest gains RECENCY of its score, the earliest nothing. What was said last about a
thing is usually what holds (a rescheduled date, a changed plan). With the embedding arm, the
lift orders the lexical arm before the fusion (`search_vectors.fuse`): a reciprocal-rank score
leaves too little room between ranks for a lift of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from schemas.results import FoundEpisode

# Measured on BEAM's knowledge-update questions (bench/README.md).
RECENCY = 1.0


def lifted(rows: Sequence[Any], scores: Mapping[Any, float]) -> list[tuple[Any, float]]:
    """(doc, lifted score) of each row (with `doc` and `occurred_at`), best first. Only the
    order changes (which episodes are ranked is the caller's choice), so recency never costs
    recall."""
    moments = sorted({row.occurred_at for row in rows})
    last = max(len(moments) - 1, 1)
    position = {moment: index / last for index, moment in enumerate(moments)}
    ranked = [
        (row.doc, scores[row.doc] * (1 + RECENCY * position[row.occurred_at]), row.episode_id)
        for row in rows
    ]
    ranked.sort(key=lambda item: (-item[1], item[2]))
    return [(doc, score) for doc, score, _ in ranked]


def found(row: Any, score: float) -> FoundEpisode:
    return FoundEpisode(
        episode_id=row.episode_id,
        occurred_at=row.occurred_at,
        session_id=row.session_id,
        snippet=row.text,  # cut to a snippet once the best are known
        score=score,
    )
