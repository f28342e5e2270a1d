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
from functools import cache
from typing import Annotated, Any

from pydantic import Field
from sqlalchemy import Connection, Float, Select, and_, bindparam, cast, func, select, true
from sqlalchemy import column as sql_column
from sqlalchemy import table as sql_table
from sqlalchemy.dialects.postgresql import TSQUERY

from pipeline.db import search_index
from pipeline.db.models import FACT_COLUMNS, EpisodeRow, FactRow
from pipeline.db.store import Store
from pipeline.read import search_recency as recency
from pipeline.read import search_turns as turns
from pipeline.read import search_vectors as vectors
from pipeline.read.episode_rules import answerable
from pipeline.read.facts import SubjectQuery, visible
from pipeline.read.search_terms import query_words, snippet, stems
from pipeline.validation import parse
from schemas.fields import Text, UtcDatetime
from schemas.results import FoundEpisode, FoundFact, SearchKind, SearchResult, VectorArm

K1, B = 1.2, 0.75
MAX_LIMIT = 100
MAX_QUERY_CHARS = 2_000
RELEVANCE_LIMIT = 100_000  # context ranks every matching fact of a scope
# `kinds` as a door that takes text names it: comma-separated.
KINDS_PATTERN = "^(facts|episodes)(,(facts|episodes))?$"


class SearchQuery(SubjectQuery):
    query: Annotated[Text, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
    kinds: list[SearchKind] = Field(default=[SearchKind.FACTS, SearchKind.EPISODES], min_length=1)
    limit: int = Field(default=10, ge=1, le=MAX_LIMIT)
    at: UtcDatetime | None = None
    known_at: UtcDatetime | None = None
    include_quarantined: bool = False


def search(store: Store, query: SearchQuery | Mapping[str, Any]) -> SearchResult:
    """The facts and episodes of one subject that match the query, within each kind best
    first; nothing for a query without a usable word (all stop words)."""
    query = parse(SearchQuery, query)
    return _search(store, query, query.limit)


def fact_relevance(store: Store, query: SearchQuery | Mapping[str, Any]) -> dict[str, float]:
    """Every matching visible fact's BM25 score by fact id, with no limit: what context
    assembly ranks the scope's facts by."""
    query = parse(SearchQuery, query).model_copy(update={"kinds": [SearchKind.FACTS]})
    found = _search(store, query, RELEVANCE_LIMIT, embedding=False)  # BM25 alone ranks a scope
    return {fact.fact_id: fact.score for fact in found.facts}


def _search(
    store: Store, query: SearchQuery, limit: int, *, embedding: bool = True
) -> SearchResult:
    words = query_words(store.catalog, query.query)
    if not words:
        return SearchResult(query=query.query)
    now = store.clock()
    params = query.model_dump(include={"tenant_id", "agent_id", "purpose", "subject", "known_at"})
    params |= {"now": now, "at": query.at or now, "limit": limit}
    params["spread"] = turns.spread(query.query)
    postgres = store.is_postgres
    vector, arm = None, None
    if embedding and store.settings.embedding_configured:  # the embedding arm (search_vectors)
        vector = vectors.query_vector(store, query.tenant_id, query.query)
        arm = VectorArm.FAILED if vector is None else VectorArm.FUSED
        params["model"] = store.settings.embedding_model
    with store.reading() as connection:
        terms = stems(connection, words, postgres)
        if not terms:
            return SearchResult(query=query.query)
        params |= {"terms": terms, "tsquery": " | ".join(map(_lexeme, terms))}
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


def _lexeme(term: str) -> str:
    """A term as a tsquery operand, quoted."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


# -- the index's tables, as the statements name them ----------------------------------------

_VECTOR = "search_vector"
# The stemmed terms OR-ed, taken as they are (no second normalisation).
_TSQUERY = cast(bindparam("tsquery"), TSQUERY)


def _fts(name: str) -> Any:
    return sql_table(name, sql_column("rowid"), sql_column("words"))


def _terms(name: str) -> Any:
    return sql_table(name, sql_column("term"), sql_column("doc"))


_EPISODE_KEYS = sql_table(
    search_index.EPISODE_KEYS,
    sql_column("search_key"),
    sql_column("tenant_id"),
    sql_column("episode_id"),
)


def _scored(scope: Any, hits: Any, postgres: bool, *, weights: bool = False) -> Any:
    """BM25 of every hit document, with N, the mean length and each term's document frequency
    taken from `scope` (doc, dl) and `hits` (doc, term, tf, dl): the filtered scope only;
    with `weights`, also the IDF of each query term the document matched (a JSON object)."""
    stats = select(
        func.count().label("n"), func.coalesce(func.avg(scope.c.dl), 1).label("avgdl")
    ).cte("stats")
    frequencies = (
        select(hits.c.term, func.count().label("df")).group_by(hits.c.term).cte("frequencies")
    )
    n, df = cast(stats.c.n, Float), cast(frequencies.c.df, Float)
    idf = func.ln(1.0 + (n - df + 0.5) / (df + 0.5))
    tf, dl = cast(hits.c.tf, Float), cast(hits.c.dl, Float)
    saturation = tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / cast(stats.c.avgdl, Float)))
    columns = [hits.c.doc, func.sum(idf * saturation).label("score")]
    if weights:
        as_json = func.json_object_agg if postgres else func.json_group_object
        columns.append(as_json(hits.c.term, idf).label("weights"))
    return (
        select(*columns)
        .select_from(hits.join(frequencies, frequencies.c.term == hits.c.term).join(stats, true()))
        .group_by(hits.c.doc)
        .cte("scored")
    )


def _best(scored: Any) -> Select[Any]:
    return (
        select(scored.c.doc, scored.c.score)
        .order_by(scored.c.score.desc(), scored.c.doc)
        .limit(bindparam("limit"))
    )


def _term_list() -> Any:
    return bindparam("terms", expanding=True)


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
        _fact_ranking(postgres, known, quarantined), params
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


@cache
def _fact_ranking(postgres: bool, known: bool, quarantined: bool) -> Select[Any]:
    """One statement per shape of query, built once (building costs more than running it)."""
    conditions = visible("get", known, quarantined)
    if postgres:
        vector: Any = sql_column(_VECTOR)
        scope = (
            select(FactRow.row_id.label("doc"), func.length(vector).label("dl"))
            .where(*conditions)
            .cte("scope")
        )
        lexemes = func.unnest(vector).table_valued("lexeme", "positions", name="t")
        hits = (
            select(
                FactRow.row_id.label("doc"),
                lexemes.c.lexeme.label("term"),
                func.array_length(lexemes.c.positions, 1).label("tf"),
                func.length(vector).label("dl"),
            )
            .select_from(FactRow.__table__.join(lexemes, true()))
            .where(
                *conditions,
                vector.op("@@")(_TSQUERY),
                lexemes.c.lexeme.in_(_term_list()),
            )
        )
    else:
        index, terms = _fts(search_index.FACTS_FTS), _terms(search_index.FACTS_TERMS)
        scope = (
            select(FactRow.row_id.label("doc"), index.c.words.label("dl"))
            .join(index, index.c.rowid == FactRow.row_id)
            .where(*conditions)
            .cte("scope")
        )
        hits = _sqlite_hits(scope, terms)
    return _best(_scored(scope, hits.cte("hits"), postgres))


def _sqlite_hits(scope: Any, terms: Any) -> Select[Any]:
    """Each (document, term) of the scope with its frequency, from FTS5's vocabulary: the
    query terms' occurrences first (a lookup by term), then the scope's share of them."""
    occurrences = (
        select(terms.c.doc, terms.c.term)
        .where(terms.c.term.in_(_term_list()))
        .cte("occurrences")
        .prefix_with("MATERIALIZED")
    )
    return (
        select(
            occurrences.c.doc.label("doc"),
            occurrences.c.term.label("term"),
            func.count().label("tf"),
            func.max(scope.c.dl).label("dl"),
        )
        .join(scope, scope.c.doc == occurrences.c.doc)
        .group_by(occurrences.c.doc, occurrences.c.term)
    )


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
    ranking, fetch, similar = _episode_statements(postgres, known, quarantined)
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
    ranked = recency.superseding([row for row in rows if row.doc in scores], scores, weights)
    if vector is not None:  # the lexical arm in its recency order, fused with the cosine's
        ranked = list(vectors.fuse(ranked, close, params["limit"]).items())
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


@cache
def _episode_statements(
    postgres: bool, known: bool, quarantined: bool
) -> tuple[Select[Any], Select[Any], Select[Any]]:
    """The ranking statement, the one that reads the best episodes and the one that reads
    the scope's vectors (keyed as the ranking is), built once."""
    conditions = answerable(known, quarantined)
    if postgres:
        vector: Any = sql_column(_VECTOR)
        scope = (
            select(
                EpisodeRow.episode_id.label("doc"),
                func.length(vector).label("dl"),
                EpisodeRow.session_id,
                EpisodeRow.occurred_at,
            )
            .where(*conditions)
            .cte("scope")
        )
        lexemes = func.unnest(vector).table_valued("lexeme", "positions", name="t")
        hits = (
            select(
                EpisodeRow.episode_id.label("doc"),
                lexemes.c.lexeme.label("term"),
                func.array_length(lexemes.c.positions, 1).label("tf"),
                func.length(vector).label("dl"),
            )
            .select_from(EpisodeRow.__table__.join(lexemes, true()))
            .where(
                *conditions,
                vector.op("@@")(_TSQUERY),
                lexemes.c.lexeme.in_(_term_list()),
            )
        )
        key: Any = EpisodeRow.episode_id
        joined: Any = EpisodeRow.__table__
    else:
        index, terms = _fts(search_index.EPISODES_FTS), _terms(search_index.EPISODES_TERMS)
        keys = _EPISODE_KEYS
        scope = (
            select(
                keys.c.search_key.label("doc"),
                index.c.words.label("dl"),
                EpisodeRow.session_id,
                EpisodeRow.occurred_at,
            )
            .select_from(
                EpisodeRow.__table__.join(
                    keys,
                    and_(
                        keys.c.tenant_id == EpisodeRow.tenant_id,
                        keys.c.episode_id == EpisodeRow.episode_id,
                    ),
                ).join(index, index.c.rowid == keys.c.search_key)
            )
            .where(*conditions)
            .cte("scope")
        )
        hits = _sqlite_hits(scope, terms)
        key = keys.c.search_key
        joined = EpisodeRow.__table__.join(
            keys,
            and_(
                keys.c.tenant_id == EpisodeRow.tenant_id,
                keys.c.episode_id == EpisodeRow.episode_id,
            ),
        )
    fetch = (
        select(
            key.label("doc"),
            EpisodeRow.episode_id,
            EpisodeRow.occurred_at,
            EpisodeRow.session_id,
            EpisodeRow.text,
        )
        .select_from(joined)
        .where(
            EpisodeRow.tenant_id == bindparam("tenant_id"),
            key.in_(bindparam("docs", expanding=True)),
        )
    )
    ranking = turns.with_neighbours(scope, _scored(scope, hits.cte("hits"), postgres, weights=True))
    return ranking, fetch, vectors.scope_vectors(key, joined, conditions)
