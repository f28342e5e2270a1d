"""The search read's embedding arm on both stores, against the stub OpenAI-protocol server's
toy `/v1/embeddings` (bench/stub_llm.py: folded, hashed bags of words, so "automobile" is near
"car"): vectors written after the ledger's writes (a put's, put_many's, an import's and the hot
path's in the background, the writer not waiting), a paraphrase BM25 misses found by the fused
ranking, a failing endpoint that leaves writes and search working, purge erasing the vectors,
and the spend in `sgam usage`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text

import pipeline
from pipeline import open_store
from pipeline.access.keys import create_key
from pipeline.cli import run
from pipeline.db.models import EmbeddingSpendRow, EpisodeVectorRow, FactRow, FactVectorRow
from pipeline.db.store import Store
from pipeline.db.store import open_store as open_db_store
from pipeline.db.unit import Written
from pipeline.embedding import after_commit, background
from pipeline.embedding.background import flush
from pipeline.embedding.client import close_clients
from pipeline.embedding.vectors import Filled, decode, fill_missing
from pipeline.errors import InvalidInput
from pipeline.ledger.results import PutResult
from pipeline.settings import load_settings
from schemas.results import SearchResult, VectorArm
from tests.factories import fact_command, isolated_settings, put_fact, three_session_catalog
from tests.integration.celery_helpers import wait_for
from tests.integration.pipeline_helpers import episode
from tests.integration.server_helpers import fact_body, start_server, stop_server
from tests.integration.stub_llm import EMBEDDING_DIMENSIONS, StubServer

READ = {"tenant_id": "acme", "subject": "mira"}
MODEL = "toy-embed"
JAN, FEB = "2026-01-05T10:00:00Z", "2026-02-05T10:00:00Z"


@pytest.fixture(scope="module")
def stub() -> Iterator[Any]:
    with StubServer() as server:
        yield server
    close_clients()


@pytest.fixture
def endpoint(stub: Any) -> Any:
    """The stub's embeddings, answering and with their counters at zero."""
    stub.app.embeddings_status = stub.app.embeddings_held = None
    stub.app.embedding_requests = stub.app.embedded_texts = 0
    return stub.app


@pytest.fixture
def embedding(database_url: str, stub: Any, endpoint: Any) -> Iterator[Store]:
    """A store with the embedding arm on."""
    settings = isolated_settings(
        database_url=database_url, embedding_model=MODEL, embedding_base_url=stub.base_url
    )
    opened = open_store(settings)
    yield opened
    assert flush(), "the background vectors of the test's writes never settled"
    opened.dispose()


@pytest.fixture
def lexical(database_url: str, embedding: Store) -> Iterator[Store]:
    """The same database with the arm off (the default)."""
    opened = open_store(isolated_settings(database_url=database_url))
    yield opened
    opened.dispose()


def _search(store: Store, query: str, **options: object) -> SearchResult:
    return pipeline.search(store, READ | {"query": query} | options)


def _count(store: Store, table: Any) -> int:
    with store.reading() as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def _episodes(store: Store) -> None:
    pipeline.ingest(
        store,
        [
            episode("My car broke down on the highway again", "2026-03-01T10:00:00Z", "s1"),
            # Three sessions: no episode is another's neighbour (search_turns).
            episode("We watched a film about whales", "2026-03-02T10:00:00Z", "s2"),
            episode("The garden needs watering twice a week", "2026-03-03T10:00:00Z", "s3"),
        ],
    )


def test_episodes_get_vectors_when_processed_and_facts_by_the_backfill(
    embedding: Store, lexical: Store, endpoint: Any
) -> None:
    _episodes(embedding)  # inline mode: processed here, then embedded

    assert _count(embedding, EpisodeVectorRow) == 3
    with embedding.reading() as connection:
        rows = connection.execute(select(EpisodeVectorRow.model, EpisodeVectorRow.vector)).all()
    models = {model for model, _ in rows}
    vector = rows[0].vector
    assert models == {MODEL}
    stored = decode(vector)
    assert len(stored) == EMBEDDING_DIMENSIONS
    assert abs(sum(x * x for x in stored) - 1.0) < 1e-5  # unit length: a cosine is a dot

    # A fact written while the arm was off has no vector; the backfill gives it one.
    put_fact(lexical, **READ, attribute="employer", value="Initech", evidence="I fix cars")
    assert _count(embedding, FactVectorRow) == 0
    filled = fill_missing(embedding)
    assert (filled.facts, filled.episodes, filled.failed) == (1, 0, 0)
    assert fill_missing(embedding).facts == 0  # nothing left to fill
    assert endpoint.embedded_texts == 4


def test_the_fused_ranking_finds_a_paraphrase_bm25_misses(embedding: Store, lexical: Store) -> None:
    _episodes(embedding)
    put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="I repair cars")
    put_fact(embedding, **READ, attribute="home_city", value="Utrecht", evidence="I live here")
    assert flush()

    assert not _search(lexical, "automobile").found  # no shared word
    assert _search(lexical, "automobile").vectors is None  # the arm is off: field absent
    assert "vectors" not in _search(lexical, "automobile").model_dump(mode="json")

    found = _search(embedding, "automobile")
    assert found.vectors is VectorArm.FUSED
    assert found.episodes[0].snippet == "My car broke down on the highway again"
    assert found.facts[0].value == "Initech"
    # The whales by both arms, the car by the cosine alone: both answered, in that order.
    both = _search(embedding, "automobile whales", kinds=["episodes"])
    assert [item.snippet.split()[-1] for item in both.episodes] == ["whales", "again"]
    assert both.episodes[0].score > both.episodes[1].score
    assert [item.snippet for item in _search(lexical, "automobile whales").episodes] == [
        "We watched a film about whales"
    ]


def test_fused_the_later_episode_about_the_same_thing_still_comes_first(
    embedding: Store, lexical: Store
) -> None:
    # Both arms rank the original first (it says "webinar" twice); the order by supersession
    # comes after the fusion, so the update is still answered above it.
    pipeline.ingest(
        embedding,
        [
            episode("The webinar is Monday at noon, the webinar slides are ready", JAN, "s1"),
            episode("Update: the webinar moved to Friday at noon", FEB, "s2"),
        ],
    )
    asked = {"kinds": ["episodes"]}
    for store in (embedding, lexical):
        found = _search(store, "when is the webinar at noon", **asked)
        assert [item.snippet.split()[0] for item in found.episodes] == ["Update:", "The"]
    assert _search(embedding, "when is the webinar at noon", **asked).vectors is VectorArm.FUSED


def test_context_ranks_by_the_fused_relevance_with_the_arm_on(
    embedding: Store, lexical: Store
) -> None:
    put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="I repair cars")
    put_fact(
        embedding, **READ, attribute="home_city", value="Utrecht", valid_from="2026-05-01T00:00:00Z"
    )
    assert flush()
    asked = READ | {"query": "automobile repair", "budget_tokens": 500}

    # "repair" matches the employer's evidence, "automobile" only its vector: first both ways.
    assert [item.value for item in pipeline.assemble(lexical, asked).items][0] == "Initech"
    fused = pipeline.assemble(embedding, asked | {"query": "automobile"})
    alone = pipeline.assemble(lexical, asked | {"query": "automobile"})
    assert [item.value for item in fused.items] == ["Initech", "Utrecht"]
    # Lexically "automobile" matches nothing: the later fact comes first (recency).
    assert [item.value for item in alone.items] == ["Utrecht", "Initech"]


def test_context_with_episodes_embeds_its_query_once(embedding: Store, endpoint: Any) -> None:
    _episodes(embedding)
    put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="I repair cars")
    assert flush()
    endpoint.embedding_requests = 0
    asked = READ | {"query": "automobile", "budget_tokens": 500, "episodes": True}

    found = pipeline.assemble(embedding, asked)

    # The facts' relevance and the episodes' search share the query's one vector.
    assert endpoint.embedding_requests == 1
    assert [said.text.split(": ", 1)[1][:6] for said in found.episodes][0] == "My car"
    assert [item.value for item in found.items] == ["Initech"]


def test_searches_waiting_for_their_query_vectors_hold_no_connection(
    embedding: Store, endpoint: Any
) -> None:
    _episodes(embedding)
    assert flush()
    endpoint.embeddings_held = threading.Event()
    endpoint.embedding_requests = 0
    answers: list[SearchResult] = []
    searches = [
        threading.Thread(target=lambda: answers.append(_search(embedding, "automobile")))
        for _ in range(24)  # more than the store's pool has connections (10 or 15)
    ]
    try:
        for search in searches:
            search.start()
        # Every query is at the endpoint together: a search waiting for its vector has not
        # opened its read yet.
        _until(lambda: endpoint.embedding_requests == 24, "24 query embeddings in flight")
        with embedding.reading() as connection:  # the pool is not exhausted meanwhile
            assert connection.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        endpoint.embeddings_held.set()
        for search in searches:
            search.join(timeout=30)
    assert [answer.vectors for answer in answers] == [VectorArm.FUSED] * 24


def test_hidden_facts_never_surface_through_the_vector_arm(embedding: Store) -> None:
    """Decoys closer to the query than what holds: an earlier version, a quarantined fact,
    another subject's and another tenant's."""
    put_fact(embedding, **READ, attribute="employer", value="Car Corp", valid_from="2025-01-01")
    put_fact(
        embedding,
        **READ,
        attribute="employer",
        value="Initech",
        evidence="I sell cars there",
        valid_from="2026-01-01",
    )
    put_fact(embedding, **READ, attribute="home_city", value="car", trust="untrusted")
    other = {"tenant_id": "acme", "subject": "jo"}
    put_fact(embedding, **other, attribute="employer", value="car")
    put_fact(embedding, tenant_id="globex", subject="mira", attribute="employer", value="car")
    # Every version the puts inserted got its vector by id, the closed ones too (an --at).
    assert flush()
    versions = _count(embedding, FactRow)
    assert versions == _count(embedding, FactVectorRow) == 6
    assert fill_missing(embedding).facts == 0

    found = _search(embedding, "automobile", kinds=["facts"])
    shown = pipeline.get(embedding, READ)
    assert found.vectors is VectorArm.FUSED
    assert {fact.fact_id for fact in found.facts} == {fact.fact_id for fact in shown}
    assert [fact.value for fact in found.facts] == ["Initech"]  # the arm ranks all it may see
    at = _search(embedding, "automobile", kinds=["facts"], at="2025-06-01T00:00:00Z")
    assert [fact.value for fact in at.facts] == ["Car Corp"]  # an --at inside its interval
    reviewer = _search(embedding, "automobile", kinds=["facts"], include_quarantined=True)
    assert {fact.value for fact in reviewer.facts} == {"Initech", "car"}

    pipeline.forget(embedding, READ)
    assert not _search(embedding, "automobile").found


def test_a_failing_endpoint_keeps_writes_and_search_working(
    embedding: Store, endpoint: Any
) -> None:
    endpoint.embeddings_status = 500
    _episodes(embedding)  # processed and committed although no vector could be made
    written = put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="cars")
    assert written.written  # committed, whatever the endpoint does after
    statuses = {item.status for item in pipeline.list_episodes(embedding, {"tenant_id": "acme"})}
    assert statuses == {"done"}
    assert flush()
    assert _count(embedding, EpisodeVectorRow) == _count(embedding, FactVectorRow) == 0
    # The batch's call and the put's background call, each retried up to the 3 attempts.
    assert endpoint.embedding_requests == 6

    found = _search(embedding, "car")
    assert found.vectors is VectorArm.FAILED  # said so, and answered lexically
    assert found.episodes[0].snippet.startswith("My car")
    assert [fact.value for fact in found.facts] == ["Initech"]
    assert fill_missing(embedding).failed == 4  # left for the next pass

    endpoint.embeddings_status = None
    filled = fill_missing(embedding)
    assert (filled.facts, filled.episodes, filled.failed) == (1, 3, 0)
    assert _search(embedding, "automobile").vectors is VectorArm.FUSED


def test_the_spend_appears_in_usage(
    embedding: Store, cli_env: Callable[[], None], capsys: pytest.CaptureFixture[str]
) -> None:
    _episodes(embedding)
    _search(embedding, "automobile")
    report = pipeline.llm_usage(embedding, {"tenant_id": "acme"})

    [row] = report.embeddings
    assert (row.model, row.calls, row.query_calls, row.failed) == (MODEL, 2, 1, 0)
    assert row.texts == 4
    # The stub counts a token a word: 8 + 6 + 7 written, 1 asked.
    assert row.tokens == 22
    assert row.attempts == 2

    assert run(["usage", "--tenant", "acme", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["embeddings"][0]["calls"] == 2


def test_sgam_embed_fills_what_is_missing(
    lexical: Store,
    stub: Any,
    cli_env: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    put_fact(lexical, **READ, attribute="employer", value="Initech")  # before the arm was on

    assert run(["embed", "--json"]) == 2  # the arm is off in this environment
    assert "SGAM_EMBEDDING_MODEL" in capsys.readouterr().err

    monkeypatch.setenv("SGAM_EMBEDDING_MODEL", MODEL)
    monkeypatch.setenv("SGAM_LLM_BASE_URL", stub.base_url)  # the model lane's, by default
    assert run(["embed", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"facts": 1, "episodes": 0, "failed": 0}
    assert run(["embed", "--json"]) == 1  # nothing left

    stub.app.embeddings_status = 503
    put_fact(lexical, **READ, attribute="home_city", value="Utrecht")
    assert run(["embed", "--json"]) == 5
    assert "1 texts left without a vector" in capsys.readouterr().err


def test_the_settings_default_to_the_model_lanes_endpoint() -> None:
    lane = isolated_settings(
        embedding_model="m", llm_base_url="http://127.0.0.1:1/v1", llm_api_key="k"
    )
    assert (lane.embedding_configured, lane.embedding_url, lane.embedding_key) == (
        True,
        "http://127.0.0.1:1/v1",
        "k",
    )
    own = isolated_settings(
        embedding_model="m",
        llm_base_url="http://127.0.0.1:1/v1",
        embedding_base_url="http://127.0.0.1:2/v1/",
        embedding_api_key="e",
    )
    assert (own.embedding_url, own.embedding_key) == ("http://127.0.0.1:2/v1", "e")
    assert not isolated_settings(llm_base_url="http://127.0.0.1:1/v1").embedding_configured
    assert not isolated_settings(embedding_model="m").embedding_configured  # no endpoint


def test_a_bad_embedding_url_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGAM_EMBEDDING_BASE_URL", "127.0.0.1:8080")
    with pytest.raises(InvalidInput, match="SGAM_EMBEDDING_BASE_URL"):
        load_settings()


def _vectors(store: Store) -> list[bytes]:
    with store.reading() as connection:
        return [
            *connection.execute(select(FactVectorRow.vector)).scalars(),
            *connection.execute(select(EpisodeVectorRow.vector)).scalars(),
        ]


def test_purge_erases_the_subjects_vectors(embedding: Store, database_url: str) -> None:
    _episodes(embedding)
    put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="I repair cars")
    put_fact(embedding, tenant_id="acme", subject="jo", attribute="employer", value="Globex")
    assert flush()
    kept = {"tenant_id": "acme", "subject": "jo"}
    with embedding.reading() as connection:
        theirs = connection.execute(
            select(FactVectorRow.vector).where(FactVectorRow.subject == "jo")
        ).scalar_one()
    purged = [vector for vector in _vectors(embedding) if vector != theirs]
    assert len(purged) == 4

    result = pipeline.forget(embedding, READ | {"purge": True})

    assert _vectors(embedding) == [theirs]  # jo's stays
    assert fill_missing(embedding).facts == 0  # nothing of the purged rows comes back
    assert not _search(embedding, "automobile").found
    assert pipeline.search(embedding, kept | {"query": "Globex"}).found
    if database_url.startswith("sqlite"):
        assert result.files_scrubbed is True
        path = Path(database_url.removeprefix("sqlite:///"))
        files = [path, path.with_name(path.name + "-wal")]
        contents = b"".join(file.read_bytes() for file in files if file.exists())
        assert theirs in contents  # the check can see a vector in the files
        assert [vector for vector in purged if vector in contents] == []


@pytest.mark.postgres
def test_purge_vacuum_leaves_no_vector_in_postgres_pages(
    postgres_url: str, stub: Any, endpoint: Any
) -> None:
    from tests.databases import empty_database

    empty_database(postgres_url)
    store = open_store(
        isolated_settings(
            database_url=postgres_url, embedding_model=MODEL, embedding_base_url=stub.base_url
        )
    )
    try:
        _episodes(store)
        put_fact(store, **READ, attribute="employer", value="Initech", evidence="I repair cars")
        assert flush()
        vectors = _vectors(store)
        assert len(_pages_holding(store, vectors)) == len(vectors) == 4

        pipeline.forget(store, READ | {"purge": True})
        store.vacuum(wait_s=120)

        assert _pages_holding(store, vectors) == []
    finally:
        store.dispose()


def _pages_holding(store: Store, vectors: list[bytes]) -> list[bytes]:
    """The vectors found in any page of the vector tables, read raw."""
    found = []
    with store.engine.begin() as connection:
        connection.execute(text("CREATE EXTENSION IF NOT EXISTS pageinspect"))
        pages = b""
        for relation in ("fact_vectors", "episode_vectors"):
            count = connection.execute(
                text("SELECT pg_relation_size(CAST(:r AS regclass)) / 8192"), {"r": relation}
            ).scalar_one()
            for page in range(count):
                pages += bytes(
                    connection.execute(
                        text("SELECT get_raw_page(:r, :p)"), {"r": relation, "p": page}
                    ).scalar_one()
                )
        found = [vector for vector in vectors if vector in pages]
    return found


# -- vectors of what a write just committed --------------------------------------------------

SGAM = str(Path(sys.executable).with_name("sgam"))


def _fact_vectors(store: Store, fact_id: str) -> int:
    """How many versions of the fact have a vector."""
    with store.reading() as connection:
        return int(
            connection.execute(
                select(func.count())
                .select_from(FactVectorRow)
                .join(FactRow, FactRow.row_id == FactVectorRow.row_id)
                .where(FactRow.fact_id == fact_id)
            ).scalar_one()
        )


def _until(check: Callable[[], bool], what: str) -> None:
    wait_for(check, timeout=30, what=what, logs=lambda: "")


def _found_by_meaning(store: Store, query: str, value: str) -> None:
    """`value` is found for `query`, which shares no word with it: by its vector."""
    found = _search(store, query, kinds=["facts"])
    assert found.vectors is VectorArm.FUSED
    assert [fact.value for fact in found.facts] == [value]


def test_a_put_gets_its_vector_without_waiting_for_the_endpoint(
    embedding: Store, lexical: Store, endpoint: Any
) -> None:
    endpoint.embeddings_held = threading.Event()  # the endpoint answers when the test says
    try:
        put = put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="cars")
        # The put answered while its fact's embedding request is still held at the endpoint.
        _until(lambda: endpoint.embedding_requests == 1, "the put's embedding request")
        assert pipeline.get(lexical, READ | {"attribute": "employer"})[0].value == "Initech"
        assert _fact_vectors(embedding, put.fact.fact_id) == 0
    finally:
        endpoint.embeddings_held.set()
    _until(lambda: _fact_vectors(embedding, put.fact.fact_id) == 1, "the put's vector")
    assert not _search(lexical, "automobile").found  # no word in common
    _found_by_meaning(embedding, "automobile", "Initech")
    [spend] = pipeline.llm_usage(embedding, {"tenant_id": "acme"}).embeddings
    assert (spend.calls, spend.texts, spend.query_calls, spend.failed) == (2, 2, 1, 0)


def test_put_many_gets_its_vectors_a_chunk_at_a_time(
    database_url: str, stub: Any, endpoint: Any
) -> None:
    settings = isolated_settings(
        database_url=database_url,
        embedding_model=MODEL,
        embedding_base_url=stub.base_url,
        embedding_batch=2,
    )
    store = open_store(settings)
    try:
        values = ["Initech", "Globex", "Hooli", "Umbrella", "Acme Cars"]
        commands = [
            fact_command(tenant_id="acme", subject=f"p{n}", attribute="employer", value=value)
            for n, value in enumerate(values)
        ]
        outcomes = pipeline.put_many(store, commands, chunk=2)
        fact_ids = [outcome.fact.fact_id for outcome in outcomes if isinstance(outcome, PutResult)]
        assert len(fact_ids) == 5
        _until(
            lambda: all(_fact_vectors(store, fact_id) == 1 for fact_id in fact_ids),
            "a vector for every fact put_many wrote",
        )
        with store.reading() as connection:
            sizes = connection.execute(select(EmbeddingSpendRow.texts)).scalars().all()
        assert sum(sizes) == 5
        assert max(sizes) <= 2  # SGAM_EMBEDDING_BATCH texts a request
        found = pipeline.search(
            store, {"tenant_id": "acme", "subject": "p4", "query": "automobile"}
        )
        assert [fact.value for fact in found.facts] == ["Acme Cars"]
        assert flush()
    finally:
        store.dispose()


@pytest.mark.slow
def test_sgam_import_ends_with_the_vectors_of_what_it_wrote(
    embedding: Store, stub: Any, database_url: str, tmp_path: Path
) -> None:
    lines = [
        fact_command(**READ, attribute="employer", value="Initech", evidence="I repair cars"),
        fact_command(**READ, attribute="home_city", value="Utrecht", evidence="my house"),
    ]
    path = tmp_path / "facts.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = os.environ | {
        "SGAM_DATABASE_URL": database_url,
        "SGAM_EMBEDDING_MODEL": MODEL,
        "SGAM_EMBEDDING_BASE_URL": stub.base_url,
    }
    done = subprocess.run(
        [SGAM, "import", str(path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    # The process waited for its background vectors before it exited.
    assert _count(embedding, FactVectorRow) == _count(embedding, FactRow) == 2
    _found_by_meaning(embedding, "automobile", "Initech")
    _found_by_meaning(embedding, "residence", "Utrecht")


def test_the_hot_path_embeds_its_episode_and_facts(embedding: Store) -> None:
    said = pipeline.remember(embedding, READ | {"text": "My home city is Utrecht."})
    [fact] = said.facts
    _until(lambda: _fact_vectors(embedding, fact.fact_id) == 1, "the remembered fact's vector")
    _until(lambda: _count(embedding, EpisodeVectorRow) == 1, "the remembered episode's vector")
    _found_by_meaning(embedding, "residence", "Utrecht")
    found = _search(embedding, "residence", kinds=["episodes"])
    assert [item.episode_id for item in found.episodes] == [said.episode_id]


def test_a_failing_endpoint_leaves_the_write_committed_and_the_vector_to_the_next_pass(
    embedding: Store, endpoint: Any
) -> None:
    endpoint.embeddings_status = 503
    put = put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="cars")
    jo = {"tenant_id": "acme", "subject": "jo"}
    (many,) = pipeline.put_many(embedding, [fact_command(**jo, attribute="home_city", value="Ede")])
    said = pipeline.remember(embedding, READ | {"text": "My home city is Utrecht."})
    assert put.written
    assert isinstance(many, PutResult)
    assert many.written
    assert [fact.value for fact in said.facts] == ["Utrecht"]
    assert flush()
    assert _count(embedding, FactVectorRow) == _count(embedding, EpisodeVectorRow) == 0
    [spend] = pipeline.llm_usage(embedding, {"tenant_id": "acme"}).embeddings
    assert spend.failed == spend.calls >= 1  # each failed call counted, its attempts too
    assert spend.attempts == 3 * spend.calls

    endpoint.embeddings_status = None
    filled = fill_missing(embedding)  # the next pass
    assert (filled.facts, filled.episodes, filled.failed) == (_count(embedding, FactRow), 1, 0)
    _found_by_meaning(embedding, "automobile", "Initech")


def test_a_purge_while_the_vectors_are_made_leaves_none(embedding: Store, endpoint: Any) -> None:
    endpoint.embeddings_held = threading.Event()
    try:
        put_fact(embedding, **READ, attribute="employer", value="Initech", evidence="cars")
        _until(lambda: endpoint.embedding_requests == 1, "the put's embedding request")
        pipeline.forget(embedding, READ | {"purge": True})  # commits while the call is out
    finally:
        endpoint.embeddings_held.set()
    assert flush()
    assert endpoint.embedded_texts == 1  # the vector was made, and not stored
    assert _vectors(embedding) == []
    assert fill_missing(embedding).facts == 0


@pytest.mark.slow
def test_with_the_arm_off_a_write_loads_nothing_of_it(database_url: str, stub: Any) -> None:
    """A put and a put_many load no embedding client, and no write starts the embedding
    thread, in a fresh process with the arm off; with it on (that the check can see them)
    they do. (The hot path loads the client anyway, for the search read's own use.)"""

    def loaded(subject: str, **arm: str) -> tuple[str, str]:
        script = (
            "import sys, threading, pipeline\n"
            "from pipeline import open_store\n"
            "from tests.factories import fact_command, isolated_settings\n"
            f"store = open_store(isolated_settings(database_url={database_url!r}, **{arm!r}))\n"
            f"read = {{'tenant_id': 'acme', 'subject': {subject!r}}}\n"
            "pipeline.put(store, fact_command(**read, attribute='employer', value='Initech'))\n"
            "pipeline.put_many(store, [fact_command(**read, value='Ede')])\n"
            "names = ('pipeline.embedding.client', 'pipeline.embedding.background')\n"
            "print(','.join(name for name in names if name in sys.modules))\n"
            "pipeline.remember(store, read | {'text': 'My home city is Utrecht.'})\n"
            "print(','.join(t.name for t in threading.enumerate() if t.name.startswith('sgam-')))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).parents[2],
        )
        assert done.returncode == 0, done.stderr
        modules, threads = done.stdout.split("\n")[:2]
        return modules, threads

    assert loaded("mira") == ("", "")
    on = loaded("jo", embedding_model=MODEL, embedding_base_url=stub.base_url)
    assert on == ("pipeline.embedding.client,pipeline.embedding.background", "sgam-embedding")


def test_rows_past_a_full_queue_are_left_to_the_next_pass(
    embedding: Store, endpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(background, "MAX_WAITING", 1)
    endpoint.embeddings_held = threading.Event()
    try:
        held = put_fact(embedding, **READ, attribute="employer", value="Initech")
        _until(lambda: endpoint.embedding_requests == 1, "the first put's request, held")
        queued = put_fact(embedding, **READ, attribute="home_city", value="Utrecht")
        dropped = put_fact(embedding, tenant_id="acme", subject="jo", attribute="employer")
        assert not flush(stall_s=0.5)  # nothing moves while the endpoint holds its answer
    finally:
        endpoint.embeddings_held.set()
    assert flush()
    assert [_fact_vectors(embedding, put.fact.fact_id) for put in (held, queued, dropped)] == [
        1,
        1,
        0,
    ]
    assert fill_missing(embedding).facts == 1  # the next pass


@pytest.mark.slow
def test_an_http_put_answers_before_its_vector_is_made(
    embedding: Store, endpoint: Any, stub: Any, database_url: str, tmp_path: Path
) -> None:
    """Through `sgam serve`: the put's 201 comes while the endpoint still holds the embedding
    request, and the vector follows once it answers."""
    secret = create_key(embedding, {"tenant_id": "acme", "role": "writer"})[1]
    endpoint.embeddings_held = threading.Event()
    server = start_server(
        database_url,
        tmp_path,
        SGAM_EMBEDDING_MODEL=MODEL,
        SGAM_EMBEDDING_BASE_URL=stub.base_url,
    )
    try:
        with server.client(secret) as api:
            body = fact_body(attribute="employer", value="Initech", evidence="I repair cars")
            answered = api.put("/v1/facts", json=body)
            assert answered.status_code == 201, answered.text
            fact_id = answered.json()["fact"]["fact_id"]
            _until(lambda: endpoint.embedding_requests == 1, "the put's embedding request")
            assert _fact_vectors(embedding, fact_id) == 0  # answered; the vector is not made
            endpoint.embeddings_held.set()
            _until(lambda: _fact_vectors(embedding, fact_id) == 1, "the HTTP put's vector")
            found = api.get("/v1/subjects/mira/search", params={"query": "automobile"})
            assert [fact["value"] for fact in found.json()["facts"]] == ["Initech"]
    finally:
        endpoint.embeddings_held.set()
        stop_server(server)


# -- every writer's rows, through the store's one after-commit hook ---------------------------


def _without_vectors(store: Store) -> list[tuple[str, int]]:
    """The fact versions not forgotten that have no vector: (fact_id, version)."""
    with store.reading() as connection:
        rows = connection.execute(
            select(FactRow.fact_id, FactRow.version)
            .outerjoin(FactVectorRow, FactVectorRow.row_id == FactRow.row_id)
            .where(FactVectorRow.row_id.is_(None), FactRow.forgotten_at.is_(None))
        ).all()
    return sorted((fact_id, version) for fact_id, version in rows)


def _versions(store: Store) -> int:
    with store.reading() as connection:
        query = select(func.count()).select_from(FactRow).where(FactRow.forgotten_at.is_(None))
        return int(connection.execute(query).scalar_one())


def test_a_promotion_gets_the_vectors_of_the_versions_it_wrote(
    embedding: Store, endpoint: Any
) -> None:
    key = READ | {"attribute": "contact_channel"}
    put_fact(embedding, **key, value="phone", valid_from="2026-01-01T00:00:00Z")
    held = put_fact(
        embedding, **key, value="email", valid_from="2026-02-01T00:00:00Z", trust="untrusted"
    )
    assert flush()
    assert _without_vectors(embedding) == []
    before = endpoint.embedded_texts

    promoted = pipeline.promote(embedding, {"tenant_id": "acme", "fact_id": held.fact.fact_id})

    assert flush()  # no backfill: only what the promotion's commit handed on
    assert promoted.fact.version == 2
    assert _without_vectors(embedding) == []
    # Its new version and the cut version of the fact it supersedes; each embedded once.
    assert endpoint.embedded_texts - before == 2
    assert _fact_vectors(embedding, held.fact.fact_id) == 2


def test_a_dismissal_writes_no_vector_and_stops_one_in_flight(
    embedding: Store, endpoint: Any
) -> None:
    endpoint.embeddings_held = threading.Event()
    try:
        held = put_fact(embedding, **READ, attribute="employer", value="Initech", trust="untrusted")
        _until(lambda: endpoint.embedding_requests == 1, "the put's embedding request")
        dismissed = pipeline.dismiss(
            embedding, {"tenant_id": "acme", "fact_id": held.fact.fact_id, "reason": "spam"}
        )
    finally:
        endpoint.embeddings_held.set()
    assert flush()
    assert dismissed.fact.status.value == "dismissed"
    assert endpoint.embedding_requests == 1  # the dismissal inserted nothing to embed
    assert endpoint.embedded_texts == 1  # the put's vector was made, and not stored
    assert _vectors(embedding) == []
    assert fill_missing(embedding).facts == 0


def _expiring(store: Store, **fields: Any) -> PutResult:
    expires = store.clock() + timedelta(days=1)
    return put_fact(store, **READ, **fields, expires_at=expires.isoformat())


def test_an_expiry_gets_the_vectors_of_its_expired_versions(
    embedding: Store, endpoint: Any
) -> None:
    first = _expiring(embedding, attribute="employer", value="Initech")
    second = _expiring(embedding, attribute="home_city", value="Utrecht")
    assert flush()
    before = endpoint.embedded_texts

    later = embedding.clock() + timedelta(days=2)
    expired = pipeline.expire(embedding, {"now": later, "force": True})

    assert sorted(expired.expired_fact_ids) == sorted([first.fact.fact_id, second.fact.fact_id])
    assert flush()
    assert _without_vectors(embedding) == []
    assert endpoint.embedded_texts - before == 2
    assert _fact_vectors(embedding, first.fact.fact_id) == 2


def test_a_consolidation_gets_the_vectors_of_its_promotions_and_expiries(
    database_url: str, stub: Any, endpoint: Any, tmp_path: Path
) -> None:
    """The catalogue asked three sessions of a preference, now two: the consolidation
    promotes the candidate two sessions support, and expires a fact whose retention passed."""
    stricter = three_session_catalog(tmp_path)
    arm = {"embedding_model": MODEL, "embedding_base_url": stub.base_url}
    strict = open_store(isolated_settings(database_url=database_url, catalog_path=stricter, **arm))
    try:
        for day, session in ((1, "s1"), (2, "s2")):
            said = episode("I prefer concise answers.", f"2026-06-0{day}T09:00:00Z", session)
            pipeline.ingest(strict, said)
        due = _expiring(strict, attribute="employer", value="Initech")
    finally:
        assert flush()  # its vectors made before its engine is disposed (else the thread
        strict.dispose()  # opens connections on it that no one closes)
    relaxed = open_store(isolated_settings(database_url=database_url, **arm))
    try:
        assert flush()
        assert _without_vectors(relaxed) == []
        before = endpoint.embedded_texts

        report = pipeline.consolidate(
            relaxed, {"now": relaxed.clock() + timedelta(days=2), "force": True}
        )

        assert (report.counts["promoted"], report.counts["expired_facts"]) == (1, 1)
        assert _without_vectors(relaxed) == []  # consolidation waited for them
        assert _fact_vectors(relaxed, due.fact.fact_id) == 2
        # The promoted fact and the expired version, each embedded once: the backfill after
        # them found nothing left.
        assert endpoint.embedded_texts - before == 2
    finally:
        relaxed.dispose()


def _replay_target(database_url: str, tmp_path: Path) -> str:
    if database_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'rebuilt.sqlite3'}"
    from tests.databases import new_database

    return new_database("vectors")


def test_a_replay_gets_the_vectors_of_the_ledger_it_rebuilds(
    embedding: Store, stub: Any, endpoint: Any, database_url: str, tmp_path: Path
) -> None:
    _episodes(embedding)
    key = READ | {"attribute": "contact_channel"}
    put_fact(embedding, **key, value="phone", valid_from="2026-01-01T00:00:00Z")
    held = put_fact(
        embedding, **key, value="email", valid_from="2026-02-01T00:00:00Z", trust="untrusted"
    )
    pipeline.promote(embedding, {"tenant_id": "acme", "fact_id": held.fact.fact_id})
    _expiring(embedding, attribute="employer", value="Initech")
    pipeline.expire(embedding, {"now": embedding.clock() + timedelta(days=2), "force": True})
    assert flush()
    before = endpoint.embedded_texts

    url = _replay_target(database_url, tmp_path)
    settings = isolated_settings(
        database_url=url, embedding_model=MODEL, embedding_base_url=stub.base_url
    )
    target = Store(settings, catalog=embedding.catalog, after_commit=[after_commit])
    try:
        pipeline.replay(embedding, target)
        assert flush()
        assert _versions(target) == _versions(embedding) > 4
        assert _without_vectors(target) == []
        assert _count(target, EpisodeVectorRow) == 3
        assert endpoint.embedded_texts - before == _versions(target) + 3
        assert fill_missing(target) == Filled()  # nothing was left to the next pass
    finally:
        target.dispose()
        if not database_url.startswith("sqlite"):
            from tests.databases import drop_database

            drop_database(url)


class _Refused(Exception):
    pass


def test_a_unit_rolled_back_hands_on_nothing(embedding: Store, endpoint: Any) -> None:
    def refused(unit: Any) -> None:
        pipeline.write_fact(unit, fact_command(**READ, attribute="employer", value="Initech"))
        raise _Refused

    with pytest.raises(_Refused):
        embedding.run(refused)

    assert flush()
    assert _versions(embedding) == 0
    assert endpoint.embedding_requests == 0
    assert _vectors(embedding) == []


def test_a_failing_hook_leaves_the_commit_standing(database_url: str) -> None:
    seen: list[Written] = []

    def failing(store: Store, written: Written) -> None:
        seen.append(written)
        raise RuntimeError("a hook that fails")

    store = open_db_store(isolated_settings(database_url=database_url), after_commit=[failing])
    try:
        put = put_fact(store, **READ, attribute="employer", value="Initech")
        assert [written.facts for written in seen] == [{"acme": {put.fact.fact_id}}]
        assert [fact.value for fact in pipeline.get(store, READ)] == ["Initech"]
    finally:
        store.dispose()
