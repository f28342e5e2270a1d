"""The order of the episodes a search answers: a later episode about the same thing first.

When two episodes speak of the same thing and the later one updates it (a rescheduled date, a
changed count), the caller wants the later one. Among the episodes ranked, a later episode
speaks of the same thing as an earlier one when it matches at least SAME_THING of the
earlier one's matched query terms, weighed by their IDF in the scope; it then takes the
earlier one's score when that is higher, and among equal scores the later comes first. An
episode that matched no query term of its own (one found by its neighbours, `search_turns`)
supersedes nothing. With the embedding arm, this orders the fused ranking (BM25's and the
cosine's by reciprocal rank, `search_vectors.fuse`): ordering the BM25 arm before the fusion
instead let the cosine arm put the original back on top (update-first 0.35 against 0.60 on
BEAM, bench/README.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from schemas.results import FoundEpisode

# Two thirds of the earlier episode's query weight: measured on BEAM's knowledge-update
# questions against recall@5 (bench/README.md); a half lifts unrelated later mentions.
SAME_THING = 2 / 3


def superseding(
    rows: Sequence[Any], scores: Mapping[Any, float], weights: Mapping[Any, Mapping[str, float]]
) -> list[tuple[Any, float]]:
    """(doc, score) of each row (with `doc`, `occurred_at` and `episode_id`), best first,
    a later episode about the same thing as an earlier one given at least its score. Only
    the order changes (which episodes are ranked is the caller's choice), so this never
    costs recall."""
    said = sorted(rows, key=lambda row: (row.occurred_at, row.episode_id))
    effective: dict[Any, float] = {}
    for row in said:
        own = weights.get(row.doc, {})
        score = scores[row.doc]
        for earlier, value in effective.items():
            theirs = weights.get(earlier, {})
            total = sum(theirs.values())
            shared = sum(weight for term, weight in theirs.items() if term in own)
            if total > 0 and shared >= SAME_THING * total:
                score = max(score, value)
        effective[row.doc] = score
    order = {row.doc: index for index, row in enumerate(said)}
    return sorted(effective.items(), key=lambda item: (-item[1], -order[item[0]]))


def found(row: Any, score: float) -> FoundEpisode:
    return FoundEpisode(
        episode_id=row.episode_id,
        occurred_at=row.occurred_at,
        session_id=row.session_id,
        snippet=row.text,  # cut to a snippet once the best are known
        score=score,
    )
