"""The search read: a subject's facts and episodes that speak of the query, best first.

Hard filters come first, in the ranking statement itself: the scope and subject, and for facts
exactly `get`'s predicates (`facts.visible`: now, `at`, `known_at`, never a superseded,
expired, forgotten or — unless a reviewer asks — quarantined one); for episodes, the scope,
no forget tombstone, not purged, said by `at` and received by `known_at`, and not untrusted
unless a reviewer asks (`episode_rules`). The text index only narrows the candidates. BM25
(k1 1.2, b 0.75) takes its document frequencies and lengths from that filtered scope, never
the whole table, so other tenants' rows and hidden versions never move a score.

An episode is scored with the turns beside it in its session, spread over the sessions when
the query asks about the course of the conversation (`search_turns`), and among
the episodes answered a later one about the same thing as an earlier one takes its score and
comes first (`search_recency`). With SGAM_EMBEDDING_MODEL set, each kind's BM25 ranking is
fused by reciprocal rank with a cosine ranking over the same filtered scope
(`search_vectors`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import Connection, select

from pipeline.db.models import FACT_COLUMNS, FactRow
from pipeline.db.store import Store
from pipeline.read import search_recency as recency
from pipeline.read import search_statements as statements
from pipeline.read import search_turns as turns
from pipeline.read import search_vectors as vectors
from pipeline.read.facts import SubjectQuery, visible
from pipeline.read.search_terms import query_words, snippet, stems
from pipeline.validation import parse
from schemas.fields import Text, UtcDatetime
from schemas.results import FoundEpisode, FoundFact, SearchKind, SearchResult, VectorArm

MAX_LIMIT = 100
MAX_QUERY_CHARS = 2_000
RELEVANCE_LIMIT = 100_000  # context ranks every matching fact and episode of a scope
# `kinds` as a door that takes text names it: comma-separated.
KINDS_PATTERN = "^(facts|episodes)(,(facts|episodes))?$"


class SearchQuery(SubjectQuery):
    query: Annotated[Text, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
    kinds: list[SearchKind] = Field(default=[SearchKind.FACTS, SearchKind.EPISODES], min_length=1)
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    at: UtcDatetime | None = None
    known_at: UtcDatetime | None = None
    include_quarantined: bool = False


# The query's vector for the embedding arm and what the answer says of the arm (`_arm`).
Embedded = tuple[list[float] | None, VectorArm | None]


def search(
    store: Store, query: SearchQuery | Mapping[str, Any], *, embedded: Embedded | None = None
) -> SearchResult:
    """The facts and episodes of one subject that match the query, within each kind best
    first; nothing for a query without a usable word (all stop words). `embedded` is the
    query's vector when the caller has it already (context, from its `relevance`)."""
    query = parse(SearchQuery, query)
    return _search(store, query, embedded)


@dataclass(frozen=True)
class Relevance:
    """What context assembly ranks a scope's facts by: every matching visible fact's BM25
    score by fact id, for every episode beside one that matches the better BM25 of the
    turns said just before and after it (`search_turns`) by episode id, and with the
    embedding arm every visible fact's cosine to the query by fact id (`similar`), and the
    query's vector, for the episodes' search of the same query (`embedded`)."""

    facts: dict[str, float] = field(default_factory=dict)
    beside: dict[str, float] = field(default_factory=dict)
    similar: dict[str, float] = field(default_factory=dict)
    embedded: Embedded = (None, None)


def relevance(store: Store, query: SearchQuery | Mapping[str, Any]) -> Relevance:
    """The scope's relevance to the query with no limit (up to RELEVANCE_LIMIT of each)."""
    query = parse(SearchQuery, query)
    words = query_words(store.catalog, query.query)
    if not words:
        return Relevance()
    postgres, params = store.is_postgres, _params(store, query, RELEVANCE_LIMIT)
    known, quarantined = query.known_at is not None, query.include_quarantined
    embedded = _arm(store, query)
    vector = embedded[0]
    with store.reading() as connection:
        if not _with_terms(connection, params, words, postgres):
            return Relevance()
        facts = connection.execute(statements.fact_scores(postgres, known, quarantined), params)
        beside = connection.execute(statements.beside_scores(postgres, known, quarantined), params)
        similar = []
        if vector is not None:
            conditions = visible("get", known, quarantined)
            similar = vectors.fact_similarities(
                connection, conditions, params, vector, RELEVANCE_LIMIT, key=FactRow.fact_id
            )
        return Relevance(
            facts={fact_id: float(score) for fact_id, score in facts},
            beside={episode_id: float(near) for episode_id, near in beside},
            similar=dict(similar),
            embedded=embedded,
        )


def _params(store: Store, query: SearchQuery, limit: int) -> dict[str, Any]:
    now = store.clock()
    params = query.model_dump(include={"tenant_id", "agent_id", "purpose", "subject", "known_at"})
    return params | {
        "now": now,
        "at": query.at or now,
        "limit": limit,
        "spread": turns.spread(query.query),
        "model": store.settings.embedding_model,  # the arm's vectors, when it is on
    }


def _arm(store: Store, query: SearchQuery) -> Embedded:
    """The query's vector for the embedding arm (`search_vectors`), and what the answer says
    of the arm: None when it is off, FAILED when the query could not be embedded."""
    if not store.settings.embedding_configured:
        return None, None
    vector = vectors.query_vector(store, query.tenant_id, query.query)
    return vector, VectorArm.FAILED if vector is None else VectorArm.FUSED


def _with_terms(
    connection: Connection, params: dict[str, Any], words: Sequence[str], postgres: bool
) -> bool:
    """Adds the query's stemmed terms to `params`; False when none is left."""
    terms = stems(connection, words, postgres)
    params |= {"terms": terms, "tsquery": " | ".join(map(statements.lexeme, terms))}
    return bool(terms)


def _search(store: Store, query: SearchQuery, embedded: Embedded | None) -> SearchResult:
    words = query_words(store.catalog, query.query)
    if not words:
        return SearchResult(query=query.query)
    vector, arm = _arm(store, query) if embedded is None else embedded
    params, postgres = _params(store, query, query.limit), store.is_postgres
    with store.reading() as connection:
        if not _with_terms(connection, params, words, postgres):
            return SearchResult(query=query.query)
        facts = (
            _facts(connection, query, params, postgres, vector)
            if SearchKind.FACTS in query.kinds
            else []
        )
        episodes = (
            _episodes(connection, query, params, postgres, words, vector)
            if SearchKind.EPISODES in query.kinds
            else []
        )
    return SearchResult(query=query.query, facts=facts, episodes=episodes, vectors=arm)


# -- facts ---------------------------------------------------------------------------------


def _facts(
    connection: Connection,
    query: SearchQuery,
    params: dict[str, Any],
    postgres: bool,
    vector: list[float] | None,
) -> list[FoundFact]:
    known, quarantined = query.known_at is not None, query.include_quarantined
    ranked: Sequence[Any] = connection.execute(
        statements.fact_ranking(postgres, known, quarantined), params
    ).all()
    if vector is not None:
        conditions = visible("get", known, quarantined)
        similar = vectors.fact_similarities(connection, conditions, params, vector, params["limit"])
        ranked = list(vectors.fuse(ranked, similar, params["limit"]).items())
    if not ranked:
        return []
    scores = {doc: float(score) for doc, score in ranked}
    columns = [getattr(FactRow, name) for name in FACT_COLUMNS]
    rows = connection.execute(
        select(FactRow.row_id, *columns).where(FactRow.row_id.in_(list(scores)))
    ).all()
    found = [
        FoundFact.model_validate({**row._mapping, "score": scores[row.row_id]}) for row in rows
    ]
    return sorted(found, key=lambda fact: (-fact.score, fact.attribute, fact.fact_id))


# -- episodes ------------------------------------------------------------------------------


def _episodes(
    connection: Connection,
    query: SearchQuery,
    params: dict[str, Any],
    postgres: bool,
    words: Sequence[str],
    vector: list[float] | None,
) -> list[FoundEpisode]:
    known, quarantined = query.known_at is not None, query.include_quarantined
    ranking, fetch, similar = statements.episode_statements(postgres, known, quarantined)
    ranked_rows = connection.execute(ranking, params).all()
    scores = {row.doc: float(row.score) for row in ranked_rows}
    weights = {row.doc: _weights(row.weights) for row in ranked_rows}
    close = []
    if vector is not None:
        close = vectors.episode_similarities(connection, similar, params, vector, params["limit"])
    docs = list(scores) + [doc for doc, _ in close if doc not in scores]
    if not docs:
        return []
    rows = connection.execute(fetch, {"tenant_id": query.tenant_id, "docs": docs}).all()
    by_doc = {row.doc: row for row in rows}
    if vector is not None:  # the BM25 ranking fused with the cosine's, then in recency order
        lexical = sorted(scores.items(), key=lambda item: (-item[1], str(item[0])))
        fused = vectors.fuse(lexical, close, params["limit"])
        ranked = recency.superseding([by_doc[doc] for doc in fused], fused, weights)
    else:
        ranked = recency.superseding([row for row in rows if row.doc in scores], scores, weights)
    best = [recency.found(by_doc[doc], score) for doc, score in ranked]
    return [
        episode.model_copy(update={"snippet": snippet(episode.snippet, words)}) for episode in best
    ]


def _weights(stored: Any) -> dict[str, float]:
    """The matched terms' IDF as the ranking returns them: JSON text on SQLite, decoded on
    PostgreSQL, none for an episode found by its neighbours only."""
    if stored is None:
        return {}
    decoded = json.loads(stored) if isinstance(stored, str) else stored
    return {str(term): float(weight) for term, weight in decoded.items()}
