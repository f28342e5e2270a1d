"""A search query's terms: its words without stop words, the names of the attributes it
names (so a synonym finds the attribute's facts), stemmed the way the store's index is.

The language is English on both stores: PostgreSQL's `english` text search configuration
(Snowball stemming, its stop word list), SQLite's FTS5 `porter` tokenizer (Porter stemming)
with the same stop words dropped from the query here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from sqlalchemy import Connection, text

from pipeline.db.search_index import POSTGRES_CONFIG, SQLITE_STEMMER, SQLITE_STEMMER_TERMS
from schemas.catalog import Catalog

WORD = re.compile(r"\w+")
SNIPPET_CHARS = 300

# PostgreSQL 15's english.stop, so both stores drop the same words from a query.
STOP_WORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now""".split()  # noqa: SIM905 - the list as PostgreSQL ships it
)


def named_attributes(catalog: Catalog, query: str) -> list[str]:
    """The attributes the query names exactly: by identifier, spaced name or synonym."""
    folded = query.casefold()
    return [
        attribute
        for attribute in catalog.attributes
        if any(
            re.search(rf"\b{re.escape(name.casefold())}\b", folded)
            for name in [attribute, *catalog.synonyms(attribute)]
        )
    ]


def query_words(catalog: Catalog, query: str) -> list[str]:
    """The query's usable words, then the words of the attribute names it names."""
    named = " ".join(name.replace("_", " ") for name in named_attributes(catalog, query))
    words = WORD.findall(f"{query} {named}".casefold())
    return list(dict.fromkeys(word for word in words if word not in STOP_WORDS))


def stems(connection: Connection, words: Iterable[str], postgres: bool) -> list[str]:
    """The index's terms for `words`, by the store's own stemmer (so a query term and an
    indexed one always agree)."""
    joined = " ".join(words)
    if not joined:
        return []
    if postgres:
        found = connection.execute(
            text(f"SELECT lexeme FROM unnest(to_tsvector('{POSTGRES_CONFIG}'::regconfig, :words))"),
            {"words": joined},
        )
        return [str(lexeme) for lexeme in found.scalars()]
    # The connection's own temporary FTS5 table tokenizes the words as the index did: writing
    # to the temp schema takes no lock on the database.
    connection.execute(
        text(f"INSERT INTO {SQLITE_STEMMER}(rowid, words) VALUES (1, :words)"), {"words": joined}
    )
    found = connection.execute(text(f"SELECT DISTINCT term FROM {SQLITE_STEMMER_TERMS}"))
    terms = [str(term) for term in found.scalars()]
    connection.execute(text(f"DELETE FROM {SQLITE_STEMMER}"))
    return terms


def snippet(text: str, words: Sequence[str]) -> str:
    """The text, or about SNIPPET_CHARS of it around the first query word it holds."""
    if len(text) <= SNIPPET_CHARS:
        return text
    prefixes = "|".join(re.escape(word[:5]) for word in words)
    first = re.search(rf"\b(?:{prefixes})", text, re.IGNORECASE) if prefixes else None
    start = max(0, (first.start() if first else 0) - SNIPPET_CHARS // 3)
    cut = text[start : start + SNIPPET_CHARS]
    return ("…" if start else "") + cut + ("…" if start + SNIPPET_CHARS < len(text) else "")
