"""The search read's statements, built once per shape of query: BM25 over the filtered scope
(`scored`), the facts' ranking, and the episodes' ranking with their neighbours, the read of
the best ones and the read of the scope's vectors. What the statements mean is in
`pipeline.read.search`'s docstring; this module only spells them for each backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    Float,
    Select,
    Text,
    and_,
    bindparam,
    cast,
    func,
    literal_column,
    select,
    true,
)
from sqlalchemy import column as sql_column
from sqlalchemy import table as sql_table
from sqlalchemy.dialects.postgresql import ARRAY, TSQUERY

from pipeline.db import search_index
from pipeline.db.models import EpisodeRow, FactRow
from pipeline.read import search_turns as turns
from pipeline.read import search_vectors as vectors
from pipeline.read.episode_rules import answerable
from pipeline.read.facts import visible

K1, B = 1.2, 0.75


def lexeme(term: str) -> str:
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


@cache
def fact_ranking(postgres: bool, known: bool, quarantined: bool) -> Select[Any]:
    """One statement per shape of query, built once (building costs more than running it)."""
    conditions = visible("get", known, quarantined)
    if postgres:
        vector: Any = sql_column(_VECTOR)
        scope = (
            select(FactRow.row_id.label("doc"), func.length(vector).label("dl"))
            .where(*conditions)
            .cte("scope")
        )
        hits = _postgres_hits(FactRow.row_id, FactRow.__table__, conditions)
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


def _postgres_hits(doc: Any, table: Any, conditions: Sequence[Any]) -> Select[Any]:
    """Each (document, term) of the scope that the query matches, with its frequency and the
    document's length, from the generated tsvector's lexemes and positions.

    Only the query's lexemes are unnested: `setweight` marks them (the index stores none
    weighted) and `ts_filter` keeps the marked ones, in C, where unnesting every lexeme of
    each matching document and filtering the rows took a fifth of the ranking statement."""
    vector: Any = sql_column(_VECTOR)
    terms = bindparam("terms", type_=ARRAY(Text))
    matched = func.ts_filter(
        func.setweight(vector, literal_column("'A'"), terms), literal_column("'{a}'")
    )
    lexemes = func.unnest(matched).table_valued("lexeme", "positions", name="t")
    return (
        select(
            doc.label("doc"),
            lexemes.c.lexeme.label("term"),
            func.array_length(lexemes.c.positions, 1).label("tf"),
            func.length(vector).label("dl"),
        )
        .select_from(table.join(lexemes, true()))
        .where(*conditions, vector.op("@@")(_TSQUERY))
    )


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


@cache
def episode_statements(
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
        hits = _postgres_hits(EpisodeRow.episode_id, EpisodeRow.__table__, conditions)
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


@cache
def fact_scores(postgres: bool, known: bool, quarantined: bool) -> Select[Any]:
    """(fact_id, score) of every fact the ranking answers: joined to the facts here, so no
    list of row ids goes back to the database (SQLite bounds how many parameters it takes)."""
    ranked = fact_ranking(postgres, known, quarantined).subquery("ranked")
    return select(FactRow.fact_id, ranked.c.score).join(ranked, ranked.c.doc == FactRow.row_id)


@cache
def beside_scores(postgres: bool, known: bool, quarantined: bool) -> Select[Any]:
    """(episode_id, near) of every episode of the scope beside one that matches: `near` is
    the better BM25 of the two turns beside it (`search_turns`)."""
    ranked = episode_statements(postgres, known, quarantined)[0].subquery("ranked")
    if postgres:  # the ranking's doc is the episode id
        return select(ranked.c.doc.label("episode_id"), ranked.c.near).where(ranked.c.near > 0)
    keys = _EPISODE_KEYS
    return (
        select(keys.c.episode_id, ranked.c.near)
        .join(ranked, ranked.c.doc == keys.c.search_key)
        .where(ranked.c.near > 0)
    )
