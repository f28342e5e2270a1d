"""The search read's embedding arm: cosine similarity inside the filtered scope, fused with BM25.

With SGAM_EMBEDDING_MODEL set, the query is embedded once per search (`query_vector`); each
kind's vectors are read with exactly the lexical statement's hard filters (the caller passes
them: `get`'s predicates for facts, the episode rules for episodes) and the vectors of the
current model only, and scored by a dot product (every stored vector has unit length). No
vector index narrows them first: a scope is a subject's rows, hundreds to a few thousand. The
two rankings are fused by reciprocal rank (`fuse`, k = 60). When the endpoint fails, the
search answers from BM25 alone and says so (`SearchResult.vectors`), and the failure is
logged and counted in the embedding spend.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, Select, and_, bindparam, select

from pipeline.db.backends import BINARY_RESULTS
from pipeline.db.models import EpisodeRow, EpisodeVectorRow, FactRow, FactVectorRow
from pipeline.db.store import Store
from pipeline.embedding.client import EmbeddingFailed, client_for
from pipeline.embedding.spend import QUERY, record_spend

log = logging.getLogger("sgam.search")

RRF_K = 60


def query_vector(store: Store, tenant_id: str, text: str) -> list[float] | None:
    """The query's unit vector, or None when the endpoint failed (logged and counted)."""
    try:
        embedded = client_for(store.settings).embed([text])
    except EmbeddingFailed as failure:
        log.warning(
            "search query not embedded; answering lexically",
            extra={"tenant": tenant_id, "attempts": failure.attempts, "error": str(failure)},
        )
        record_spend(
            store, tenant_id, use=QUERY, texts=1, tokens=0, attempts=failure.attempts, failed=True
        )
        return None
    record_spend(
        store,
        tenant_id,
        use=QUERY,
        texts=1,
        tokens=embedded.tokens,
        attempts=embedded.attempts,
        failed=False,
    )
    return embedded.vectors[0]


def fact_similarities(
    connection: Connection,
    conditions: Sequence[Any],
    params: Mapping[str, Any],
    vector: Sequence[float],
    limit: int,
    key: Any = FactRow.row_id,
) -> list[tuple[Any, float]]:
    """The visible facts' (`key`, cosine), best first, at most `limit`."""
    statement = (
        select(key, FactVectorRow.vector)
        .join(FactVectorRow, FactVectorRow.row_id == FactRow.row_id)
        .where(*conditions, FactVectorRow.model == bindparam("model"))
        .execution_options(**{BINARY_RESULTS: True})
    )
    return _best(connection.execute(statement, params).all(), vector, limit)


def scope_vectors(key: Any, joined: Any, conditions: Sequence[Any]) -> Select[Any]:
    """The answerable episodes' vectors, each keyed by `key` (what the BM25 ranking of the
    store keys them by), from `joined` (episodes, with SQLite's search keys)."""
    vectors = EpisodeVectorRow
    return (
        select(key.label("doc"), vectors.vector)
        .select_from(
            joined.join(
                vectors,
                and_(
                    vectors.tenant_id == EpisodeRow.tenant_id,
                    vectors.episode_id == EpisodeRow.episode_id,
                ),
            )
        )
        .where(*conditions, vectors.model == bindparam("model"))
        .execution_options(**{BINARY_RESULTS: True})
    )


def episode_similarities(
    connection: Connection,
    statement: Select[Any],
    params: Mapping[str, Any],
    vector: Sequence[float],
    limit: int,
) -> list[tuple[Any, float]]:
    """The answerable episodes' (key, cosine), best first, at most `limit`."""
    return _best(connection.execute(statement, params).all(), vector, limit)


def _best(rows: Sequence[Any], vector: Sequence[float], limit: int) -> list[tuple[Any, float]]:
    """The rows nearest the query; an unrelated one (cosine 0 or less) is not ranked.

    The scope's vectors are scored as one matrix (numpy, imported only when the arm is on):
    a dot product a row in Python took 12 ms for 600 rows of 768 dimensions, the matrix
    product 0.7 (`bench/vector_scoring.py`). In float32, as stored: widening the scope to
    float64 first took longer than the product, and moves a cosine by about 1e-7."""
    if not rows:
        return []
    import numpy

    # float32 in the machine's order, as `vectors.encode` packs them
    stored = numpy.frombuffer(b"".join(blob for _, blob in rows), dtype=numpy.float32)
    cosines = stored.reshape(len(rows), -1) @ numpy.asarray(vector, dtype=numpy.float32)
    scored = [(key, float(cosine)) for (key, _), cosine in zip(rows, cosines, strict=True)]
    scored = [(key, cosine) for key, cosine in scored if cosine > 0]
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:limit]


def fuse(
    lexical: Sequence[tuple[Any, float]], similar: Sequence[tuple[Any, float]], limit: int
) -> dict[Any, float]:
    """Reciprocal-rank fusion of two rankings (each best first): every document's sum of
    1 / (k + rank) over the rankings it is in; the best `limit`, by fused score."""
    fused: dict[Any, float] = {}
    for ranking in (lexical, similar):
        for rank, (doc, _score) in enumerate(ranking, start=1):
            fused[doc] = fused.get(doc, 0.0) + 1.0 / (RRF_K + rank)
    best = sorted(fused.items(), key=lambda item: (-item[1], str(item[0])))[:limit]
    return dict(best)
