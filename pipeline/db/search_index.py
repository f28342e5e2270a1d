"""The text index of the search read, kept by the database itself in the write transaction.

- PostgreSQL: a generated `search_vector` column on facts and on episodes, built with the
  fixed `english` configuration (`to_tsvector(regconfig, ...)` is IMMUTABLE, so it may be a
  generated column), and a GIN index on it whose predicate (`forgotten_at IS NULL`) every
  search implies. A purge nulls the text, so the generated column follows; `purge-vacuum`
  rewrites the table and its indexes.
- SQLite: FTS5 tables (`porter unicode61`: English stemming) kept by triggers. The FTS5
  rowid must be a key that VACUUM never renumbers: the facts' `row_id` is an INTEGER PRIMARY
  KEY; episodes have a text key, so `episode_search_keys` gives each one an integer. An
  `fts5vocab` table per index exposes each term's occurrences per row: term frequencies for
  BM25 computed over the caller's scope, never FTS5's whole-table statistics.

What a fact's text is: its attribute's name (underscores as spaces), the strings and numbers
of its value, and its evidence. An episode's is its text. These objects are not in the
models' metadata (they differ per backend); `is_search_object` lets a schema comparison skip
them, and a test compares a migrated database with `statements`.

A migration that rebuilds `facts` or `episodes` by copy (SQLite's batch mode) drops their
triggers: it must run `statements` again.
"""

from __future__ import annotations

from sqlalchemy import Connection, text

# The text search configuration on PostgreSQL: stemming and stop words of English.
POSTGRES_CONFIG = "english"
SQLITE_TOKENIZER = "porter unicode61 remove_diacritics 2"
# Each SQLite connection's own temporary FTS5 table and its vocabulary, which stem a query's
# words as the index did (`search_terms.stems`). Made once, as the connection opens: made in a
# read's transaction, they went with its rollback and were made again by every search (about
# a sixth of a 600-episode search).
SQLITE_STEMMER = "temp.sgam_stem"
SQLITE_STEMMER_TERMS = "temp.sgam_stem_terms"
SQLITE_STEMMER_TABLES = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {SQLITE_STEMMER} USING "
    f"fts5(words, tokenize='{SQLITE_TOKENIZER}')",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {SQLITE_STEMMER_TERMS} "
    "USING fts5vocab(temp, sgam_stem, instance)",
)

FACTS_FTS = "facts_search"
FACTS_TERMS = "facts_search_terms"
EPISODES_FTS = "episodes_search"
EPISODES_TERMS = "episodes_search_terms"
EPISODE_KEYS = "episode_search_keys"
SEARCH_VECTOR = "search_vector"
FACTS_GIN = "ix_facts_search_vector"
EPISODES_GIN = "ix_episodes_search_vector"

_SQLITE_TABLES = (FACTS_FTS, FACTS_TERMS, EPISODES_FTS, EPISODES_TERMS, EPISODE_KEYS)
_POSTGRES_OBJECTS = (SEARCH_VECTOR, FACTS_GIN, EPISODES_GIN)


def is_search_object(name: str | None) -> bool:
    """A table, column or index of the text index (FTS5's shadow tables included)."""
    if name is None:
        return False
    return name in _POSTGRES_OBJECTS or any(
        name == table or name.startswith(f"{table}_") for table in _SQLITE_TABLES
    )


def _postgres_fact_text() -> str:
    config = f"'{POSTGRES_CONFIG}'::regconfig"
    return (
        f"to_tsvector({config}, replace(attribute, '_', ' ')) || "
        f"jsonb_to_tsvector({config}, coalesce(value, 'null'::jsonb), '[\"string\", \"numeric\"]')"
        f" || to_tsvector({config}, coalesce(evidence, ''))"
    )


POSTGRES_STATEMENTS = (
    f"ALTER TABLE facts ADD COLUMN {SEARCH_VECTOR} tsvector "
    f"GENERATED ALWAYS AS ({_postgres_fact_text()}) STORED",
    f"CREATE INDEX {FACTS_GIN} ON facts USING gin ({SEARCH_VECTOR}) WHERE forgotten_at IS NULL",
    f"ALTER TABLE episodes ADD COLUMN {SEARCH_VECTOR} tsvector "
    f"GENERATED ALWAYS AS (to_tsvector('{POSTGRES_CONFIG}'::regconfig, coalesce(text, ''))) "
    "STORED",
    f"CREATE INDEX {EPISODES_GIN} ON episodes USING gin ({SEARCH_VECTOR}) "
    "WHERE forgotten_at IS NULL",
)

# The strings and numbers of a JSON value, space-separated (json_tree walks any depth).
_SQLITE_VALUE_WORDS = (
    "(SELECT group_concat(atom, ' ') FROM json_tree({row}.value) "
    "WHERE type IN ('text', 'integer', 'real'))"
)


def _sqlite_fact_text(row: str) -> str:
    words = _SQLITE_VALUE_WORDS.format(row=row)
    return (
        f"replace({row}.attribute, '_', ' ') || ' ' || coalesce({words}, '') || ' ' || "
        f"coalesce({row}.evidence, '')"
    )


def _words(expression: str) -> str:
    """About how many words a text has: BM25's document length (spaces plus one)."""
    return f"length({expression}) - length(replace({expression}, ' ', '')) + 1"


_FACT_ROW = (
    f"INSERT INTO {FACTS_FTS}(rowid, body, words) VALUES (new.row_id, "
    f"{_sqlite_fact_text('new')}, {_words(_sqlite_fact_text('new'))})"
)
_EPISODE_ROW = (
    f"INSERT INTO {EPISODES_FTS}(rowid, body, words) SELECT k.search_key, new.text, "
    f"{_words('new.text')} FROM {EPISODE_KEYS} k "
    "WHERE k.tenant_id = new.tenant_id AND k.episode_id = new.episode_id AND new.text IS NOT NULL"
)

SQLITE_TRIGGERS = {
    "facts_search_insert": f"CREATE TRIGGER facts_search_insert AFTER INSERT ON facts BEGIN "
    f"{_FACT_ROW}; END",
    # Only what changes the text: a status or a tombstone does not rewrite the index.
    "facts_search_update": "CREATE TRIGGER facts_search_update AFTER UPDATE OF attribute, "
    f"value, evidence ON facts BEGIN DELETE FROM {FACTS_FTS} WHERE rowid = old.row_id; "
    f"{_FACT_ROW}; END",
    "facts_search_delete": "CREATE TRIGGER facts_search_delete AFTER DELETE ON facts BEGIN "
    f"DELETE FROM {FACTS_FTS} WHERE rowid = old.row_id; END",
    "episodes_search_insert": "CREATE TRIGGER episodes_search_insert AFTER INSERT ON episodes "
    f"BEGIN INSERT INTO {EPISODE_KEYS}(tenant_id, episode_id) "
    f"VALUES (new.tenant_id, new.episode_id); {_EPISODE_ROW}; END",
    "episodes_search_update": "CREATE TRIGGER episodes_search_update AFTER UPDATE OF text ON "
    f"episodes BEGIN DELETE FROM {EPISODES_FTS} WHERE rowid = (SELECT search_key FROM "
    f"{EPISODE_KEYS} WHERE tenant_id = old.tenant_id AND episode_id = old.episode_id); "
    f"{_EPISODE_ROW}; END",
    "episodes_search_delete": "CREATE TRIGGER episodes_search_delete AFTER DELETE ON episodes "
    f"BEGIN DELETE FROM {EPISODES_FTS} WHERE rowid = (SELECT search_key FROM {EPISODE_KEYS} "
    "WHERE tenant_id = old.tenant_id AND episode_id = old.episode_id); "
    f"DELETE FROM {EPISODE_KEYS} WHERE tenant_id = old.tenant_id "
    "AND episode_id = old.episode_id; END",
}

SQLITE_STATEMENTS = (
    f"CREATE TABLE {EPISODE_KEYS} (search_key INTEGER PRIMARY KEY AUTOINCREMENT, "
    "tenant_id VARCHAR(200) NOT NULL, episode_id VARCHAR(200) NOT NULL, "
    "UNIQUE (tenant_id, episode_id))",
    f"CREATE VIRTUAL TABLE {FACTS_FTS} USING fts5(body, words UNINDEXED, "
    f"tokenize='{SQLITE_TOKENIZER}')",
    f"CREATE VIRTUAL TABLE {FACTS_TERMS} USING fts5vocab({FACTS_FTS}, instance)",
    f"CREATE VIRTUAL TABLE {EPISODES_FTS} USING fts5(body, words UNINDEXED, "
    f"tokenize='{SQLITE_TOKENIZER}')",
    f"CREATE VIRTUAL TABLE {EPISODES_TERMS} USING fts5vocab({EPISODES_FTS}, instance)",
    *SQLITE_TRIGGERS.values(),
)

# Existing rows, for the migration that creates the index (PostgreSQL's generated columns
# fill themselves when added).
SQLITE_BACKFILL = (
    f"INSERT INTO {EPISODE_KEYS}(tenant_id, episode_id) SELECT tenant_id, episode_id "
    "FROM episodes ORDER BY received_at, tenant_id, episode_id",
    f"INSERT INTO {FACTS_FTS}(rowid, body, words) SELECT row_id, {_sqlite_fact_text('facts')}, "
    f"{_words(_sqlite_fact_text('facts'))} FROM facts",
    f"INSERT INTO {EPISODES_FTS}(rowid, body, words) SELECT k.search_key, e.text, "
    f"{_words('e.text')} FROM episodes e JOIN {EPISODE_KEYS} k "
    "ON k.tenant_id = e.tenant_id AND k.episode_id = e.episode_id WHERE e.text IS NOT NULL",
)


def statements(dialect: str) -> tuple[str, ...]:
    return POSTGRES_STATEMENTS if dialect == "postgresql" else SQLITE_STATEMENTS


def optimize(connection: Connection) -> None:
    """Merge each FTS5 index's segments into one (SQLite). A deleted row's terms stay in the
    old segments until a merge rewrites them: a purge runs this before its checkpoint, or the
    purged words would still be in the file."""
    for table in (FACTS_FTS, EPISODES_FTS):
        connection.execute(text(f"INSERT INTO {table}({table}) VALUES ('optimize')"))
